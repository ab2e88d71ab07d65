"""Every surface states what the core decided, and decides nothing itself.

The verdict is decided once: `llm_eval.gate` (`decide`, `decide_slices`, `verdict`,
`blocks`), `llm_eval.gate_entries` (`gate_entry`) and `llm_eval.report` (the report's
verdict, exit code and summary). Here random decision records go through that core,
are assembled into full reports the way `build_report` assembles them, and every
report is rendered on every surface: the terminal (80 columns, with and without
colour), report.json, the Markdown report and PR comment, JUnit XML and the GitHub
Action's outputs and annotations. Each surface must show every gate and tag slice
with the status of its record, agree with the verdict and exit code, show only finite
numbers, and fit its medium.
"""

from __future__ import annotations

import functools
import importlib.util
import json
import math
import random
import re
import shutil
import subprocess
import sys
from collections.abc import Mapping, Sequence
from dataclasses import replace
from pathlib import Path
from typing import Any, Literal
from xml.etree import ElementTree as ET

import pytest
import yaml
from conftest import gold_query
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from llm_eval import report as core_report
from llm_eval.actions import regression_annotations
from llm_eval.against_baseline import Comparison, decide_gates
from llm_eval.baseline import Baseline
from llm_eval.criteria import Gate, Location, Scope, Severity, Statistics
from llm_eval.criteria_io import load_criteria
from llm_eval.docs_address import Docs, Installed
from llm_eval.errors import ExitCode, InputError
from llm_eval.fingerprint import GoldDiff
from llm_eval.formats import RenderOptions, get_format
from llm_eval.formats._markdown_tables import STATUS_ICON
from llm_eval.formats._markup import Links, escape_markdown
from llm_eval.formats.markdown import COMMENT_MARKER, render_comment, render_markdown
from llm_eval.formats.text import render_text
from llm_eval.gate import (
    GateResult,
    LabelCoverage,
    Power,
    SliceInput,
    allowed_change,
    blocks,
    decide,
    decide_slices,
    verdict,
)
from llm_eval.gate_entries import gate_entry
from llm_eval.judged.arithmetic import Calibration, JudgeSummary
from llm_eval.metrics import families, parse_metric
from llm_eval.output import in_ascii
from llm_eval.report_schema import VERDICTS, validate_report
from llm_eval.slices import ScoreTable
from llm_eval.stats import MarginTest, holm, holm_levels
from llm_eval.wording.gates import STATUS_WORDS, on_the_limit, sentence
from llm_eval.wording.gates import value as metric_value
from llm_eval.wording.report_lines import headline

xmlschema = pytest.importorskip("xmlschema")

REPO = Path(__file__).resolve().parents[1]
REPORTS = Path(__file__).parent / "gold" / "reports"
FIXTURES = sorted(p.stem for p in REPORTS.glob("*.json"))
JUNIT_SCHEMA = xmlschema.XMLSchema(str(Path(__file__).parent / "data" / "junit.xsd"))
WIDTH = 80
JSON, TEXT, JUNIT = (get_format(name) for name in ("json", "text", "junit"))
"""Looked up once: each look-up lists the formats package's modules."""

ANSI = re.compile(r"\x1b\[[0-9;]*m")
NON_FINITE_WORD = re.compile(r"(?<![\w.])[+\-−]?(?:inf(?:inity)?|nan)(?!\w)", re.IGNORECASE)
"""A non-finite number written out: `inf`, `+inf pp`, `−Infinity`, `nan%`, `NaN`."""
UNESCAPED_PIPE = re.compile(r"(?<!\\)\|")


def load(name: str) -> dict[str, Any]:
    return json.loads((REPORTS / f"{name}.json").read_text(encoding="utf-8"))


# --- decision records, drawn at random and decided by the core ------------------------

HERE = Location("config/ship-criteria.yaml", 1, "gates[0]")
METRICS = ("recall@5", "mrr", "ndcg@10", "hit_rate@5", "latency_p95")
SCOPES = (Scope(), Scope(tier="A"), Scope(tags=("howto",)))
TAGS = ("howto", "files", "data", "lookup", "network")
NAMES = ("retrieval_recall", "quality", "latency-budget", "gate")
SEVERITIES: tuple[Severity, ...] = ("error", "warning")
LOW_END, HIGH_END = -1.0, 1.0
"""The possible range of a per-query worsening of a score in [0, 1]."""

# Strategies are built once: building one per draw costs more than rendering a report.
UNIT = st.floats(0.0, 1.0)
SCORE = st.one_of(st.sampled_from((0.0, 0.3, 0.5, 0.85, 0.9, 1.0)), UNIT)
"""A mean score, often a round number (so that values meet limits and baselines)."""
BOOLEAN = st.booleans()
ONE_IN = {k: st.integers(0, k - 1).map(lambda i: i == 0) for k in (3, 4, 5, 6)}
ABSOLUTE_LIMIT = st.one_of(st.sampled_from((0.0, 0.03, 0.05)), st.floats(0.0, 0.2))
RELATIVE_LIMIT = st.floats(0.0, 0.5)
STATISTICS = st.builds(
    Statistics,
    alpha=st.sampled_from((0.05, 0.1, 0.01)),
    significance=ONE_IN[6].map(lambda off: not off),
    min_n=st.sampled_from((1, 5, 30)),
    on_inconclusive=st.sampled_from((None, "fail", "warn")),
)
DATA = st.sampled_from(("scored",) * 6 + ("nan", "empty"))
BASELINE = st.sampled_from(("none", "equal", "random", "random", "on_limit", "nan"))
TAG_LISTS = st.lists(st.sampled_from(TAGS), unique=True, max_size=4)
MAYBE_DROP = st.none() | st.floats(0.001, 0.5)
GATE_KIND = st.tuples(
    st.sampled_from(METRICS),
    st.sampled_from(NAMES),
    st.sampled_from(SEVERITIES),
    st.sampled_from(SCOPES),
)
GOLD = st.sampled_from(("same", "same", "same", "accepted", "changed"))
GOLD_IDS = st.lists(st.sampled_from(("a-187", "a-188", "b-012", "c-3")), unique=True)


def between(draw: st.DrawFn, low: float, high: float) -> float:
    """A number in [low, high]."""
    return min(high, max(low, low + (high - low) * draw(UNIT)))


def above(draw: st.DrawFn, low: float, high: float) -> float:
    """A number in (low, high], for low < high."""
    x = between(draw, low, high)
    return high if x <= low else x


def below(draw: st.DrawFn, low: float, high: float) -> float:
    """A number in [low, high), for low < high."""
    x = between(draw, low, high)
    return low if x >= high else x


def count(draw: st.DrawFn, low: int, high: int) -> int:
    """A whole number in [low, high]."""
    return low + min(high - low, int(draw(UNIT) * (high - low + 1)))


def p_beyond_limit(draw: st.DrawFn, worsening: float, limit: float, alpha: float) -> float:
    """A one-sided p-value against "within the limit": above alpha unless the estimate
    lies beyond the limit, and then often small enough to decide (with both signs turned,
    the p-value against "beyond the limit")."""
    if worsening <= limit:
        return above(draw, alpha, 1.0)
    return between(draw, 0.0, alpha / 4) if draw(BOOLEAN) else draw(UNIT)


