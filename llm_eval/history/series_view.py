"""`llm-eval history` as terminal text: per gate a sparkline, then one row per point,
then every skipped point with its reason."""

from __future__ import annotations

from collections.abc import Sequence

from llm_eval.criteria import Gate
from llm_eval.history.gates import GateHistory
from llm_eval.history.series import SPARK_GAP, Entry, Point, Skipped, series, sparkline
from llm_eval.output import render_table, wrap
from llm_eval.wording.english import plural
from llm_eval.wording.gates import delta, limits_text, subject, value

INDENT = "   "


def history_text(found: GateHistory, width: int = 80) -> str:
    """The whole printout, no line wider than `width` (at least 40)."""
    width = max(width, 40)
    history = found.history
    entries = history.entries
    lines = [_title(found, entries)]
    if not entries:
        lines.append(f"{found.baseline_path} has no committed version yet: nothing to show.")
        return "\n".join([*lines, *_shallow(found, width)])
    lines.append("")
    for number, gate in enumerate(found.gates, 1):
        lines += _gate_block(number, gate, entries, width)
    lines += ["", *_table(found.gates, entries, width)]
    if history.skipped:
        lines += ["", f"Skipped, drawn as {SPARK_GAP} above:"]
        for skipped in history.skipped:
            lines += wrap(f"{INDENT}{skipped.where}: {skipped.reason}", width, INDENT * 2)
    lines += _shallow(found, width)
    return "\n".join(lines)


def _title(found: GateHistory, entries: Sequence[Entry]) -> str:
    source = found.baseline_path + (f" and {found.history_file}" if found.history_file else "")
    dates = [e.date[:10] for e in entries if e.date]
    span = f", {dates[0]} to {dates[-1]}" if dates else ""
    return f"History of {source}: {plural(len(entries), 'point', 'points')}{span}, newest last"


def _gate_block(number: int, gate: Gate, entries: Sequence[Entry], width: int) -> list[str]:
    values = series(entries, gate.name)
    metric = gate.metric
    drift = (
        None if gate.drift is None else {"label": gate.drift.label(), "drift_max": gate.drift.limit}
    )
    limits = limits_text(
        metric, gate.threshold, gate.regression_max, gate.regression_relative, drift
    )
    head = f"#{number} {subject(metric, gate.scope.label())}, gate {gate.name}"
    head += f" ({limits})" if limits else ""
    room = width - len(INDENT)
    shown = values[-room:]
    known = [v for v in values if v is not None]
    summary = "no value"
    if known:
        summary = f"first {value(metric, known[0])}, last {value(metric, known[-1])}"
        if len(known) > 1:
            summary += f" ({delta(metric, known[-1] - known[0])})"
    if len(shown) < len(values):
        summary += f"; the line shows the newest {len(shown)}"
    spark = sparkline(shown, gate.regression_max or 0.0)
    return [*wrap(head, width, INDENT), *wrap(INDENT + summary, width, INDENT), INDENT + spark]


def _table(gates: Sequence[Gate], entries: Sequence[Entry], width: int) -> list[str]:
    """Date, commit and each gate's value right-aligned, the subject left-aligned after."""
    header = ["date", "commit", *(f"#{i}" for i in range(1, len(gates) + 1))]
    rows = [_row(gates, e) for e in entries]
    table = render_table(header, [r[:-1] for r in rows]).splitlines()
    fixed = max(len(line) for line in table)
    room = max(width - fixed - 2, 8)
    subjects = ["subject", "-" * min(room, 7), *(_cut(r[-1], room) for r in rows)]
    return [
        f"{line.ljust(fixed)}  {text}".rstrip() for line, text in zip(table, subjects, strict=True)
    ]


def _row(gates: Sequence[Gate], entry: Entry) -> list[str]:
    commit = (entry.commit or "")[:7] or "-"
    date = (entry.date or "")[:10] or "-"
    if isinstance(entry, Skipped):
        return [date, commit, *("-" for _ in gates), "skipped, listed below"]
    return [date, commit, *(_cell(g, entry) for g in gates), _subject(entry)]


def _cell(gate: Gate, point: Point) -> str:
    number = point.values.get(gate.name)
    return "-" if number is None else value(gate.metric, number)


def _subject(point: Point) -> str:
    return point.subject if point.source == "baseline" else "(kept report)"


def _cut(text: str, room: int) -> str:
    return text if len(text) <= room else text[: room - 1] + "…"


def _shallow(found: GateHistory, width: int) -> list[str]:
    if not found.history.shallow:
        return []
    text = (
        "This clone is shallow: older points may exist that it did not fetch (git fetch "
        "--unshallow, or fetch-depth: 0 in a workflow)."
    )
    return ["", *wrap(text, width, "")]
