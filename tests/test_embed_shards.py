"""`llm-eval embed --shard I/N` and `embed --merge`: the corpus's vectors embedded in
shards by real processes at once into one cache folder, against the stub endpoint on
127.0.0.1 (hashed bag-of-words vectors), joined into another project's store, which
then retrieves exactly as a single process does without embedding a document."""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
from conftest import Cli

from llm_eval.retrievers.vector_store import VectorStore, text_key
from llm_eval.shards import shard_number

LLM_EVAL = [sys.executable, "-m", "llm_eval.cli"]

DOCS = [
    {"_id": f"doc-{n}", "title": f"Topic {n % 9}", "text": f"passage {n} about words {n % 13}"}
    for n in range(80)
]
GOLD = [
    {"query_id": f"q{n}", "query": f"words {n} topic {n % 9}", "relevant": [f"doc-{n}"]}
    for n in range(12)
]


def project(root: Path, url: str, output: str, prefix: str = "") -> Path:
    """A project with an embedding retriever on the stub; returns its config."""
    root.mkdir(parents=True, exist_ok=True)
    (root / "corpus.jsonl").write_text("".join(json.dumps(d) + "\n" for d in DOCS))
    (root / "gold.jsonl").write_text("".join(json.dumps(q) + "\n" for q in GOLD))
    retriever = {
        "kind": "embedding",
        "base_url": url,
        "model": "stub-embed",
        "retries": 0,
        "document_prefix": prefix,
    }
    config = root / f"llm-eval-{output}.yaml"
    config.write_text(
        f"gold: [{root / 'gold.jsonl'}]\n"
        f"corpus: {root / 'corpus.jsonl'}\n"
        f"retriever: {json.dumps(retriever)}\n"
        "metrics: [recall@5, mrr]\n"
        f"output: {root / output}\n"
    )
    return config


def store_of(root: Path, output: str) -> VectorStore:
    """The one vector store under the project's output folder."""
    (folder,) = (root / output / "cache" / "embedding").iterdir()
    return VectorStore.open(folder)


def ranked(path: Path) -> dict[str, list[tuple[str, float]]]:
    """Each query's ranking and scores in a run file."""
    rows = [json.loads(line) for line in path.read_text().splitlines()]
    return {r["query_id"]: [(h["doc_id"], h["score"]) for h in r["results"]] for r in rows}


def embed_at_once(config: Path, parts: Path, count: int) -> None:
    """`embed --shard I/count` for every I, as processes running at the same time."""
    embed = [*LLM_EVAL, "embed", "--config", str(config)]
    children = [
        subprocess.Popen(
            [*embed, "--shard", f"{i}/{count}", "--out", str(parts / f"part-{i}")],
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )
        for i in range(1, count + 1)
    ]
    for i, child in enumerate(children, start=1):
        out, err = child.communicate(timeout=120)
        assert child.returncode == 0, err
        shard_docs = sum(shard_number(d["_id"], count) == i for d in DOCS)
        assert out.startswith(f"Wrote {parts / f'part-{i}'}, shard {i}/{count} of the vectors")
        assert f"({shard_docs} documents" in out


@pytest.fixture(scope="module")
def sharded(tmp_path_factory: pytest.TempPathFactory, stub_endpoint: Any) -> dict[str, Any]:
    """Three shards embedded at once into one cache folder; their parts; a single
    process's run."""
    root = tmp_path_factory.mktemp("embed")
    config = project(root, stub_endpoint.url, "shared")
    embed_at_once(config, root / "parts", 3)
    single = project(root, stub_endpoint.url, "single")
    retrieve = ["retrieve", "--config", str(single), "--out", str(root / "single.jsonl")]
    subprocess.run([*LLM_EVAL, *retrieve], check=True, capture_output=True)
    return {"root": root, "parts": root / "parts", "url": stub_endpoint.url}


def test_shards_embedding_at_once_into_one_cache_lose_no_vector(sharded: dict[str, Any]) -> None:
    store = store_of(sharded["root"], "shared")
    keys = {text_key(f"{d['title']} {d['text']}") for d in DOCS}
    assert keys <= set(store.rows)
    assert store.ignored == 0
    assert not list((sharded["root"] / "shared").rglob("*.tmp"))