def draw_margin(
    draw: st.DrawFn,
    *,
    n: int,
    worsening: float,
    limit: float,
    level: float,
    changed: int,
    exact: bool,
    p_beyond: float | None = None,
) -> MarginTest:
    """A test against the limit whose bounds agree with its p-values at `level`, as
    `stats.tested_margin` guarantees: `low` lies beyond the limit exactly when
    `p_beyond <= level`, `high` within it exactly when `p_within <= level`; low <= high,
    both finite, an end of the range marked open. A side can only be rejected when the
    point estimate lies on that side."""
    if p_beyond is None:
        p_beyond = p_beyond_limit(draw, worsening, limit, level)
    low_open = high_open = False
    if p_beyond <= level:
        low = above(draw, limit, worsening)
    else:
        top = min(limit, worsening)
        low_open = draw(ONE_IN[5])
        low = LOW_END if low_open else between(draw, max(LOW_END, top - 0.5), top)
    p_within = p_beyond_limit(draw, -worsening, -limit, level)  # the other side's test
    if p_within <= level:
        high = below(draw, max(worsening, low), limit)
    else:
        bottom = max(limit, worsening, low)
        high_open = draw(ONE_IN[5])
        high = max(bottom, HIGH_END) if high_open else between(draw, bottom, bottom + 0.5)
    went_worse = count(draw, 0, changed) if exact else None
    return MarginTest(
        n=n,
        worsening=worsening,
        low=low,
        high=high,
        confidence=1.0 - 2.0 * level,
        p_beyond=p_beyond,
        p_within=p_within,
        spread=draw(UNIT),
        method="exact-unconditional" if exact else "betting",
        went_worse=went_worse,
        went_better=None if went_worse is None else changed - went_worse,
        low_open=low_open,
        high_open=high_open,
        changed=changed,
    )


def worsening_of(gate: Gate, value: float, baseline: float) -> float:
    return value - baseline if parse_metric(gate.metric).lower_is_better else baseline - value


def draw_changed(draw: st.DrawFn, n: int, value: float, baseline: float) -> int:
    """Queries whose score moved: none only when the means are equal."""
    if value == baseline and draw(BOOLEAN):
        return 0
    return count(draw, 1, max(1, n))


def slice_inputs(draw: st.DrawFn, gate: Gate, n: int) -> list[SliceInput]:
    """The gate's tag slices as `comparison` builds them: the judged ones that moved form
    one Holm family (adjusted p-values, intervals at `holm_levels`); the others keep an
    interval at alpha; with `significance: off` no test is run at all."""
    alpha, min_n = gate.statistics.alpha, gate.statistics.min_n
    exact = gate.metric in ("recall@5", "hit_rate@5") and draw(BOOLEAN)
    pieces = []
    for tag in draw(TAG_LISTS):
        size = count(draw, 1, max(1, n))
        value = draw(SCORE)
        baseline = value if draw(ONE_IN[3]) else draw(SCORE)
        changed = draw_changed(draw, size, value, baseline)
        worsening = worsening_of(gate, value, baseline)
        limit = allowed_change(gate, baseline)
        pieces.append((tag, size, value, baseline, changed, worsening, limit))
    if not gate.statistics.significance:  # the point estimate decides: no test is run
        return [
            SliceInput(tag, size, value, baseline, None)
            for tag, size, value, baseline, *_ in pieces
        ]
    family = [p for p in pieces if p[1] >= min_n and p[4] > 0]
    raw = [p_beyond_limit(draw, worsening, limit, alpha) for *_, worsening, limit in family]
    corrected = zip(raw, holm(raw), holm_levels(raw, alpha), strict=True)
    tested = dict(zip((p[0] for p in family), corrected, strict=True))
    inputs = []
    for tag, size, value, baseline, changed, worsening, limit in pieces:
        p, adjusted, level = tested.get(tag, (None, None, None))
        margin = draw_margin(
            draw,
            n=size,
            worsening=worsening,
            limit=limit,
            level=alpha if level is None else level,
            changed=changed,
            exact=exact,
            p_beyond=p,
        )
        inputs.append(SliceInput(tag, size, value, baseline, margin, adjusted, level))
    return inputs


def gate_result(draw: st.DrawFn, index: int) -> GateResult:
    """One gate decided by the core, with the numbers `comparison` would hand it."""
    metric, name, severity, scope = draw(GATE_KIND)
    parsed = parse_metric(metric)
    scale = 400.0 if parsed.family.unit == "ms" else 1.0
    relative = parsed.lower_is_better and draw(BOOLEAN)
    threshold = None if draw(BOOLEAN) else draw(SCORE) * scale
    regression_max: float | None = None
    if not draw(ONE_IN[4]):
        regression_max = draw(RELATIVE_LIMIT if relative else ABSOLUTE_LIMIT)
    if threshold is None and regression_max is None:
        threshold = draw(SCORE) * scale
    statistics = draw(STATISTICS)
    gate = Gate(
        name=f"{name}-{index}",
        metric=metric,
        threshold=threshold,
        regression_max=regression_max,
        severity=severity,
        scope=scope,
        where=HERE,
        scope_where=HERE,
        statistics=statistics,
        regression_relative=relative and regression_max is not None,
        per_tag=regression_max is not None and draw(BOOLEAN),
    )
    data = draw(DATA)
    n = 0 if data == "empty" else count(draw, 0 if data == "nan" else 1, 400)
    value = math.nan if data == "nan" else draw(SCORE) * scale
    computable = n > 0 and not math.isnan(value)

    baseline: float | None = None
    kind = draw(BASELINE)
    if kind == "equal":
        baseline = value
    elif kind == "random":
        baseline = draw(SCORE) * scale
    elif kind == "nan":
        baseline = math.nan
    elif kind == "on_limit" and regression_max is not None and computable:
        if relative:
            baseline = value / (1.0 + regression_max)
        else:
            baseline = value - regression_max if parsed.lower_is_better else value + regression_max
    if parsed.pairable and not computable:
        baseline = None  # no paired query: the core gets no baseline (`_decide_gate`)

    margin = None
    slices: list[SliceInput] = []
    paired = parsed.pairable and computable and baseline is not None and not math.isnan(baseline)
    if paired and regression_max is not None and statistics.significance:
        assert baseline is not None
        margin = draw_margin(
            draw,
            n=n,
            worsening=worsening_of(gate, value, baseline),
            limit=allowed_change(gate, baseline),
            level=statistics.alpha,
            changed=draw_changed(draw, n, value, baseline),
            exact=metric in ("recall@5", "hit_rate@5") and draw(BOOLEAN),
        )
    if paired and gate.per_tag:
        assert baseline is not None
        slices = slice_inputs(draw, gate, n)
    result = decide(gate, value, n, baseline, decide_slices(gate, slices), margin=margin)
    labelled = parse_metric(metric).kind == "relevance" and parsed.k is not None
    if paired and labelled and draw(BOOLEAN):  # the gate's value moved: judged@k beside it
        before = None if draw(ONE_IN[4]) else draw(SCORE)
        coverage = LabelCoverage(f"judged@{parsed.k}", draw(SCORE), before)
        result = replace(result, coverage=coverage)
    if margin is not None and gate.regression_max is not None:
        needed = None if draw(ONE_IN[4]) else count(draw, 2, 100_000)
        limit = allowed_change(gate, baseline) if baseline is not None else gate.regression_max
        target = min(2 * limit, 0.99)
        assumed = "assuming no other query's score changes"
        power = Power(margin.n, limit, draw(MAYBE_DROP), target, needed, assumed)
        result = replace(result, power=power)
    return result


