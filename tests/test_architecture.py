"""The layout ARCHITECTURE.md describes: a pure core that reads no file.

The core (metrics, stats, gate, slices, matching, wording) decides and words the
verdict from records; reading YAML, JSONL, run files and the network happens at
the edges. Each import is checked in a fresh interpreter, so that what another
test imported cannot hide a dependency.
"""

from __future__ import annotations

import json
import subprocess
import sys

import pytest

CORE = [
    "llm_eval.metrics",
    "llm_eval.stats",
    "llm_eval.gate",
    "llm_eval.criteria",
    "llm_eval.slices",
    "llm_eval.matching",
    "llm_eval.wording",
    "llm_eval.gold",
    "llm_eval.runs",
    "llm_eval.scoring",
    "llm_eval.ab_compare",
    "llm_eval.experiment",
    "llm_eval.ranking",
    "llm_eval.coverage",
    "llm_eval.gold_plan",
    "llm_eval.synthesis",
    "llm_eval.versions",
]
IO_MODULES = {
    "yaml",
    "httpx",
    "jinja2",
    "github",
    "llm_eval.config",
    "llm_eval.yamlfile",
    "llm_eval.textio",
    "llm_eval.gold_io",
    "llm_eval.run_io",
    "llm_eval.baseline",
    "llm_eval.versions_io",
    "llm_eval.pipeline",
}


def loaded_after_import(module: str) -> set[str]:
    code = f"import sys, json, {module}; print(json.dumps(sorted(sys.modules)))"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    return set(json.loads(out.stdout))


@pytest.mark.parametrize("module", CORE)
def test_the_core_imports_no_io_module(module: str) -> None:
    assert loaded_after_import(module) & IO_MODULES == set()


def test_the_check_sees_an_io_import() -> None:
    """The same check flags a module that does read files, so it can fail."""
    assert {"yaml", "llm_eval.yamlfile"} <= loaded_after_import("llm_eval.config")
