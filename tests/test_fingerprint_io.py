"""Fingerprints: what makes a baseline comparable with the current state."""

from __future__ import annotations

from pathlib import Path

import pytest

from llm_eval.fingerprint_io import fingerprints
from llm_eval.pipeline import load_inputs


def prints(config: Path) -> dict[str, str | None]:
    return fingerprints(load_inputs(config, Path("config/ship-criteria.yaml")), None)


def test_scoring_settings_change_only_the_scoring_fingerprint(demo_project: Path) -> None:
    base = prints(Path("config/llm-eval.yaml"))
    changed = demo_project / "config" / "tolerant.yaml"
    text = (demo_project / "config" / "llm-eval.yaml").read_text()
    changed.write_text(text + "page_tolerance: 2\n")
    other = prints(changed)
    assert {k for k in base if base[k] != other[k]} == {"scoring"}


def test_a_run_file_retriever_counts_by_content(demo_project: Path) -> None:
    run = demo_project / "run.jsonl"
    run.write_text('{"query_id": "a-001", "results": ["builtins.sorted#0"]}\n')
    text = (demo_project / "config" / "llm-eval.yaml").read_text()
    config = demo_project / "config" / "runfile.yaml"
    config.write_text(
        text.replace(
            "  kind: bm25         # BM25 over the corpus (title + text), Lucene's defaults\n"
            "  k1: 0.9\n  b: 0.4\n",
            "  kind: run\n  path: run.jsonl\n",
        )
    )
    first = prints(config)["retriever"]
    run.write_text('{"query_id": "a-001", "results": ["builtins.list.sort#0"]}\n')
    second = prints(config)["retriever"]
    assert first is not None and first.startswith("run:")
    assert first != second


def test_a_model_on_disk_counts_by_its_files_not_its_path(demo_project: Path) -> None:
    """The baseline refreshed on a laptop compares with CI, where the model lies elsewhere."""
    text = (demo_project / "config" / "llm-eval.yaml").read_text()
    folders = [demo_project / "here", demo_project / "there"]
    for folder in folders:
        folder.mkdir()
        (folder / "modules.json").write_text("[]")
    configs = []
    for folder in folders:
        config = demo_project / "config" / f"{folder.name}.yaml"
        config.write_text(
            text.replace(
                "  kind: bm25         # BM25 over the corpus (title + text), Lucene's defaults\n"
                "  k1: 0.9\n  b: 0.4\n",
                f"  kind: fusion\n  retrievers:\n    lexical: {{kind: bm25}}\n"
                f"    dense: {{kind: embedding, model_path: {folder}}}\n",
            )
        )
        configs.append(config)
    here, there = (prints(c)["retriever"] for c in configs)
    assert here == there
    (folders[1] / "model.safetensors").write_bytes(b"other weights")
    assert prints(configs[1])["retriever"] != here


KIND_SECTIONS = {
    "bm25": "  kind: bm25\n  k1: 1.2\n  b: 0.75\n  stopwords: [The, a]\n  stemmer: english\n",
    "run": "  kind: run\n  path: run.jsonl\n  format: jsonl\n",
    "http": (
        "  kind: http\n  url: http://127.0.0.1:9/search\n"
        '  body: {q: "${query}", size: "${top_k}"}\n  headers: {X-Team: search}\n'
        "  results_path: data.hits\n  fields: {doc_id: id, score: _score}\n"
        "  concurrency: 2\n  timeout_s: 5\n  retries: 1\n  cache_key: v1\n"
    ),
    "python": (
        "  kind: python\n  target: my_rag.search:Retriever\n  init: {index: main, size: 3}\n"
        "  python_path: [src]\n  concurrency: 2\n"
    ),
    "embedding": (
        "  kind: embedding\n  base_url: http://127.0.0.1:9/v1\n  model: e5\n"
        '  query_prefix: "query: "\n  document_prefix: "passage: "\n  batch_size: 16\n'
        "  fields: [text]\n"
    ),
    "mcp": (
        "  kind: mcp\n  command: [python, server.py]\n  cwd: tools\n  tool: find\n"
        '  arguments: {q: "${query}", n: "${top_k}"}\n  concurrency: 2\n'
    ),
    "fusion": (
        "  kind: fusion\n  method: weighted\n  weights: {lexical: 0.3, dense: 0.7}\n"
        "  depth: 50\n  normalization: zscore\n  retrievers:\n"
        "    lexical: {kind: bm25, k1: 1.0}\n    dense: {kind: embedding, model_path: model}\n"
    ),
}
"""One `retriever:` section per kind, most settings away from their defaults."""

PINNED = {
    "bm25": "91b71cc46af836dd",
    "run": "run:274662c2119af38e",
    "http": "c983a34e447cfc2b",
    "python": "8090531e83bb6122",
    "embedding": "2d060af6d1f95ff1",
    "mcp": "dbce85a31e034a36",
    "fusion": "dc3e0801623dc0d5",
}
"""The retriever fingerprint of each section, computed before the kinds' settings became
typed records: a baseline refreshed before then must compare with one refreshed after."""


@pytest.mark.parametrize("kind", KIND_SECTIONS)
def test_the_retriever_fingerprint_of_each_kind_is_pinned(demo_project: Path, kind: str) -> None:
    (demo_project / "run.jsonl").write_text('{"query_id": "a-001", "results": ["x#0"]}\n')
    (demo_project / "model").mkdir()
    (demo_project / "model" / "modules.json").write_text("[]")
    text = (demo_project / "config" / "llm-eval.yaml").read_text()
    config = demo_project / "config" / f"{kind}.yaml"
    config.write_text(
        text.replace(
            "  kind: bm25         # BM25 over the corpus (title + text), Lucene's defaults\n"
            "  k1: 0.9\n  b: 0.4\n",
            KIND_SECTIONS[kind],
        )
    )
    assert prints(config)["retriever"] == PINNED[kind]