TEMPLATE = load("failure_stats")
"""The non-gate parts of a report (queries, changes, provenance): a real gate run's, with
the lists of lost and gained queries cut to what the surfaces show (the counts stay)."""
TEMPLATE["changes"]["hit_to_miss"] = TEMPLATE["changes"]["hit_to_miss"][:12]
TEMPLATE["changes"]["miss_to_hit"] = TEMPLATE["changes"]["miss_to_hit"][:3]
TEMPLATE_TEXT = json.dumps({**TEMPLATE, **dict.fromkeys(("summary", "gates", "matching"))})
"""Parsed afresh for each report: four times faster than a deep copy. The large parts
`assemble` replaces are left out of it; their keys keep their place."""


def report_slices(
    gates: Sequence[Mapping[str, Any]], metrics: Sequence[str], rng: random.Random
) -> list[dict[str, Any]]:
    """Overall, tier and tag rows covering every tag a gate checks, for every metric."""
    tags = sorted({s["slice"].removeprefix("tag:") for g in gates for s in g["slices"]})
    names = [("overall", "overall", "all queries"), ("tier:A", "tier", "A")]
    names += [("tier:B", "tier", "B")] + [(f"tag:{t}", "tag", t) for t in tags]
    rows = []
    for slice_name, kind, name in names:
        cells = {}
        for metric in metrics:
            now = None if rng.random() < 0.1 else rng.random()
            before = None if rng.random() < 0.2 else rng.random()
            change = None if now is None or before is None else now - before
            cells[metric] = {"value": now, "baseline": before, "delta": change, "n": 40}
        rows.append(
            {
                "slice": slice_name,
                "kind": kind,
                "name": name,
                "n": 40,
                "n_baseline": 40,
                "metrics": cells,
            }
        )
    return rows


def judge_section(rng: random.Random, metrics: Sequence[str]) -> dict[str, Any] | None:
    """`build_report`'s judge section, from a random `JudgeSummary` (the judged values
    of 30 queries, sometimes some of them labelled by a person)."""
    metric = metrics[0]
    now = {f"a-{i:03}": {m: rng.random() for m in metrics} for i in range(30)}
    labelled = rng.sample(sorted(now), rng.choice((0, 1, 12, 30)))
    labels = {q: {"context_precision@5": rng.random()} for q in labelled}
    calibration = None
    if rng.random() < 0.5:
        calibration = Calibration(
            rng.randint(1, 5000),
            rng.random(),
            None if rng.random() < 0.2 else rng.uniform(-1.0, 1.0),
            None if rng.random() < 0.2 else rng.random(),
            None if rng.random() < 0.2 else rng.random(),
        )
    repeats = rng.choice((1, 3))
    summary = JudgeSummary(
        model="judge-model",
        calls=rng.randint(0, 10_000),
        cached=rng.randint(0, 10_000),
        failed=rng.randint(0, 10),
        prompt_tokens=rng.randint(0, 10**7),
        completion_tokens=rng.randint(0, 10**6),
        cost=rng.uniform(0.0, 100.0),
        calibration=calibration,
        unscored={"a-001": "the judge failed"} if rng.random() < 0.5 else {},
        repeats=repeats,
        spread={metric: rng.random()} if repeats > 1 else {},
        flips=(("a-002", 3),) if repeats > 1 else (),
        labels=labels,
    )
    return core_report._judge(summary, ScoreTable(now), metrics)


def assemble(
    results: Sequence[GateResult], diff: GoldDiff | None = None, accepted: bool = True
) -> dict[str, Any]:
    """A report around the gate results, its verdict, exit code, summary and gold-set
    changes made exactly as `build_report` makes them; the rest from `TEMPLATE`."""
    gates = [gate_entry(r) for r in results]
    status: str = verdict(results)
    exit_code = ExitCode.GATE_FAILED if blocks(results) else ExitCode.PASS
    summary = core_report._summary(gates)
    gold_changes = None
    if diff is not None:
        comparison = Comparison(tuple(results), diff, frozenset({"a-001"}), accepted)
        gold_changes = core_report._gold_changes(comparison, {})
        if not comparison.gold_accepted:
            status, exit_code = "gold_changed", ExitCode.BAD_INPUT
            summary = [core_report._gold_change_sentence(diff), *summary]
    metrics = list(dict.fromkeys(g["metric"] for g in gates))
    report = json.loads(TEMPLATE_TEXT)
    report.update(
        verdict=status,
        exit_code=int(exit_code),
        summary=summary,
        gates=gates,
        metrics=metrics,
        metric_labels={m: parse_metric(m).label for m in metrics},
        gold_changes=gold_changes,
        judge=None,
        matching={
            "page_tolerance": 1,
            "f1_threshold": 0.5,
            "by_matcher": {"id": {"queries": 300, "credited": 310}},
            "matched_by": {},
            "ambiguous_count": 0,
            "ambiguous": [],
        },
        rejections={
            "score_threshold": None,
            "queries": 15,
            "rejected": 15,
            "by_reason": {"abstained": 15},
            "not_rejected_count": 0,
            "not_rejected": [],
        },
        context=None,
        retrieval={"from_cache": 0},
    )
    return report


@st.composite
def reports(draw: st.DrawFn) -> dict[str, Any]:
    """A full report around 1 to 4 random gate results: the gold set unchanged, changed
    and accepted, or changed (no comparison); sometimes judged, sometimes no query lost
    or gained its hit."""
    results = [gate_result(draw, i) for i in range(count(draw, 1, 4))]
    gold = draw(GOLD)
    diff = None
    if gold != "same":
        diff = GoldDiff(tuple(draw(GOLD_IDS)), tuple(draw(GOLD_IDS)), ("a-041",))
    report = assemble(results, diff, accepted=gold == "accepted")
    rng = draw(st.randoms(use_true_random=False))
    if rng.random() < 0.25:
        judged = ["context_recall", "context_precision@5"]
        for metric in judged:
            report["metrics"].append(metric)
            report["metric_labels"][metric] = parse_metric(metric).label
        report["judge"] = judge_section(rng, judged)
    report["slices"] = report_slices(report["gates"], report["metrics"], rng)
    report["matching"]["ambiguous_count"] = rng.randint(0, 3)
    if draw(ONE_IN[3]):
        report["changes"].update(
            hit_to_miss=[], miss_to_hit=[], hit_to_miss_count=0, miss_to_hit_count=0
        )
    return report


# --- what each surface states, read back from its text --------------------------------


def blocking(gate: Mapping[str, Any]) -> bool:
    """`blocking`; reports written before it was recorded: a failed error gate blocked."""
    return bool(gate.get("blocking", gate["severity"] == "error" and gate["status"] == "fail"))


METRIC_LINK = re.compile(
    r'\[([^\]]+)\]\((https?://\S+/reference/metrics(?:/#[\w-]+|\.md))(?: "([^"]*)")?\)'
)
"""A metric's name linked to its definition on the docs' metrics page: a built site's
(`…/reference/metrics/#mrr`) or the Markdown source in a repository (`….md`)."""
SITE = Links(docs=Docs("https://docs.example.org/llm-eval/"))
"""The documentation as a published site (`LLM_EVAL_DOCS_URL`)."""
SOURCES = Links(docs=Docs("https://github.com/acme/llm-eval/blob/" + "ab" * 20 + "/docs/", True))
"""The documentation as the pages of the repository and commit llm-eval came from."""


