"""Fingerprints: what makes a baseline comparable with the current state."""

from __future__ import annotations

from pathlib import Path

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
