"""report.json is checked against its documented schema before anything renders it."""

from __future__ import annotations

import copy
import json
from pathlib import Path
from typing import Any

import pytest
from conftest import Cli

from llm_eval.errors import InputError
from llm_eval.report_schema import validate_report

REPORTS = sorted((Path(__file__).parent / "gold" / "reports").glob("*.json"))
PASS = json.loads((Path(__file__).parent / "gold" / "reports" / "pass.json").read_text())


@pytest.mark.parametrize("path", REPORTS, ids=lambda p: p.name)
def test_the_golden_reports_fit_the_schema(path: Path) -> None:
    report = json.loads(path.read_text())
    assert validate_report(report, path) is report


def test_the_reports_the_gate_writes_fit_the_schema(tmp_path: Path, cli: Cli) -> None:
    """The demo and the examples (rejection, context and page metrics)."""
    examples = [
        "--config",
        "gold/examples/llm-eval.yaml",
        "--criteria",
        "gold/examples/ship-criteria.yaml",
        "--run",
        "gold/examples/run.jsonl",
    ]
    for name, options in {"demo": [], "examples": examples}.items():
        out = tmp_path / name
        assert cli("gate", *options, "--out", str(out))[0] == 0  # both pass
        path = out / "report.json"
        validate_report(json.loads(path.read_text()), path)


def _with(key: str, value: Any) -> dict[str, Any]:
    """The pass report with the value at a dotted key path (`gates.0.value`) replaced."""
    report = copy.deepcopy(PASS)
    *parents, last = key.split(".")
    node: Any = report
    for name in parents:
        node = node[int(name)] if isinstance(node, list) else node[name]
    if isinstance(node, list):
        node[int(last)] = value
    else:
        node[last] = value
    return report


@pytest.mark.parametrize(
    ("key", "value", "where", "reason"),
    [
        ("gates", [], "gates", "expected a non-empty list"),
        ("metrics", [], "metrics", "expected a non-empty list"),
        ("gates", {}, "gates", "expected a list, got an object"),
        ("gates.0", "g", "gates[0]", "expected an object, got a string"),
        ("gates.0.value", "high", "gates[0].value", 'expected a finite number, got "high"'),
        ("gates.0.status", "ok", "gates[0].status", "expected one of "),
        ("gates.0.severity", None, "gates[0].severity", "expected one of "),
        ("gates.0.blocking", 1, "gates[0].blocking", "expected true or false, got 1"),
        ("gates.0.decision", "maybe", "gates[0].decision", "expected one of "),
        ("gates.0.stats", [], "gates[0].stats", "expected an object, got an array"),
        (
            "gates.0.stats.builds",
            {"before": 3, "after": 3, "sd": 0.01, "values": [0.5, "high", 0.52]},
            "gates[0].stats.builds.values[1]",
            'expected a finite number, got "high"',
        ),
        ("gates.0.power", {"queries_needed": -1}, "gates[0].power.queries_needed", "expected"),
        ("verdict", "great", "verdict", "expected one of "),
        ("exit_code", True, "exit_code", "expected one of 0, 1, 3, 4, got true"),
        ("exit_code", 5, "exit_code", "expected one of 0, 1, 3, 4, got 5"),
        ("summary", "all good", "summary", "expected a list, got a string"),
        ("provenance.fingerprints", None, "provenance.fingerprints", "expected an object"),
        ("queries.gold", -3, "queries.gold", "expected a whole number >= 0, got -3"),
        ("changes.hit_to_miss", None, "changes.hit_to_miss", "expected a list, got null"),
        ("timings.total_s", float("inf"), "timings.total_s", "expected a finite number"),
        ("gold_changes", {"added": 3}, "gold_changes.added", "expected a list, got a number"),
        ("matching", {"x": float("nan")}, "matching.x", "expected a finite number or null"),
        ("trend", {"metric": "recall@5"}, "trend.label", "missing required key"),
        (
            "trend",
            {"metric": "mrr", "label": "MRR", "value": 0.5, "points": [{"value": "x"}]},
            "trend.points[0].value",
            'expected a finite number, got "x"',
        ),
        (
            "gates.0.drift",
            {"label": "since v1", "status": "fail", "decision": "fail"},
            "gates[0].drift.blocking",
            "missing required key",
        ),
    ],
)
def test_a_report_off_the_schema_names_the_key(
    tmp_path: Path, key: str, value: Any, where: str, reason: str
) -> None:
    path = tmp_path / "report.json"
    with pytest.raises(InputError) as caught:
        validate_report(_with(key, value), path)
    assert str(caught.value).startswith(f"{path}: {where}: {reason}")


def test_an_infinite_baseline_age_is_refused_by_comment(tmp_path: Path, cli: Cli) -> None:
    report = copy.deepcopy(PASS)
    report["provenance"]["baseline"]["age_days"] = float("inf")
    path = tmp_path / "report.json"
    path.write_text(json.dumps(report))
    code, _, err = cli("comment", "--dry-run", "--report", str(path))
    assert code == 3
    assert err == (
        f"llm-eval: error: {path}: provenance.baseline.age_days: "
        "expected a finite number, got Infinity\n"
    )


def test_the_report_types_are_the_documented_keys() -> None:
    """report_types.py (what mypy checks the builder against) and docs/report-json.md
    (the contract) name the same top-level and gate keys."""
    import re
    import typing

    from llm_eval.report_types import GateEntry, Report

    doc = (Path(__file__).resolve().parents[1] / "docs" / "report-json.md").read_text()
    top = set(re.findall(r"^\| `(\w+)` \|", doc, re.M))
    gate_text = doc[doc.index("A **gate**:") : doc.index("- `stats`:")]
    gate = set(re.findall(r"`(\w+)`", gate_text))
    assert set(typing.get_type_hints(Report)) == top
    assert set(typing.get_type_hints(GateEntry)) - {"stats", "slices"} <= gate


def test_a_judge_part_without_what_the_comment_reads_is_refused(tmp_path: Path) -> None:
    """The comment's judge lines read the calls, tokens, cost and repeats: a report
    whose judge part lacks one is refused when read (exit 3), not a KeyError (exit 5)
    while the comment is written."""
    report = json.loads((Path(__file__).parent / "gold/reports/pass.json").read_text())
    report["judge"] = {"corrected": [], "uncorrected": [], "model": "m", "calibration": None}
    with pytest.raises(InputError, match=r"judge\.cached: missing required key"):
        validate_report(report, tmp_path / "report.json")