def unlinked(markdown: str) -> str:
    """The Markdown with each metric link replaced by its text: the sentence as read."""
    return METRIC_LINK.sub(lambda m: m.group(1), markdown)


@functools.cache
def docs_anchors() -> frozenset[str]:
    """The ids of the metrics page as the docs' hook generates it when the site is built."""
    spec = importlib.util.spec_from_file_location(
        "reference_hook", REPO / "docs" / "_hooks" / "reference.py"
    )
    assert spec is not None and spec.loader is not None
    hook = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(hook)
    return frozenset(re.findall(r'<span id="([\w-]+)"></span>', hook.metric_reference()))


def check_metric_links(markdown: str) -> None:
    """Each metric's name is linked once, where the Markdown first prints it, to an id
    the docs' metrics page has, with its registry definition on hover."""
    body = markdown.split("\n", 1)[1]  # after the heading, which names no metric
    linked: set[str] = set()
    described = {f.description for f in families()}
    for match in METRIC_LINK.finditer(body):
        text, url, title = match.groups()
        if "#" in url:
            anchor = url.rsplit("#", 1)[1]
            assert anchor in docs_anchors(), url
            assert title == {f.anchor: f for f in families()}[anchor].description
        assert title in described, title
        assert text not in linked, f"{text} linked twice"
        linked.add(text)
        before = unlinked(body[: match.start()])
        assert not re.search(rf"(?<![\w@.]){re.escape(text)}(?![\w@])", before), text


def squashed(text: str) -> str:
    """The text without any whitespace: wrapping cannot hide a sentence."""
    return re.sub(r"\s+", "", text)


def terminal_table(text: str, rows: int) -> list[tuple[str, str]]:
    """(gate, status) per row of the terminal's gates table, read off its column rule."""
    lines = [ANSI.sub("", line) for line in text.split("\n")]
    start = next(
        i
        for i, line in enumerate(lines)
        if line.startswith("gate") and line.rstrip().endswith("status")
    )
    widths = [len(dashes) for dashes in lines[start + 1].split("  ")]
    assert set(lines[start + 1]) <= {"-", " "}, lines[start + 1]
    status_at = sum(widths[:-1]) + 2 * (len(widths) - 1)
    body = lines[start + 2 : start + 2 + rows]
    return [(line[: widths[0]].rstrip(), line[status_at:].strip()) for line in body]


def cells(row: str) -> list[str]:
    """The cells of a GitHub Markdown table row (escaped pipes stay in their cell)."""
    return [cell.strip() for cell in UNESCAPED_PIPE.split(row.strip())[1:-1]]


def markdown_table(lines: Sequence[str], header: str) -> list[list[list[str]]]:
    """Every table whose header row starts with `header`: its body rows, as cells."""
    tables = []
    for i, line in enumerate(lines):
        if line.startswith(header):
            body = []
            for row in lines[i + 2 :]:
                if not row.startswith("|"):
                    break
                body.append(cells(row))
            tables.append(body)
    return tables


def scope_slice(gate: Mapping[str, Any]) -> str | None:
    """The report slice a gate's scope is (`scope_key` `all` or `tier=A`), else None."""
    key = gate.get("scope_key") or "all"
    if key == "all":
        return "overall"
    if key.startswith("tier=") and ";" not in key:
        return "tier:" + key.removeprefix("tier=")
    return None


def headline_agrees(text: str, report: Mapping[str, Any]) -> bool:
    """The headline leads with the verdict: FAIL exactly when the exit code is 1, GOLD SET
    CHANGED exactly when the comparison was refused (exit 3), RETRIEVER FAILED exactly
    when the retriever failed (exit 4), else the verdict's status word (PASS, WARNING,
    CANNOT TELL; exit 0)."""
    verdict, code = report["verdict"], report["exit_code"]
    if (verdict == "retriever_failed") != text.startswith("RETRIEVER FAILED: "):
        return False
    if verdict == "retriever_failed":
        return code == 4
    if (verdict == "gold_changed") != text.startswith("GOLD SET CHANGED: "):
        return False
    if (code == 1) != text.startswith("FAIL: "):
        return False
    if verdict in ("gold_changed", "fail"):
        return True
    return code == 0 and text.startswith(f"{STATUS_WORDS[verdict].upper()}: ")


def refuse_constant(name: str) -> float:
    raise AssertionError(f"report.json holds {name}: not strict JSON")


def non_finite(value: Any, key: str = "") -> list[str]:
    if isinstance(value, float) and not math.isfinite(value):
        return [key]
    if isinstance(value, dict):
        return [bad for k, v in value.items() for bad in non_finite(v, f"{key}.{k}")]
    if isinstance(value, list):
        return [bad for i, v in enumerate(value) for bad in non_finite(v, f"{key}[{i}]")]
    return []


# --- the checks, one per surface ------------------------------------------------------


def check_json(report: Mapping[str, Any]) -> str:
    validate_report(report, "report.json")
    assert non_finite(report) == []
    text = JSON.render(report, RenderOptions())
    parsed = json.loads(text, parse_constant=refuse_constant)
    assert parsed == report
    validate_report(parsed, "report.json")
    return text


def check_terminal(report: Mapping[str, Any], plain: str, coloured: str, ascii: str) -> None:
    """Plain, coloured and spelled in ASCII: at most 80 columns, the headline, and each
    gate's row of the table with its record's status word in capitals."""
    gates = report["gates"]
    for rendering in (plain, coloured, ascii):
        visible = ANSI.sub("", rendering)
        lines = visible.split("\n")
        if rendering is coloured:  # its title: test_the_coloured_title_fits_the_terminal
            lines = lines[1:]
        too_wide = [line for line in lines if len(line) > WIDTH]
        assert too_wide == [], f"lines wider than {WIDTH} columns"
        title = " ".join(visible.split("\n\n")[0].split())
        spell = in_ascii if rendering is ascii else str
        assert title == spell(f"llm-eval gate: {' '.join(headline(report).split())}")
        assert headline_agrees(title.removeprefix("llm-eval gate: "), report), title
        if report["verdict"] == "retriever_failed":  # no gate measured: no table, named
            names = ", ".join(spell(g["name"]) for g in gates)
            assert f"Not measured: {names}." in " ".join(visible.split())
            continue
        rows = terminal_table(rendering, len(gates))
        assert rows == [(spell(g["name"]), STATUS_WORDS[g["status"]].upper()) for g in gates]
    if report["verdict"] == "retriever_failed":
        return  # every gate's sentence is "not measured": the one line above names them
    # a sentence carries its record's mark; a tag that cannot tell is not a warning
    text = squashed(plain)
    marks = {"pass": "✓", "warn": "!", "fail": "✗", "inconclusive": "?"}
    for gate in gates:
        if gate["sentence"]:
            assert squashed(f"{marks[gate['status']]} {gate['sentence']}") in text
        for piece in gate.get("slices") or []:
            if not piece["sentence"] or not piece.get("judged", True):
                continue
            shown = squashed(f"{marks[piece['status']]} {piece['sentence']}")
            if piece["status"] in ("warn", "fail"):
                assert shown in text
            else:
                for mark in ("!", "✗"):
                    assert squashed(f"{mark} {piece['sentence']}") not in text


