"""`llm-eval gold coverage`: what the gold set covers of the corpus (no baseline needed).

Coverage lists every label naming a document the corpus lacks (which `gold validate`
stops at, first one only).
"""

from __future__ import annotations

from pathlib import Path

from llm_eval.authoring.coverage_view import coverage_json, coverage_text
from llm_eval.authoring.neighbours import measure_coverage
from llm_eval.pipeline import load_inputs
from llm_eval.textio import write_atomic


def run_coverage(config_path: Path, criteria_path: Path, out: Path | None, width: int) -> str:
    """Measure, write coverage.json, return the terminal text."""
    inputs = load_inputs(config_path, criteria_path)
    _, found = measure_coverage(inputs)
    path = out or inputs.config.output / "coverage.json"
    write_atomic(path, coverage_json(found))
    return f"{coverage_text(found, width)}\n\nWrote {path}"
