"""The terminal rendering of `llm-eval gate`: fits the width, colour only when asked."""

from __future__ import annotations

import io
import json
from pathlib import Path
from typing import Any

import pytest

from llm_eval.formats.text import gate_table, render_text
from llm_eval.output import render_table, use_colour

REPORTS = Path(__file__).parent / "gold" / "reports"
NAMES = sorted(p.stem for p in REPORTS.glob("*.json"))


def load(name: str) -> dict[str, Any]:
    return json.loads((REPORTS / f"{name}.json").read_text(encoding="utf-8"))


@pytest.mark.parametrize("name", NAMES)
@pytest.mark.parametrize("width", [80, 60])
def test_every_line_fits_the_width(name: str, width: int) -> None:
    text = render_text(load(name), width)
    too_long = [line for line in text.splitlines() if len(line) > width]
    assert too_long == []


def test_columns_are_dropped_least_important_first() -> None:
    report = load("failure_stats")
    wide = gate_table(report, 400).splitlines()[0].split()
    narrow = gate_table(report, 80).splitlines()[0].split()
    header = "gate metric scope baseline now Δ CI, p (vs limit) limits severity status"
    assert wide == header.split()
    assert narrow == ["gate", "baseline", "now", "Δ", "limits", "status"]


def test_the_interval_is_labelled_from_the_report() -> None:
    report = load("failure_stats")
    for gate in report["gates"]:
        gate["stats"]["confidence"] = 0.8
    assert "80% −35.0 to −20.6 pp, p < 0.001" in gate_table(report, 400)
    assert "90%" not in gate_table(report, 400)


def test_an_inconclusive_gate_says_it_cannot_tell() -> None:
    report = load("failure_stats")
    report["gates"][0]["status"] = "inconclusive"
    rows = gate_table(report, 80).splitlines()
    assert rows[2].endswith("CANNOT TELL")


def test_colour_marks_the_status_cells_without_moving_columns() -> None:
    report = load("failure_stats")
    plain = gate_table(report, 80)
    coloured = gate_table(report, 80, coloured=True)
    assert "\033[31mFAIL\033[0m" in coloured
    assert "\033[33mWARNING\033[0m" in coloured
    assert coloured.replace("\033[31m", "").replace("\033[33m", "").replace("\033[0m", "") == plain
    assert "\033" not in render_text(report, 80)


def test_render_table_style_sees_unpadded_cells() -> None:
    seen: list[tuple[int, str]] = []

    def style(index: int, text: str) -> str:
        seen.append((index, text))
        return text.upper()

    assert render_table(["a", "b"], [["x", "yy"]], style) == "a   b\n-  --\nX  YY"
    assert seen == [(0, "x"), (1, "yy")]


class Tty(io.StringIO):
    def isatty(self) -> bool:
        return True


@pytest.mark.parametrize(
    ("stream", "environ", "expected"),
    [
        (Tty(), {}, True),
        (Tty(), {"NO_COLOR": "1"}, False),
        (Tty(), {"NO_COLOR": ""}, True),  # no-color.org: only a non-empty value counts
        (io.StringIO(), {}, False),
    ],
)
def test_colour_only_on_a_terminal_without_no_color(
    stream: io.StringIO, environ: dict[str, str], expected: bool
) -> None:
    assert use_colour(stream, environ) is expected


def test_help_is_not_cut_and_gate_help_lists_the_exit_codes() -> None:
    from click.testing import CliRunner

    from llm_eval.cli import cli

    top = CliRunner().invoke(cli, ["--help"], terminal_width=80).output
    commands = top.split("Commands:")[1]
    assert "..." not in commands
    assert "create" not in CliRunner().invoke(cli, ["baseline", "--help"]).output.lower()
    gate = CliRunner().invoke(cli, ["gate", "--help"], terminal_width=80).output
    for code in range(6):
        assert f"\n    {code}  " in gate


def test_an_inconclusive_tag_is_information_not_a_warning() -> None:
    report = load("failure_stats")
    assert "! MRR (tag " in render_text(report, 200)
    for piece in report["gates"][1]["slices"]:
        piece["status"] = "inconclusive"
    assert "! MRR (tag " not in render_text(report, 200)


@pytest.mark.parametrize("name", ["failure_stats", "inconclusive", "warning"])
def test_the_ascii_fallback_keeps_the_table_aligned_within_80_columns(name: str) -> None:
    text = render_text(load(name), 80, ascii=True)
    assert text.isascii()
    lines = text.splitlines()
    assert all(len(line) <= 80 for line in lines)
    table = lines[lines.index("") + 1 :]
    table = table[: table.index("")] if "" in table else table
    assert len({len(line) for line in table}) == 1  # every row as wide as the header


def test_a_changed_gold_set_names_each_query_once() -> None:
    text = render_text(load("gold_changed"), 80)
    assert text.splitlines()[2:9] == [
        "The gold set differs from the baseline's (1 query added, 1 query removed, 1",
        "  query changed), so the gate cannot compare honestly: accept the change with",
        "  llm-eval baseline refresh (a new baseline), or compare on the unchanged",
        "  queries with llm-eval gate --allow-gold-change.",
        "  added: a-187 (gold/python-docs-A.jsonl:187)",
        "  changed: a-041 (gold/python-docs-A.jsonl:41)",
        "  removed: b-012",
    ]
    for query_id in ("a-187", "a-041", "b-012"):
        assert text.count(query_id) == 1