def check_markdown(report: Mapping[str, Any], markdown: str, complete: bool) -> None:
    gates = report["gates"]
    lines = markdown.split("\n")
    verdict_icon = STATUS_ICON[report["verdict"]]
    heading = f"## {verdict_icon} Retrieval quality: "
    assert lines[0].startswith(heading), lines[0]
    assert lines[0] == heading + escape_markdown(headline(report))
    assert headline_agrees(lines[0].removeprefix(heading), report), lines[0]
    if report["verdict"] == "retriever_failed":  # no gate measured: the failure leads
        said = " ".join(markdown.split())
        assert "so no gate was measured" in said
        for cause in report["retriever_failure"]["causes"]:
            assert squashed(escape_markdown(cause["cause"])) in squashed(said), cause
        return
    if report["verdict"] != "gold_changed":
        # the lead: a line per gate that is not passing (or per gate when all pass)
        lead_end = next(
            i for i, line in enumerate(lines) if line in ("**What to do next**", "<details>")
        )
        lead = [
            line for line in lines[1:lead_end] if line and not line.startswith(("- ", "Trend of "))
        ]
        trend = [line for line in lines[1:lead_end] if line.startswith("Trend of ")]
        expected = report.get("trend")
        assert len(trend) == (1 if expected else 0)
        if expected:  # the trend line ends in this run's value, the report's own
            assert f"→ {metric_value(expected['metric'], expected['value'])}" in trend[0]
        shown = [g for g in gates if g["status"] != "pass"] or gates
        assert len(lead) == len(shown)
        for line, gate in zip(lead, shown, strict=True):
            assert line.startswith(STATUS_ICON[gate["status"]] + " "), line
    # the problems: a bullet per gate that is not passing, with its record's icon
    details = lines.index("<details>")
    table_at = next(i for i, line in enumerate(lines) if line.startswith("| Gate | Metric |"))
    bullets = [line for line in lines[details:table_at] if line.startswith("- ")]
    problems = [g for g in gates if g["status"] != "pass"]
    assert len(bullets) == len(problems)
    for line, gate in zip(bullets, problems, strict=True):
        assert line.startswith(f"- {STATUS_ICON[gate['status']]} "), line
    # the gates table: the icon and word of each gate's status, and whether it blocks
    (rows,) = markdown_table(lines, "| Gate | Metric |")
    assert len(rows) == len(gates)
    for row, gate in zip(rows, gates, strict=True):
        word = f"{STATUS_ICON[gate['status']]} {STATUS_WORDS[gate['status']]}"
        assert row[0] == escape_markdown(gate["name"])
        assert row[-1] == word + (" (blocking)" if blocking(gate) else ""), row
    # the tier table: the gating (first) gate's icon on the row of its own scope
    tiers = markdown_table(lines, "| Tier | Queries |")
    names = {
        escape_markdown(s["name"]): s["slice"]
        for s in report["slices"]
        if s["kind"] in ("overall", "tier")
    }
    for row in tiers[0] if tiers else []:
        gated = names[row[0]] == scope_slice(gates[0])
        assert row[-1] == (STATUS_ICON[gates[0]["status"]] if gated else ""), row
    # the per-tag tables: each tag's check with its record's icon, never another one
    checked = [g for g in gates if g.get("slices")]
    tag_rows = {e["name"] for e in report["slices"] if e["kind"] == "tag"}
    if not tag_rows:
        return
    tables = markdown_table(lines, "| Tag | Queries | Baseline | This PR | Δ | CI (vs limit) |")
    assert len(tables) == len(checked)
    for rows, gate in zip(tables, checked, strict=True):
        checks = {escape_markdown(s["slice"].partition(":")[2]): s for s in gate["slices"]}
        shown = set()
        for row in rows:
            piece = checks.get(row[0])
            if piece is None:
                assert row[-1] == "", row
                continue
            shown.add(row[0])
            expected = STATUS_ICON[piece["status"]]
            if piece.get("judged") is False:
                expected = "too few"
            assert row[-1] == expected, (row, piece["status"])
        if complete:
            assert shown == set(checks)


def expected_junit(report: Mapping[str, Any]) -> list[tuple[str, str]]:
    """(test case, outcome) as docs/tutorials/demo.md and junit.py's docstring describe
    them: a case per gate and per judged tag slice; what blocks the merge is a failure,
    what cannot tell without blocking is skipped, the rest passes (a missed warning with
    `system-out`)."""
    cases = []
    if report["verdict"] == "gold_changed":
        cases.append(("gold set unchanged since the baseline", "error"))
    if report["verdict"] == "retriever_failed":  # the failed retriever is the error
        cases.append(("retriever within max_error_rate", "error"))
    for gate in report["gates"]:
        outcome = "pass"
        if blocking(gate):
            outcome = "failure"
        elif gate["status"] == "inconclusive":
            outcome = "skipped"
        cases.append((f"{gate['name']}: {gate['metric_label']} ({gate['scope']})", outcome))
        for piece in gate.get("slices") or []:
            if not piece.get("judged", True):
                continue
            outcome = "pass"
            if piece["status"] == "fail" and gate["severity"] == "error":
                outcome = "failure"
            elif piece["status"] == "inconclusive":
                outcome = "skipped"
            cases.append((piece["slice"], outcome))
    return cases


def check_junit(report: Mapping[str, Any], xml: str) -> None:
    JUNIT_SCHEMA.validate(xml)
    root = ET.fromstring(xml.encode("utf-8"))
    (suite,) = root.findall("testsuite")
    testcases = suite.findall("testcase")

    def outcome(case: ET.Element) -> str:
        found = [c.tag for c in case if c.tag in ("failure", "error", "skipped")]
        assert len(found) <= 1
        return found[0] if found else "pass"

    got = [(case.get("name"), outcome(case)) for case in testcases]
    assert got == expected_junit(report)
    failures = sum(1 for g in report["gates"] if blocking(g)) + sum(
        1
        for g in report["gates"]
        if g["severity"] == "error"
        for s in g.get("slices") or []
        if s["status"] == "fail"
    )
    for element in (root, suite):
        assert element.get("failures") == str(failures)
        assert element.get("tests") == str(len(testcases))
        assert element.get("skipped") == str(sum(1 for _, o in got if o == "skipped"))
        errors = report["verdict"] in ("gold_changed", "retriever_failed")
        assert element.get("errors") == str(int(errors))
    for skipped in suite.iter("skipped"):
        message = skipped.get("message") or ""
        assert message.startswith("cannot tell: ") and message.removeprefix("cannot tell: ").strip()
    properties = {p.get("name"): p.get("value") for p in suite.iter("property")}
    assert properties == {"verdict": report["verdict"], "headline": headline(report)}
    # a missed warning passes, its sentence in system-out
    cases = dict(zip((name for name, _ in got), testcases, strict=True))
    for gate in report["gates"]:
        case = cases[f"{gate['name']}: {gate['metric_label']} ({gate['scope']})"]
        if gate["status"] == "warn" and gate["sentence"]:
            assert case.findtext("system-out") == f"warning: {gate['sentence']}"


def covers(scope_key: str, change: Mapping[str, Any]) -> bool:
    """Whether a gate's scope (`all`, `tier=A`, `tags=x,y`, `tier=A;tags=x`) holds the query."""
    parts = dict(p.partition("=")[::2] for p in scope_key.split(";") if p != "all")
    if "tier" in parts and parts["tier"] != change.get("tier"):
        return False
    tags = set(filter(None, parts.get("tags", "").split(",")))
    return not tags or bool(tags & set(change.get("tags") or ()))


