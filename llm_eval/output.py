"""Plain-text rendering helpers shared by the commands."""

from __future__ import annotations

import codecs
import io
import re
import shutil
import sys
import textwrap
from collections.abc import Callable, Mapping, Sequence
from typing import TextIO

Style = Callable[[int, str], str]
"""Colours a table cell: (column index, cell text without padding) -> text to print."""

_ANSI = {"green": "32", "yellow": "33", "red": "31", "magenta": "35", "bold": "1"}


def render_table(
    header: Sequence[str], rows: Sequence[Sequence[str]], style: Style | None = None
) -> str:
    """A plain aligned table: first column left-aligned, the others right-aligned.

    `style` decorates body cells after padding, so colour codes do not shift columns."""
    widths = [max(len(str(r[i])) for r in [header, *rows]) for i in range(len(header))]

    def line(cells: Sequence[str], paint: Style | None) -> str:
        padded = [str(cells[0]).ljust(widths[0])]
        padded += [str(c).rjust(w) for c, w in zip(cells[1:], widths[1:], strict=True)]
        if paint is not None:
            padded = [
                p.replace(str(c), paint(i, str(c)), 1) if str(c) else p
                for i, (p, c) in enumerate(zip(padded, cells, strict=True))
            ]
        return "  ".join(padded).rstrip()

    rule = "  ".join("-" * w for w in widths)
    return "\n".join([line(header, None), rule, *(line(r, style) for r in rows)])


def table_width(header: Sequence[str], rows: Sequence[Sequence[str]]) -> int:
    """How many columns `render_table` needs for these cells."""
    widths = [max(len(str(r[i])) for r in [header, *rows]) for i in range(len(header))]
    return sum(widths) + 2 * (len(widths) - 1)


def render_blocks(
    header: Sequence[str], rows: Sequence[Sequence[str]], width: int = 80, keep: int = 1
) -> str:
    """`render_table`, or when that is wider than `width`, the same table cut into blocks
    of whole columns one under the other, each repeating the first `keep` columns (the
    row labels) and no wider than `width` (unless a single column already is)."""
    if table_width(header, rows) <= width:
        return render_table(header, rows)
    labels = list(range(keep))
    blocks: list[list[int]] = [[]]
    for column in range(keep, len(header)):
        trial = labels + blocks[-1] + [column]
        if blocks[-1] and table_width(*_columns(header, rows, trial)) > width:
            blocks.append([])
        blocks[-1].append(column)
    return "\n\n".join(render_table(*_columns(header, rows, labels + b)) for b in blocks)


def _columns(
    header: Sequence[str], rows: Sequence[Sequence[str]], picked: Sequence[int]
) -> tuple[list[str], list[list[str]]]:
    return [header[i] for i in picked], [[row[i] for i in picked] for row in rows]


def wrap(text: str, width: int, indent: str = "  ") -> list[str]:
    """`text` wrapped to `width` columns, continuation lines indented; a word longer
    than the width is broken rather than left overlong, and a number keeps its unit
    ("−8.5 pp", "120 ms") on its line."""
    glued = _UNIT.sub("\\1\ue000\\2", text)  # a private-use character, never split
    lines = textwrap.wrap(glued, width=width, subsequent_indent=indent, break_on_hyphens=False)
    return [line.replace("\ue000", " ") for line in lines] or [""]


_UNIT = re.compile(r"(\d) (pp|ms)\b")


def colour(text: str, name: str) -> str:
    """`text` in an ANSI colour."""
    return f"\033[{_ANSI[name]}m{text}\033[0m"


def terminal_width(fallback: int = 80) -> int:
    """The terminal's width (`COLUMNS` wins); `fallback` when there is no terminal."""
    return shutil.get_terminal_size((fallback, 24)).columns


def use_colour(stream: TextIO, environ: Mapping[str, str]) -> bool:
    """Colour only on a terminal, and never when `NO_COLOR` is set (https://no-color.org)."""
    if environ.get("NO_COLOR"):
        return False
    isatty = getattr(stream, "isatty", None)
    return bool(isatty and isatty())


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


def in_ascii(text: str) -> str:
    """`text` as the ASCII fallback would print it (`Δ` as `delta`, `−` as `-`)."""
    return text.encode("ascii", errors=ASCII_FALLBACK).decode("ascii")


def encodes(stream: object, text: str) -> bool:
    """Whether `stream`'s encoding can write `text` as it is."""
    encoding = getattr(stream, "encoding", None) or "utf-8"
    try:
        text.encode(encoding)
    except (UnicodeEncodeError, LookupError):
        return False
    return True


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
