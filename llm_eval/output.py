"""Plain-text rendering helpers shared by the commands."""

from __future__ import annotations

import codecs
import io
import sys
from collections.abc import Sequence


def render_table(header: Sequence[str], rows: Sequence[Sequence[str]]) -> str:
    """A plain aligned table: first column left-aligned, the others right-aligned."""
    widths = [max(len(str(r[i])) for r in [header, *rows]) for i in range(len(header))]

    def line(cells: Sequence[str]) -> str:
        first = str(cells[0]).ljust(widths[0])
        rest = (str(c).rjust(w) for c, w in zip(cells[1:], widths[1:], strict=True))
        return "  ".join([first, *rest]).rstrip()

    rule = "  ".join("-" * w for w in widths)
    return "\n".join([line(header), rule, *(line(r) for r in rows)])


def plural(count: int, singular: str, many: str) -> str:
    """`1 query`, `2 queries`."""
    return f"{count} {singular if count == 1 else many}"


ASCII_FALLBACK = "llm-eval-ascii"
"""The encoding error handler of `degrade_unencodable_output`."""

_ASCII_SPELLING = {
    "✓": "ok",
    "✗": "x",
    "−": "-",
    "–": "-",
    "—": "--",
    "Δ": "delta",
    "…": "...",
    "≥": ">=",
    "≤": "<=",
    "→": "->",
    "·": "-",
    "±": "+/-",
    "×": "x",
}


def _spell_in_ascii(exc: UnicodeError) -> tuple[str, int]:
    """The common symbols in ASCII, anything else as a backslash escape."""
    if not isinstance(exc, UnicodeEncodeError):
        raise exc
    text = exc.object[exc.start : exc.end]
    spelled = (
        _ASCII_SPELLING.get(char) or char.encode("ascii", "backslashreplace").decode("ascii")
        for char in text
    )
    return "".join(spelled), exc.end


codecs.register_error(ASCII_FALLBACK, _spell_in_ascii)


def degrade_unencodable_output() -> None:
    """Let stdout and stderr write what their encoding cannot (latin-1, ascii) in ASCII.

    The report uses symbols such as ✓ and −; on a stream that cannot encode them
    (`PYTHONIOENCODING=latin-1`, an old terminal) they are spelled out instead of
    stopping the program half-way through its output.
    """
    for stream in (sys.stdout, sys.stderr):
        # stderr escapes by default (backslashreplace); the fallback also spells the symbols.
        if isinstance(stream, io.TextIOWrapper) and stream.errors in ("strict", "backslashreplace"):
            stream.reconfigure(errors=ASCII_FALLBACK)