def check_action(report: Mapping[str, Any], annotations: Sequence[str]) -> None:
    """The Action's `verdict` output is report.json's verdict (action.yml reads it, see
    `test_the_action_outputs_the_reports_verdict`) and its `exit-code` the gate's exit
    code; annotations mark lost queries by the gates covering them
    (docs/how-to/github-actions.md): an error when a blocking gate covering the query
    failed, a warning when a covering gate only warns, a notice when every covering gate
    passes; none when every gate passes."""
    output = report["verdict"]
    assert output in VERDICTS
    assert (output == "fail") == (report["exit_code"] == 1)
    assert (output == "gold_changed") == (report["exit_code"] == 3)
    assert (output == "retriever_failed") == (report["exit_code"] == 4)
    assert report["exit_code"] in (0, 1, 3, 4)
    gates = report["gates"]
    lost = report["changes"]["hit_to_miss"]
    if all(g["status"] == "pass" for g in gates):
        assert annotations == []
    if output in ("fail", "warn"):
        assert len(annotations) == min(len(lost), 10)
    for line, change in zip(annotations, lost, strict=False):
        level = line[2 : line.index(" ")]
        covering = [g for g in gates if covers(g.get("scope_key", "all"), change)]
        assert (level == "error") == any(g["status"] == "fail" and blocking(g) for g in covering)
        if level != "error" and any(g["status"] == "warn" for g in covering):
            assert level == "warning", line
        if all(g["status"] == "pass" for g in covering):
            assert level == "notice", line


def check_surfaces(report: dict[str, Any], complete: bool = True) -> None:
    """Every surface of one report. `complete`: the report's slices list every tag its
    gates check (true of every report `build_report` writes)."""
    renderings = {
        "json": check_json(report),
        "text": render_text(report, WIDTH),
        "text, coloured": TEXT.render(report, RenderOptions(WIDTH, coloured=True)),
        "text, ascii": TEXT.render(report, RenderOptions(WIDTH, ascii=True)),
        "markdown": render_markdown(report, SITE),
        "comment": render_comment(report, SITE),
        "markdown, repository docs": render_markdown(report, SOURCES),
        "markdown, no docs known": render_markdown(report),
        "comment, no docs known": render_comment(report),
        "junit": JUNIT.render(report, RenderOptions()),
        "annotations": "\n".join(regression_annotations(report, Path("/repo"))),
    }
    for name, text in renderings.items():
        written = NON_FINITE_WORD.search(text)
        assert written is None, f"{name} writes a non-finite number: {written and written.group()}"
    check_terminal(
        report, renderings["text"], renderings["text, coloured"], renderings["text, ascii"]
    )
    for gate in report["gates"]:  # judged@k beside a gate that moved, a warning if it fell
        coverage = gate.get("label_coverage")
        if coverage:
            said = ("Warning: " if coverage["fell"] else "") + coverage["sentence"]
            assert squashed(said) in squashed(renderings["text"])
            assert squashed(escape_markdown(said)) in squashed(unlinked(renderings["markdown"]))
    check_markdown(report, renderings["markdown"], complete)
    check_metric_links(renderings["markdown"])
    check_metric_links(renderings["markdown, repository docs"])
    # with no documentation known the same words, not one link to a guessed address
    bare = renderings["markdown, no docs known"]
    assert METRIC_LINK.search(bare) is None
    assert unlinked(renderings["markdown"]) == unlinked(renderings["markdown, repository docs"])
    assert unlinked(renderings["markdown"]) == bare
    assert renderings["comment, no docs known"] == f"{COMMENT_MARKER}\n{bare}"
    assert renderings["comment"] == f"{COMMENT_MARKER}\n{renderings['markdown']}"
    check_junit(report, renderings["junit"])
    check_action(report, renderings["annotations"].split("\n") if renderings["annotations"] else [])


# --- the tests ------------------------------------------------------------------------


@settings(
    max_examples=1000,
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large],
)
@given(reports())
def test_every_surface_states_the_cores_decision(report: dict[str, Any]) -> None:
    check_surfaces(report)


@pytest.mark.parametrize("name", FIXTURES)
def test_every_surface_states_the_decision_of_each_fixture_report(name: str) -> None:
    check_surfaces(load(name), complete=False)


def action_verdict_script() -> str:
    """The Python one-liner of action.yml's gate step that sets the `verdict` output."""
    action = yaml.safe_load((REPO / "action.yml").read_text(encoding="utf-8"))
    step = next(s for s in action["runs"]["steps"] if s.get("id") == "gate")
    assert 'echo "exit-code=$code" >> "$GITHUB_OUTPUT"' in step["run"]
    found = re.search(r"python -c '([^']*)' \"\$out/report.json\"", step["run"])
    assert found is not None, "action.yml no longer reads the verdict from report.json"
    return found.group(1)


def test_the_action_outputs_the_reports_verdict(tmp_path: Path) -> None:
    script = action_verdict_script()
    for name in FIXTURES:
        path = tmp_path / f"{name}.json"
        path.write_text(json.dumps(load(name)), encoding="utf-8")
        out = subprocess.run(
            [sys.executable, "-c", script, str(path)], capture_output=True, text=True, check=True
        )
        assert out.stdout.strip() == load(name)["verdict"]


# --- disagreements found by the property, pinned on small reports --------------------


def make_gate(
    name: str,
    metric: str = "recall@5",
    threshold: float | None = None,
    regression_max: float | None = 0.03,
    severity: Severity = "error",
    on_inconclusive: Literal["fail", "warn"] | None = None,
) -> Gate:
    statistics = Statistics(on_inconclusive=on_inconclusive)
    return Gate(name, metric, threshold, regression_max, severity, Scope(), HERE, HERE, statistics)


def straddling(n: int = 100) -> MarginTest:
    """A test whose 90% interval holds the 3 pp limit: the data cannot tell."""
    return MarginTest(
        n=n,
        worsening=0.02,
        low=-0.01,
        high=0.05,
        confidence=0.9,
        p_beyond=0.3,
        p_within=0.2,
        spread=0.3,
        method="betting",
        changed=n,
    )


def cannot_tell_and_warning() -> dict[str, Any]:
    """A warning gate below its floor and an error gate that cannot tell, not blocking:
    verdict `inconclusive`, exit 0, and the template's queries that lost their hit."""
    below_floor = decide(make_gate("quality", "mrr", 0.5, None, "warning"), 0.40, 327, None)
    unsure = decide(
        make_gate("recall", on_inconclusive="warn"), 0.85, 100, 0.87, margin=straddling()
    )
    report = assemble([unsure, below_floor])
    assert (report["verdict"], report["exit_code"]) == ("inconclusive", 0)
    return report


def test_the_pinned_reports_pass_every_other_check() -> None:
    check_surfaces(cannot_tell_and_warning())


def test_the_coloured_title_fits_the_terminal() -> None:
    text = render_text(cannot_tell_and_warning(), WIDTH, coloured=True)
    assert max(len(ANSI.sub("", line)) for line in text.split("\n")) <= WIDTH


def test_a_warning_gate_marks_lost_queries_whatever_the_verdict() -> None:
    levels = [
        line.split(" ")[0] for line in regression_annotations(cannot_tell_and_warning(), REPO)
    ]
    assert levels == ["::warning"] * 10