def test_merged_parts_retrieve_as_one_process_without_embedding_a_document(
    sharded: dict[str, Any], cli: Cli, stub_endpoint: Any
) -> None:
    root = sharded["root"]
    config = project(root, stub_endpoint.url, "merged")
    code, out, err = cli("embed", "--config", config, "--merge", sharded["parts"] / "*")
    assert (code, err) == (0, "")
    assert out == (
        f"Joined 3 parts into {store_of(root, 'merged').folder}: 80 vectors added, "
        "80 documents in the corpus.\n"
    )
    before = len(stub_endpoint.requests)
    code, _, err = cli("retrieve", "--config", config, "--out", root / "merged.jsonl")
    assert code == 0, err
    asked = [text for r in stub_endpoint.requests[before:] for text in r.get("input", [])]
    assert sorted(asked) == sorted(q["query"] for q in GOLD)  # the queries only
    assert ranked(root / "merged.jsonl") == ranked(root / "single.jsonl")


@pytest.mark.parametrize(
    ("given", "message"),
    [
        (
            ["part-1", "part-2"],
            "shard 3/3 of the vectors is missing; given: {parts}/part-1 (1/3), "
            "{parts}/part-2 (2/3)",
        ),
        (["part-1", "part-2", "part-1", "part-3"], "{parts}/part-1: is shard 1/3 again (also "),
    ],
)
def test_a_missing_or_repeated_part_is_refused(
    sharded: dict[str, Any], cli: Cli, given: list[str], message: str
) -> None:
    root, parts = sharded["root"], sharded["parts"]
    config = project(root, sharded["url"], "refused")
    code, _, err = cli("embed", "--config", config, "--merge", *[parts / g for g in given])
    assert code == 3
    assert err.startswith("llm-eval: error: " + message.format(parts=parts))
    assert err.count("\n") == 1


def test_a_part_of_another_model_or_cut_short_is_refused(
    sharded: dict[str, Any], cli: Cli, tmp_path: Path
) -> None:
    parts = sharded["parts"]
    config = project(tmp_path, sharded["url"], "other", prefix="passage: ")
    code, _, err = cli("embed", "--config", config, "--merge", parts / "*")
    assert code == 3
    assert err.startswith(
        f"llm-eval: error: {parts}/part-1: is a part of vectors with another embedding model "
        "or document fields (embedding fingerprint "
    )
    cut = tmp_path / "cut"
    shutil.copytree(parts, cut)
    batch = sorted((cut / "part-2").glob("batch-*.npz"))[0]
    batch.write_bytes(batch.read_bytes()[:100])  # a batch file cut short
    config = project(tmp_path, sharded["url"], "cut")
    code, _, err = cli("embed", "--config", config, "--merge", cut / "*")
    assert code == 3
    owned = sum(shard_number(d["_id"], 3) == 2 for d in DOCS)
    assert err.startswith(f"llm-eval: error: {cut}/part-2: lacks ")
    assert f"of shard 2/3's {owned} corpus documents (first 'doc-" in err
    assert err.endswith("'): a part cut short?\n")


def test_a_part_needs_an_empty_folder_and_an_embedding_retriever(
    sharded: dict[str, Any], cli: Cli, tmp_path: Path
) -> None:
    config = project(tmp_path, sharded["url"], "out")
    code, _, err = cli(
        "embed", "--config", config, "--shard", "1/3", "--out", sharded["parts"] / "part-1"
    )
    assert code == 3
    assert err == (
        f"llm-eval: error: {sharded['parts']}/part-1: is not empty: a part is written into a "
        "folder of its own\n"
    )
    lines = [line for line in config.read_text().splitlines() if "retriever" not in line]
    config.write_text("\n".join([*lines, "retriever: {kind: bm25}"]) + "\n")
    code, _, err = cli("embed", "--config", config, "--merge", sharded["parts"] / "*")
    assert code == 3
    assert "embed needs `retriever: {kind: embedding, …}`" in err
