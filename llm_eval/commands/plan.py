"""`llm-eval gold plan`: how many questions each gated scope needs to catch a drop of
`--catch` times its limit, and the areas to write them for (from the baseline's
per-query scores when there is one)."""

from __future__ import annotations

from pathlib import Path

from llm_eval.authoring.neighbours import make_plan
from llm_eval.authoring.plan_view import plan_json, plan_text
from llm_eval.baseline_io import load_baseline
from llm_eval.errors import InputError
from llm_eval.pipeline import load_inputs
from llm_eval.power_io import PowerCache
from llm_eval.textio import write_atomic


def run_plan(
    config_path: Path,
    criteria_path: Path,
    catch: float,
    out: Path | None,
    width: int,
    baseline_path: Path | None = None,
) -> str:
    """Plan from the baseline's per-query scores (`--baseline`, else the config's), write
    plan.json, return the terminal text."""
    if not catch > 1:
        raise InputError(f"--catch must be above 1 (a multiple of the limit), got {catch:g}")
    inputs = load_inputs(config_path, criteria_path)
    baseline = load_baseline(baseline_path or inputs.config.baseline)
    scores, builds = (None, ()) if baseline is None else (baseline.per_query, baseline.builds)
    needs, found = make_plan(inputs, catch, scores, builds, PowerCache.under(inputs.config.output))
    path = out or inputs.config.output / "plan.json"
    write_atomic(path, plan_json(needs, catch, found.areas_by))
    return f"{plan_text(needs, catch, width, found.areas_by)}\n\nWrote {path}"