def test_the_action_documents_every_verdict_it_outputs() -> None:
    action = yaml.safe_load((REPO / "action.yml").read_text(encoding="utf-8"))
    documented = set(re.findall(r"\w+", action["outputs"]["verdict"]["description"]))
    assert set(VERDICTS) <= documented


@pytest.mark.parametrize(
    "limit",
    ["threshold: .inf", f'regression_max: "+{"9" * 400}%"'],
    ids=["infinite threshold", "relative limit of 400 digits"],
)
def test_an_infinite_limit_is_refused_with_its_file_line_and_key(
    tmp_path: Path, limit: str
) -> None:
    """No surface can show an infinite limit: the criteria refuse it on load."""
    criteria = tmp_path / "ship-criteria.yaml"
    criteria.write_text(f"gates:\n  - name: latency\n    metric: latency_p95\n    {limit}\n")
    key = limit.split(":")[0]
    with pytest.raises(InputError) as raised:
        load_criteria(criteria)
    message = str(raised.value)
    assert message.startswith(f"{criteria}:4: gates[0].{key}: ")
    assert "\n" not in message


def test_with_significance_off_the_point_estimate_decides_each_tag() -> None:
    queries = [
        gold_query(f"q{i}", (("d", 1),), tags=("howto" if i < 50 else "other",), line=i + 1)
        for i in range(100)
    ]
    before = {q.query_id: {"recall@5": 1.0} for q in queries}
    after = {q.query_id: {"recall@5": 0.0 if i < 50 else 1.0} for i, q in enumerate(queries)}
    baseline = Baseline(
        "2026-01-01T00:00:00+00:00", None, "0", {}, {}, 1, 5, ("recall@5",), before, {}, {}
    )
    gate = replace(
        make_gate("recall"), statistics=Statistics(significance=False, min_n=30), per_tag=True
    )
    (result,) = decide_gates(queries, [gate], ScoreTable(after), baseline, None)
    statuses = {s.tag: (s.status, s.judged) for s in result.slices}
    assert statuses == {"howto": ("fail", True), "other": ("pass", True)}


# --- the soundness grid's outcomes, decided by the real core, on every surface ----------


def _grid_case(
    metric: str, before: Sequence[float], after: Sequence[float], min_n: int, limit: float
) -> GateResult:
    """One gate decided by `decide_gates` on per-query scores: the paired test, the
    power model and the decision are the core's own."""
    queries = [gold_query(f"q{i}", (("d", 1),), line=i + 1) for i in range(len(before))]
    base = {q.query_id: {metric: float(v)} for q, v in zip(queries, before, strict=True)}
    now = {q.query_id: {metric: float(v)} for q, v in zip(queries, after, strict=True)}
    baseline = Baseline(
        "2026-01-01T00:00:00+00:00", None, "0", {}, {}, 1, 5, (metric,), base, {}, {}
    )
    statistics = Statistics(min_n=min_n, resamples=100, on_inconclusive="fail")
    gate = Gate("quality", metric, None, limit, "error", Scope(), HERE, HERE, statistics)
    (result,) = decide_gates(queries, [gate], ScoreTable(now), baseline, None)
    return result


def _misses(n: int, lost: int) -> list[float]:
    return [0.0] * lost + [1.0] * (n - lost)


def _graded(n: int, seed: int, churn: float) -> tuple[list[float], list[float]]:
    rng = random.Random(seed)
    before = [rng.choice((0.0, 0.25, 0.5, 1.0)) for _ in range(n)]
    after = [
        min(1.0, max(0.0, b + rng.choice((-0.5, 0.5)))) if rng.random() < churn else b
        for b in before
    ]
    return before, after


def _grid() -> dict[str, GateResult]:
    graded_big = _graded(300, 1, 0.3)
    cases = {
        "fail": ("recall@5", [1.0] * 200, _misses(200, 30), 10, 0.03),
        "pass": ("recall@5", [1.0] * 300, _misses(300, 2), 10, 0.03),
        "on the limit": ("recall@5", [1.0] * 800, _misses(800, 24), 10, 0.03),
        "small set": ("recall@5", [1.0] * 12, _misses(12, 1), 5, 0.03),
        "tiny set": ("recall@5", [1.0] * 4, _misses(4, 1), 2, 0.03),
        "unchanged": ("recall@5", [1.0] * 300, [1.0] * 300, 10, 0.03),
        "graded": ("mrr", *graded_big, 10, 0.05),
        "graded, open ends": ("mrr", [0.25, 0.5, 1.0], [0.75, 0.0, 0.5], 2, 0.05),
    }
    return {name: _grid_case(*case) for name, case in cases.items()}


@pytest.fixture(scope="module")
def grid() -> dict[str, GateResult]:
    return _grid()


P_SHOWN = re.compile(r"\bp (=|≤|<|>) ?\d")


def _renderings(report: dict[str, Any]) -> dict[str, str]:
    return {
        "json": json.dumps(report, ensure_ascii=False),
        "text": render_text(report, WIDTH),
        "markdown": render_markdown(report),
        "comment": render_comment(report),
        "junit": JUNIT.render(report, RenderOptions()),
    }


def test_every_verdict_sentence_of_the_grid_reads_true_on_every_surface(
    grid: dict[str, GateResult],
) -> None:
    """Each outcome of the soundness grid (fail, pass, cannot tell on the limit and on
    a small set, unchanged, 0/1 and graded scores, open interval ends), decided by the
    core and rendered everywhere: no surface says what its record contradicts."""
    for name, result in grid.items():
        report = assemble([result])
        check_surfaces(report, complete=False)
        margin = result.margin
        assert margin is not None, name
        texts = {k: " ".join(v.split()) for k, v in _renderings(report).items()}
        for surface, text in texts.items():
            where = f"{name}, {surface}"
            assert "p = 1.000" not in text, where
            assert "no drop" not in text, where  # never "cannot tell" beside "no drop caught"
            if margin.method == "betting":  # its p-values are bounds, never `p =`
                assert "p = " not in text, where
            if "too close to the limit" in text:
                limit = allowed_change(result.gate, result.baseline or 0.0)
                assert on_the_limit(margin, limit), where
            if margin.changed == 0:  # no interval and no p-value beside "no change"
                gate = report["gates"][0]
                assert gate["stats"]["ci_low"] is None and gate["stats"]["p_value"] is None
                if surface != "json":
                    assert P_SHOWN.search(text) is None, where
                    assert "% CI" not in text, where
    assert grid["unchanged"].reason == "unchanged"
    assert "| +0.0 pp | unchanged |" in render_markdown(assemble([grid["unchanged"]]))
    assert grid["fail"].status == "fail" and grid["pass"].status == "pass"
    on_limit = grid["on the limit"]
    assert on_limit.status == "inconclusive"
    assert "too close to the limit for 800 queries to tell" in (sentence(on_limit) or "")
    for small in ("small set", "tiny set"):
        headline_text = headline(assemble([grid[small]]))
        assert headline_text.startswith("FAIL: 1 blocking gate cannot tell; about "), small
        assert headline_text.endswith("more queries would settle it (llm-eval gold plan)")
    assert grid["graded, open ends"].margin is not None
    ends = grid["graded, open ends"].margin
    assert ends.low_open or ends.high_open


