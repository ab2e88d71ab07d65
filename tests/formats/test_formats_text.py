"""The terminal rendering of `llm-eval gate`: fits the width, colour only when asked."""

from __future__ import annotations

import io
import json
from pathlib import Path
from typing import Any

import pytest

from llm_eval.formats.text import crossing_lines, gate_table, render_text
from llm_eval.output import render_table, use_colour

REPORTS = Path(__file__).parent.parent / "gold" / "reports"
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


def crossings(
    lost: list[str], lost_count: int, gained: list[str], gained_count: int
) -> dict[str, Any]:
    """The `changes` record of a report: ids as listed, and the exact counts."""
    return {
        "k": 5,
        "hit_to_miss_count": lost_count,
        "miss_to_hit_count": gained_count,
        "hit_to_miss": [{"query_id": q} for q in lost],
        "miss_to_hit": [{"query_id": q} for q in gained],
    }


SEE = "  See report.md for their questions and ranks before and after."


@pytest.mark.parametrize(
    ("changes", "lines"),
    [
        (crossings([], 0, [], 0), []),
        (
            crossings(["a-1"], 1, [], 0),
            ["At the top 5: 1 query lost its relevant result, 0 gained one.", "  lost: a-1", SEE],
        ),
        (
            crossings([], 0, ["b-1", "b-2"], 2),
            [
                "At the top 5: 0 queries lost their relevant result, 2 gained one.",
                "  gained: b-1, b-2",
                SEE,
            ],
        ),
        (  # five are named: a sixth is counted, not named
            crossings(["a-1", "a-2", "a-3", "a-4", "a-5", "a-6"], 6, ["b-1"], 1),
            [
                "At the top 5: 6 queries lost their relevant result, 1 gained one.",
                "  lost: a-1, a-2, a-3, a-4, a-5 and 1 more",
                "  gained: b-1",
                SEE,
            ],
        ),
        (  # the report lists the first 200; the count is exact
            crossings(["a-1", "a-2", "a-3", "a-4", "a-5"], 900, ["b-1"], 1),
            [
                "At the top 5: 900 queries lost their relevant result, 1 gained one.",
                "  lost: a-1, a-2, a-3, a-4, a-5 and 895 more",
                "  gained: b-1",
                SEE,
            ],
        ),
    ],
)
def test_the_queries_that_crossed_the_cutoff_are_named_first_few(
    changes: dict[str, Any], lines: list[str]
) -> None:
    assert crossing_lines(changes) == lines


def test_the_failure_names_the_first_lost_and_gained_queries_at_80_columns() -> None:
    text = render_text(load("failure"), 80).splitlines()
    start = text.index("At the top 5: 48 queries lost their relevant result, 15 gained one.")
    assert text[start + 1 : start + 4] == [
        "  lost: a-038, a-042, a-061, a-124, a-138 and 43 more",
        "  gained: a-014, b-012, b-018, b-048, b-006 and 10 more",
        SEE,
    ]


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


def test_a_wrapped_list_of_ids_hangs_below_its_label() -> None:
    report = load("failure")
    for change in report["changes"]["hit_to_miss"]:
        change["query_id"] = f"howto-{change['query_id']}-with-a-long-id"
    text = render_text(report, 60).splitlines()
    start = text.index("  lost: howto-a-038-with-a-long-id,")
    assert text[start : start + 4] == [
        "  lost: howto-a-038-with-a-long-id,",
        "    howto-a-042-with-a-long-id, howto-a-061-with-a-long-id,",
        "    howto-a-124-with-a-long-id, howto-a-138-with-a-long-id",
        "    and 43 more",
    ]
