"""The terminal rendering: verdict, gates table, a sentence per gate not passing.

No line is wider than the terminal: less important table columns are left out
and prose is wrapped.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from llm_eval.formats import RenderOptions
from llm_eval.output import colour, in_ascii, render_table, table_width, wrap
from llm_eval.stats import format_p
from llm_eval.wording.english import listed, plural
from llm_eval.wording.gates import (
    STATUS_WORDS,
    ci_range,
    delta,
    gold_change_counts,
    gold_change_sentence,
    limits_text,
    value,
)
from llm_eval.wording.report_lines import (
    coverage_lines,
    deciding_p,
    detail_lines,
    failure_lines,
    headline,
    judge_lines,
    missing_lines,
    unchanged,
)

_STATUS_WORD = {status: word.upper() for status, word in STATUS_WORDS.items()}
_STATUS_MARK = {"pass": "✓", "warn": "!", "fail": "✗", "inconclusive": "?"}
_STATUS_COLOUR = {"pass": "green", "warn": "yellow", "fail": "red", "inconclusive": "magenta"}
_VERDICT_COLOUR = {**_STATUS_COLOUR, "retriever_failed": "red"}

_GATE_COLUMNS = ("gate", "metric", "scope", "baseline", "now", "Δ", "CI", "limits", "severity")
_DROP_ORDER = ("CI", "severity", "scope", "metric", "limits", "baseline", "Δ")
"""Columns left out, in this order, until the table fits the terminal."""


def _gate_rows(report: Mapping[str, Any]) -> list[dict[str, str]]:
    return [
        {
            "gate": g["name"],
            "metric": g["metric_label"],
            "scope": g["scope"],
            "baseline": value(g["metric"], g["baseline"]),
            "now": value(g["metric"], g["value"]),
            "Δ": delta(g["metric"], g["delta"]),
            "CI": _ci_cell(g),
            "limits": limits_text(
                g["metric"],
                g["threshold"],
                g["regression_max"],
                g.get("regression_relative", False),
                g.get("drift"),
            ),
            "severity": g["severity"],
            "status": _STATUS_WORD[g["status"]],
        }
        for g in report["gates"]
    ]


def _ci_cell(gate: Mapping[str, Any]) -> str:
    stats = gate.get("stats")
    # Reports written before `confidence` was recorded carried 95% intervals.
    if not stats or stats.get("confidence", 0.95) is None:
        return ""
    if unchanged(stats):
        return "unchanged"
    metric = gate["metric"]
    level = f"{stats.get('confidence', 0.95) * 100:g}%"
    interval = ci_range(metric, stats["ci_low"], stats["ci_high"])
    p = deciding_p(gate.get("decision"), stats)
    shown = "" if p is None else f", {format_p(p, stats.get('method'))}"
    return f"{level} {interval}{shown}"


def gate_table(
    report: Mapping[str, Any], width: int, coloured: bool = False, ascii: bool = False
) -> str:
    """The gates as a table no wider than `width`: less important columns are left out
    until it fits (the gate's name and status always stay). `ascii` spells the symbols
    out before the columns are measured."""
    spell = in_ascii if ascii else str
    rows = [{k: spell(v) for k, v in row.items()} for row in _gate_rows(report)]
    titles = {column: spell(column) for column in _GATE_COLUMNS} | {"CI": "CI, p (vs limit)"}
    columns = [*_GATE_COLUMNS, "status"]

    def cells(cols: Sequence[str]) -> tuple[list[str], list[list[str]]]:
        return [titles.get(c, c) for c in cols], [[row[c] for c in cols] for row in rows]

    for dropped in _DROP_ORDER:
        if table_width(*cells(columns)) <= width:
            break
        columns.remove(dropped)
    last = len(columns) - 1

    def paint(index: int, text: str) -> str:
        if index != last or text.strip() not in _WORD_STATUS:
            return text
        return colour(text, _STATUS_COLOUR[_WORD_STATUS[text.strip()]])

    return render_table(*cells(columns), style=paint if coloured else None)


_WORD_STATUS = {word: status for status, word in _STATUS_WORD.items()}


GOLD_CHANGES_LISTED = 20
"""Queries listed per kind of change in the terminal; report.json has them all."""


def gold_change_lines(changes: Mapping[str, Any]) -> list[str]:
    """`  added: a-187 (gold/python-docs-A.jsonl:187)`, a line per query, by kind."""
    lines = []
    locations = changes.get("locations") or {}
    for kind in ("added", "changed", "removed"):
        ids = changes[kind]
        for query_id in ids[:GOLD_CHANGES_LISTED]:
            where = locations.get(query_id)
            place = f" ({where['file']}:{where['line']})" if where else ""
            lines.append(f"  {kind}: {query_id}{place}")
        if len(ids) > GOLD_CHANGES_LISTED:
            lines.append(f"  …and {len(ids) - GOLD_CHANGES_LISTED} more {kind} (report.json)")
    return lines


def _gold_changed_sentence(changes: Mapping[str, Any]) -> str:
    """Why the gold set is not compared, with counts only: the ids follow, a line each."""
    counts = gold_change_counts(*(len(changes[kind]) for kind in ("added", "removed", "changed")))
    first, second = changes["accept_commands"]
    return gold_change_sentence(counts, (first, second))


CHANGES_NAMED = 5
"""Queries named per direction (hit→miss, miss→hit) in the terminal; report.md has more."""


def crossing_lines(changes: Mapping[str, Any]) -> list[str]:
    """How many queries lost and gained their relevant result at the gating cutoff, the
    first few of each by id, and where to read about them; none when no query did."""
    lost, gained = changes["hit_to_miss_count"], changes["miss_to_hit_count"]
    if not lost and not gained:
        return []
    lines = [
        f"At the top {changes['k']}: {plural(lost, 'query', 'queries')} lost "
        f"{'its' if lost == 1 else 'their'} relevant result, {gained} gained one."
    ]
    for label, key, count in (("lost", "hit_to_miss", lost), ("gained", "miss_to_hit", gained)):
        if count:
            ids = [change["query_id"] for change in changes[key]]
            lines.append(f"  {label}: {listed(ids, CHANGES_NAMED, count)}")
    lines.append("  See report.md for their questions and ranks before and after.")
    return lines


def render_text(
    report: Mapping[str, Any], width: int = 80, coloured: bool = False, ascii: bool = False
) -> str:
    """The terminal rendering, no line wider than `width`: verdict, gates table, one
    sentence per gate not passing. `coloured` adds ANSI colour to the statuses; `ascii`
    spells symbols out before laying out (see `gate_table`)."""
    title = f"llm-eval gate: {headline(report)}"
    if ascii:
        title = in_ascii(title)
    if coloured:  # wrapped first: a line with colour codes is not wrapped later
        paint = _VERDICT_COLOUR.get(report["verdict"], "bold")
        title = "\n".join(colour(row, paint) for row in _fit(title, width))
    lines = [title, ""]
    if report["verdict"] == "retriever_failed":
        names = ", ".join(gate["name"] for gate in report["gates"])
        lines += [*failure_lines(report), "", f"Not measured: {names}."]
    else:
        lines += _measured_lines(report, width, coloured, ascii)
    lines += [f"Note: {note}" for note in report["notes"]]
    spell = in_ascii if ascii else str
    rows = (spell(row) for line in lines for row in line.split("\n"))
    return "\n".join(fitted for row in rows for fitted in _fit(row, width))


def _measured_lines(
    report: Mapping[str, Any], width: int, coloured: bool, ascii: bool
) -> list[str]:
    """What follows the title when the gates were measured: the judge, the gates table,
    a sentence per gate not passing, the crossings and the details."""
    lines: list[str] = []
    if report.get("judge"):
        lines += [*judge_lines(report), ""]
    if report["verdict"] == "gold_changed":
        changes = report["gold_changes"]
        lines += [_gold_changed_sentence(changes), *gold_change_lines(changes), ""]
        lines.append("On the unchanged queries, for information:")
    lines.append(gate_table(report, width, coloured, ascii))
    sentences = []
    for gate in report["gates"]:
        mark = _STATUS_MARK[gate["status"]]
        if gate["sentence"]:
            sentences.append(f"{mark} {gate['sentence']}")
        sentences += [  # an inconclusive tag is information, not a warning
            f"{_STATUS_MARK[piece['status']]} {piece['sentence']}"
            for piece in gate.get("slices", [])
            if piece["status"] in ("warn", "fail")
        ]
        small = [p for p in gate.get("slices", []) if not p["judged"]]
        if small:
            names = ", ".join(f"{p['slice'].removeprefix('tag:')} (n={p['n']})" for p in small)
            sentences.append(
                f"  {gate['name']}: {plural(len(small), 'tag slice', 'tag slices')} too small "
                f"to judge: {names}"
            )
        if gate.get("power_warning"):
            sentences.append(f"! {gate['power_warning']}")
    if sentences:
        lines += ["", *sentences]
    crossed = crossing_lines(report["changes"])
    lines += ["", *crossed] if crossed else []
    covered = coverage_lines(report)
    lines += ["", *covered] if covered else []
    lines += missing_lines(report)
    lines += detail_lines(report)
    return lines


def _fit(line: str, width: int) -> list[str]:
    """Table lines are already narrow enough; prose is wrapped, its continuation
    indented two spaces beyond the line's own indent (an indented list of ids stays
    apart from the next item)."""
    if len(line) <= width or "\033[" in line:
        return [line]
    return wrap(line, width, " " * (len(line) - len(line.lstrip(" ")) + 2))


class Text:
    """The verdict for a person at a terminal."""

    name = "text"
    description = "the verdict, the gates table and a sentence per gate not passing"
    filename = None

    def render(self, report: Mapping[str, Any], options: RenderOptions) -> str:
        """`render_text` at the options' width and colour."""
        return render_text(report, options.width, options.coloured, options.ascii)


FORMAT = Text()
