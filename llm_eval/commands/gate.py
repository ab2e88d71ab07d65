"""`llm-eval gate`: retrieve (or read a run), evaluate, compare, write the report."""

from __future__ import annotations

import os
import time
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import TYPE_CHECKING

from llm_eval import __version__
from llm_eval.against_baseline import compare
from llm_eval.baseline_io import load_baseline
from llm_eval.docs_address import docs_address
from llm_eval.errors import RetrieverFailed
from llm_eval.fingerprint_io import fingerprints
from llm_eval.formats import RenderOptions, get_format, written_formats
from llm_eval.formats._markup import NO_LINKS, Links
from llm_eval.gitinfo import folder_in_repository, head_commit
from llm_eval.history.gates import recent_baselines
from llm_eval.history.series_io import load_references
from llm_eval.inputs import JudgeOptions
from llm_eval.installation_io import installed_source
from llm_eval.pipeline import check_labels, load_inputs, measure_builds
from llm_eval.power_io import PowerCache
from llm_eval.report import build_report, failed_report
from llm_eval.report_schema import validate_report
from llm_eval.report_types import Report
from llm_eval.retrieval import RetrieveOptions, obtain_retrieval, retrieval_notes
from llm_eval.textio import write_atomic, write_together

if TYPE_CHECKING:
    from llm_eval.judge.calls import JudgePlan


@dataclass(frozen=True, slots=True)
class GateOutcome:
    """What the command prints and returns."""

    report: Report
    notes: tuple[str, ...]
    report_path: Path
    exit_code: int
    failure: RetrieverFailed | None = None
    """The retriever failed (the report says so): the command ends with this error."""

    def text(self, width: int = 80, coloured: bool = False, ascii: bool = False) -> str:
        """The terminal rendering at this width, with the retrieval notes and, last, the
        path of report.md (the one to read; report.json, for tools, is beside it)."""
        options = RenderOptions(width, coloured, ascii=ascii)
        verdict = get_format("text").render(self.report, options)
        readable = self.report_path.with_name("report.md")
        return "\n".join([verdict, *self.notes, f"Report: {readable} (report.json beside it)"])


def run_gate(
    *,
    config_path: Path,
    criteria_path: Path,
    baseline_path: Path | None = None,
    run_paths: Sequence[Path] = (),
    out_dir: Path | None = None,
    allow_gold_change: bool = False,
    retrieve_options: RetrieveOptions | None = None,
    judge_options: JudgeOptions | None = None,
) -> GateOutcome:
    """The gate end to end; writes the report in every written format (report.json,
    report.md, report.junit.xml) to the output folder, whose cache keeps the power
    statements' figures (`power_io.py`). `run_paths`: a run file, or the parts of a
    sharded run, in the retriever's place. When the retriever fails on more queries
    than `max_error_rate` allows, the report says so, and the outcome holds the error."""
    started = time.perf_counter()
    inputs = load_inputs(config_path, criteria_path)
    out = out_dir or inputs.config.output
    check_labels(inputs)
    baseline_file = baseline_path or inputs.config.baseline
    baseline = load_baseline(baseline_file, (q.query_id for q in inputs.gold.queries))
    references = load_references(inputs.criteria.gates, baseline_file)
    history = recent_baselines(inputs, Path(baseline_file))
    loaded = time.perf_counter()
    try:
        retrieval = obtain_retrieval(inputs, run_paths, retrieve_options)
    except RetrieverFailed as failure:
        report = failed_report(
            inputs,
            failure.summary,
            str(failure),
            baseline,
            baseline_path=str(baseline_file),
            fingerprints=fingerprints(inputs, run_paths[0] if len(run_paths) == 1 else None),
            head_commit=head_commit(),
            timings={"load_s": loaded - started, "total_s": time.perf_counter() - started},
            tool_version=__version__,
            now=datetime.now(UTC),
            repo_folder=folder_in_repository(),
        )
        return _written(report, out, (), failure)
    run_file = retrieval.run_file
    retrieved = time.perf_counter()
    measurement = measure_builds(inputs, retrieval.each_build, judge_options)
    notes, from_cache = tuple(retrieval_notes(retrieval)), retrieval.from_cache
    del retrieval  # the run's results are scored: what follows reads the scores alone
    powers = PowerCache.under(out)
    comparison = compare(inputs, measurement, baseline, allow_gold_change, references, powers)
    evaluated = time.perf_counter()
    report = build_report(
        inputs,
        measurement,
        comparison,
        baseline,
        baseline_path=str(baseline_file),
        fingerprints=fingerprints(inputs, run_file),
        head_commit=head_commit(),
        timings={
            "load_s": loaded - started,
            "retrieve_s": retrieved - loaded,
            "evaluate_s": evaluated - retrieved,
            "total_s": time.perf_counter() - started,
        },
        tool_version=__version__,
        now=datetime.now(UTC),
        from_cache=from_cache,
        repo_folder=folder_in_repository(),
        history=history,
    )
    return _written(report, out, notes)


def _written(
    report: Report, out: Path, notes: tuple[str, ...], failure: RetrieverFailed | None = None
) -> GateOutcome:
    """The report checked and written in every format to `out`, as the outcome."""
    validate_report(report, out / "report.json")  # every rendering reads this record
    docs = docs_address(os.environ, installed_source())
    write_together(rendered_whole(report, out, Links(docs=docs)))
    ignore = out / ".gitignore"
    if not ignore.exists():  # the reports are outputs, never to be committed by accident
        write_atomic(ignore, "*\n")
    return GateOutcome(report, notes, out / "report.json", report["exit_code"], failure)


def rendered_whole(report: Report, out: Path, links: Links = NO_LINKS) -> list[tuple[Path, str]]:
    """Each written format's file in `out` and its text (report.md with `links`), every
    one rendered before any is written: a renderer that raises leaves the previous
    reports as they were, never a new report.json beside a stale report.md."""
    rendered = []
    options = RenderOptions(links=links)
    for output in written_formats():
        assert output.filename is not None
        rendered.append((out / output.filename, output.render(report, options)))
    return rendered


def judge_dry_run(
    *,
    config_path: Path,
    criteria_path: Path,
    run_paths: Sequence[Path] = (),
    retrieve_options: RetrieveOptions | None = None,
    repeat: int = 1,
) -> str:
    """Retrieve, then say what judging would ask and cost, without asking anything."""
    from llm_eval.judge.step import judged_metrics, plan_judging

    inputs = load_inputs(config_path, criteria_path)
    if not judged_metrics(inputs):
        return "llm-eval gate --dry-run: no judged metric is configured; nothing would be asked."
    run = obtain_retrieval(inputs, run_paths, retrieve_options).run
    plan = plan_judging(inputs, run, repeat)
    asked = plan.calls - plan.cached
    return (
        f"llm-eval gate --dry-run: the judge would be asked {asked:,} of {plan.calls:,} calls "
        f"({plan.cached:,} are answered by the call cache): about {plan.prompt_tokens:,} "
        f"prompt and {plan.answer_tokens:,} answer tokens, an estimated cost of "
        f"{plan.cost:.4f} at the configured prices ({_rate(plan)}). Nothing was asked."
    )


def _rate(plan: JudgePlan) -> str:
    """How the prompt tokens were estimated."""
    if plan.measured:
        return "tokens per character as the endpoint counted them on the cached calls"
    return "about 4 characters a token: no cached call yet to measure the endpoint by"