def far_from_the_limit() -> GateResult:
    """A −0.5 pp change against a −3.0 pp limit that the test cannot place (p_within
    1.0: the far end open), on a scope the power model calls large enough."""
    margin = MarginTest(
        n=300,
        worsening=0.005,
        low=-0.009,
        high=0.999,
        confidence=0.9,
        p_beyond=0.9,
        p_within=1.0,
        spread=0.1,
        method="betting",
        high_open=True,
        changed=40,
    )
    power = Power(300, 0.03, 0.05, 0.06, 250, "assuming the churn seen")
    gate = make_gate("recall", on_inconclusive="fail")
    return decide(gate, 0.865, 300, 0.87, power=power, margin=margin)


def test_a_change_far_from_the_limit_is_not_said_to_sit_on_it() -> None:
    result = far_from_the_limit()
    assert result.status == "inconclusive"
    assert not on_the_limit(result.margin, 0.03)  # type: ignore[arg-type]
    said = sentence(result) or ""
    assert "too close to the limit" not in said
    assert said == (
        "Blocks the merge: whether recall@5 dropped by more than the 3.0 pp allowed cannot be "
        "told, because 300 queries give no evidence either way; it dropped from 87.0% to "
        "86.5% (−0.5 pp; 90% CI −99.9 to +0.9 pp)"
    )
    report = assemble([result])
    assert headline(report) == "FAIL: 1 blocking gate cannot tell"  # no queries would settle it
    for surface, text in _renderings(report).items():
        assert "too close to the limit" not in text, surface
        assert "p = " not in text, surface


def test_a_blocking_cannot_tell_leads_with_the_block_and_why_on_every_surface() -> None:
    report = assemble([far_from_the_limit()])
    told = (
        "Blocks the merge: whether recall@5 dropped by more than the 3.0 pp allowed cannot be "
        "told, because 300 queries give no evidence either way"
    )
    texts = {k: " ".join(v.split()) for k, v in _renderings(report).items()}
    assert f"? {told}; it dropped" in texts["text"]
    assert f'<failure message="{told}; it dropped' in texts["junit"]
    for surface in ("markdown", "comment"):
        assert f"- ❓ {told}; it dropped" in texts[surface], surface
        # the comment's first line under the heading: the block and its cause first
        assert (
            "\n❓ Blocks the merge: the questions cannot tell whether recall@5 on all queries "
            "dropped by more than the 3.0 points allowed; it fell from 87.0% to 86.5%: 0.5 "
            "points.\n"
        ) in _renderings(report)[surface], surface


def test_on_the_limit_means_within_the_intervals_half_width() -> None:
    near = replace(far_from_the_limit().margin, worsening=0.025, low=0.012, high=0.038)
    assert near.high_open  # the closed end stands for the half-width: 0.013
    assert on_the_limit(near, 0.03)
    closed = replace(near, high_open=False)
    assert on_the_limit(closed, 0.03) and not on_the_limit(closed, 0.04)


# --- metric names link to their definitions; the trend says its scale -------------------


def test_each_metric_is_linked_once_to_its_definition_where_the_comment_first_names_it() -> None:
    comment = render_comment(load("failure_stats"), SITE)
    links = [(m.group(1), m.group(2)) for m in METRIC_LINK.finditer(comment)]
    docs = "https://docs.example.org/llm-eval/reference/metrics/"
    assert links == [
        ("recall@5", docs + "#recall-at-k"),
        ("MRR", docs + "#mrr"),
        ("judged@5", docs + "#judged-at-k"),
    ]
    # the gates table, after the lead, names them without a link
    assert "| retrieval\\_recall\\_at\\_5 | recall@5 | tier A |" in comment
    assert {"recall-at-k", "mrr", "judged-at-k"} <= docs_anchors()


def test_the_metric_links_follow_the_configured_docs_address() -> None:
    from llm_eval.actions import links_from_env

    report = load("failure")
    commit = "c0" * 20
    installed = Installed("https://github.com/acme/llm-eval.git", commit, "v0.1.0")
    action = {"GITHUB_ACTION_REPOSITORY": "team/llm-eval", "GITHUB_ACTION_REF": "v2"}
    mirror = links_from_env({"LLM_EVAL_DOCS_URL": "https://docs.example.org/eval", **action})
    assert mirror.docs == Docs("https://docs.example.org/eval/")
    comment = render_comment(report, mirror)
    assert "[MRR](https://docs.example.org/eval/reference/metrics/#mrr " in comment
    in_action = render_comment(report, links_from_env(action, installed))
    assert "[MRR](https://github.com/team/llm-eval/blob/v2/docs/reference/metrics.md " in (
        in_action
    )
    pip_installed = render_comment(report, links_from_env({}, installed))
    assert f"[MRR](https://github.com/acme/llm-eval/blob/{commit}/docs/reference/metrics.md " in (
        pip_installed
    )
    off = render_comment(report, links_from_env({"LLM_EVAL_DOCS_URL": ""}, installed))
    unknown = render_comment(report, links_from_env({}, None))
    for text in (comment, in_action, pip_installed, off, unknown):
        assert "owner" not in text.lower()
        assert unlinked(text) == off
    assert METRIC_LINK.search(off) is None
    assert unknown == off


@pytest.mark.skipif(shutil.which("cmark-gfm") is None, reason="needs cmark-gfm")
def test_github_shows_each_metric_link_with_its_definition() -> None:
    """The comment through cmark-gfm, GitHub's Markdown: an <a href> per metric, on the
    name, its definition as the title."""
    done = subprocess.run(
        ["cmark-gfm", "-e", "table", "-e", "autolink", "-e", "strikethrough"],
        input=render_comment(load("failure_stats"), SITE),
        capture_output=True,
        text=True,
        check=True,
    )
    docs = "https://docs.example.org/llm-eval/reference/metrics/"
    for anchor, name in (("recall-at-k", "recall@5"), ("mrr", "MRR"), ("judged-at-k", "judged@5")):
        description = {f.anchor: f for f in families()}[anchor].description
        link = f'<a href="{docs}#{anchor}" title="{description}">{name}</a>'
        assert done.stdout.count(link) == 1, link


def trend_of(values: list[float | None], now: float, span: float) -> dict[str, Any]:
    """A report's trend entry over fixed baselines."""
    points = [{"value": v, "commit": "0" * 40, "date": "2026-01-01"} for v in values]
    return {"metric": "recall@5", "label": "recall@5", "points": points, "value": now, "span": span}


def trend_line(trend: dict[str, Any]) -> str:
    report = load("failure")
    report["trend"] = trend
    return next(line for line in render_markdown(report).split("\n") if "Trend of" in line)


def test_the_trend_line_says_what_its_bottom_and_top_stand_for() -> None:
    # the values span more than the limit: the lowest is the bottom, the highest the top
    line = trend_line(trend_of([0.35, 0.41, 0.38], 0.33, 0.03))
    assert "▃█▆▁ 35.0% → 33.0% (scale ▁ 33.0% to █ 41.0%)" in unlinked(line)
    # a wobble smaller than the limit is drawn on a scale the limit wide, and says so
    line = trend_line(trend_of([0.40, 0.41, None], 0.40, 0.10))
    assert "(scale ▁ 35.5% to █ 45.5%; · marks 1 gap" in line
    line = trend_line(trend_of([0.40, 0.40], 0.40, 0.0))
    assert "40.0% → 40.0% (all at 40.0%)" in line
