"""GitHub Actions output: workflow-command escaping, annotations, the job summary."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from conftest import Cli

from llm_eval.actions import (
    ANNOTATIONS_MAX,
    escape_data,
    escape_property,
    publish,
    regression_annotations,
    relative_path,
    workflow_command,
)

REPORTS = Path(__file__).parent / "gold" / "reports"


def load(name: str) -> dict[str, Any]:
    report: dict[str, Any] = json.loads((REPORTS / f"{name}.json").read_text(encoding="utf-8"))
    return report


@pytest.mark.parametrize(
    ("text", "data", "prop"),
    [
        ("plain", "plain", "plain"),
        ("100%", "100%25", "100%25"),
        ("a\r\nb", "a%0D%0Ab", "a%0D%0Ab"),
        ("a:b,c", "a:b,c", "a%3Ab%2Cc"),
        ("::error::x", "::error::x", "%3A%3Aerror%3A%3Ax"),
        ("%0A", "%250A", "%250A"),
    ],
)
def test_workflow_command_escaping(text: str, data: str, prop: str) -> None:
    assert escape_data(text) == data
    assert escape_property(text) == prop


def test_a_workflow_command_leaves_out_missing_properties() -> None:
    assert workflow_command("error", "m\n", file="a.jsonl", line=None, title="t:1") == (
        "::error file=a.jsonl,title=t%3A1::m%0A"
    )
    assert workflow_command("warning", "plain") == "::warning::plain"


def test_a_failed_gate_annotates_the_worst_regressed_queries(tmp_path: Path) -> None:
    lines = regression_annotations(load("failure"), tmp_path)
    assert len(lines) == ANNOTATIONS_MAX
    assert lines[0] == (
        "::error file=gold/python-docs-A.jsonl,line=38,title=a-038 dropped out of the top 5::"
        "temp file that gets removed automatically when closed%0A"
        "First relevant document, rank before → after: 1 → not retrieved. "
        "Relevant: tempfile.NamedTemporaryFile#0, tempfile.TemporaryFile#0, "
        "tempfile.SpooledTemporaryFile#0, tempfile#0"
    )


def test_only_warning_gates_failing_gives_warnings_and_passing_gives_none(
    tmp_path: Path,
) -> None:
    lines = regression_annotations(load("warning"), tmp_path)
    assert lines and all(line.startswith("::warning ") for line in lines)
    assert regression_annotations(load("pass"), tmp_path) == []


def test_hostile_query_text_cannot_start_another_workflow_command(tmp_path: Path) -> None:
    report = load("failure")
    change = report["changes"]["hit_to_miss"][0]
    change["query"] = "x\n::set-output name=a::b\r\n::add-mask::y 100%"
    change["query_id"] = "q:1,file=evil"
    (line, *_) = regression_annotations(report, tmp_path)
    assert "\n" not in line and "\r" not in line
    assert "title=q%3A1%2Cfile=evil dropped out" in line
    assert "::x%0A::set-output name=a::b%0D%0A::add-mask::y 100%25%0A" in line


@pytest.mark.parametrize(
    ("path", "expected"),
    [
        ("gold/a.jsonl", "gold/a.jsonl"),
        ("{cwd}/gold/a.jsonl", "gold/a.jsonl"),
        ("/elsewhere/a.jsonl", "/elsewhere/a.jsonl"),
        (None, None),
    ],
)
def test_annotation_paths_are_relative_to_the_working_directory(
    tmp_path: Path, path: str | None, expected: str | None
) -> None:
    given = path.format(cwd=tmp_path) if path else None
    assert relative_path(given, tmp_path) == expected


def test_publish_appends_the_summary_and_annotates_only_in_github_actions(
    tmp_path: Path,
) -> None:
    summary = tmp_path / "summary.md"
    summary.write_text("# earlier step\n", encoding="utf-8")
    report = load("failure")
    assert publish(report, {"GITHUB_STEP_SUMMARY": str(summary)}, tmp_path) == []
    text = summary.read_text(encoding="utf-8")
    assert text.startswith("# earlier step\n## ❌ Retrieval quality: FAIL")
    assert "<!-- llm-eval" not in text
    lines = publish(report, {"GITHUB_ACTIONS": "true"}, tmp_path)
    assert len(lines) == ANNOTATIONS_MAX
    assert publish(report, {}, tmp_path) == []


def test_a_summary_that_cannot_be_written_is_a_warning_not_a_failure(tmp_path: Path) -> None:
    env = {"GITHUB_STEP_SUMMARY": str(tmp_path)}  # a directory: cannot be opened to append
    (line,) = publish(load("pass"), env, tmp_path)
    assert line.startswith("::warning::llm-eval: could not append the job summary: ")


def test_gate_in_github_actions_writes_the_summary_and_annotations(
    indexed_demo: Path, monkeypatch: pytest.MonkeyPatch, cli: Cli
) -> None:
    summary = indexed_demo / "summary.md"
    monkeypatch.setenv("GITHUB_ACTIONS", "true")
    monkeypatch.setenv("GITHUB_STEP_SUMMARY", str(summary))
    code, out, _ = cli("gate", "--config", "config/examples/degraded.yaml")
    assert code == 1
    commands = [line for line in out.splitlines() if line.startswith("::")]
    assert len(commands) == ANNOTATIONS_MAX
    # tier A is gated by the failing recall@5 gate; tier B only by the MRR warning gate
    levels = {line.split(" ")[0] + " " + line.split(",")[0].split("file=")[1] for line in commands}
    assert levels <= {"::error gold/python-docs-A.jsonl", "::warning gold/python-docs-B.jsonl"}
    assert summary.read_text(encoding="utf-8").startswith("## ❌ Retrieval quality: FAIL")


def test_annotations_name_paths_from_the_repository_root_and_levels_by_coverage(
    tmp_path: Path,
) -> None:
    report = {
        "verdict": "fail",
        "gates": [
            {"scope_key": "tier=A", "status": "fail", "severity": "error", "blocking": True},
            {"scope_key": "tags=howto", "status": "warn", "severity": "warning"},
        ],
        "changes": {
            "k": 5,
            "hit_to_miss": [
                {
                    "query_id": q,
                    "query": "q",
                    "tier": tier,
                    "tags": tags,
                    "rank_before": 1,
                    "rank_after": None,
                    "relevant": [],
                    "file": "gold/a.jsonl",
                    "line": 3,
                }
                for q, tier, tags in [("a", "A", []), ("b", "B", ["howto"]), ("c", "B", [])]
            ],
        },
    }
    sub = tmp_path / "service"
    lines = regression_annotations(report, sub, tmp_path)
    assert [line.split("::")[1].split(",")[0] for line in lines] == [
        "error file=service/gold/a.jsonl",
        "warning file=service/gold/a.jsonl",
        "notice file=service/gold/a.jsonl",
    ]
