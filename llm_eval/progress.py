"""Progress on stderr: a line redrawn in place on a terminal, a plain line now and then elsewhere.

    [##########----------]  171/342 queries  38.2/s  ETA 4s
    [###-----------------]  700/5183 documents  9.6/s  ETA 7m47s

The unit is the caller's: queries retrieved, documents embedded, judgments asked.
On a terminal the line is redrawn at most ten times a second, fitted to the terminal's
width at each redraw (read again each time, so a resize is followed), and erased when
done. It never reaches the last column: a line that fills the width makes the terminal
wrap, and the next redraw, which only returns to the start of its own row, would leave
the first part stacked above it. When stderr is not a terminal (CI logs, a pipe) the
same line is written as a line of its own every ten seconds (sooner when the next
update is not due before then), with a last one at the end when any was written: a
short run writes nothing.
"""

from __future__ import annotations

import os
import sys
import time
from collections.abc import Callable
from types import TracebackType
from typing import TextIO

from llm_eval.output import terminal_width

_BAR_WIDTH = 20
_BAR_MIN = 8
"""A narrower bar says too little to be worth its columns."""
_REDRAW_S = 0.1
_LOG_EVERY_S = 10.0
_SLOW_STEP_S = 2.0
_FORESIGHT = 2.0
"""Updates at least `_SLOW_STEP_S` apart (embedding a step of texts) log a line early,
though not within 5 s of the last, when the next one, taking up to this many times as
long as the last (steps over texts sorted by length grow longer), could come after ten
silent seconds."""
_CLEAR_TO_END = "\x1b[K"
"""ECMA-48 EL (erase in line): clears what a longer earlier line left to the right."""


def progress_line(
    done: int, total: int, rate: float, columns: int | None = None, unit: str = "queries"
) -> str:
    """The bar, the counts, the rate (`unit` a second) and the time left, in fewer than
    `columns` columns (all of it when None).

    What does not fit goes, least important first: the bar narrows (down to 8), then
    the rate goes, then the unit's word, then the bar, then the time left; the counts
    stay, cut only on a terminal narrower than they are.
    """
    counts = f"{done:>{len(str(total))}}/{total}"
    eta = f"  ETA {duration((total - done) / rate)}" if rate > 0 and done < total else ""
    room = None if columns is None else columns - 1
    for tail in (f" {unit}  {rate:.1f}/s{eta}", f" {unit}{eta}", eta):
        text = counts + tail
        width = _BAR_WIDTH if room is None else min(_BAR_WIDTH, room - len(text) - 3)
        if width >= _BAR_MIN:
            return f"[{_bar(done, total, width)}] {text}"
    assert room is not None  # with no limit the first layout is taken
    counts = counts.lstrip()  # aligned to nothing without the bar
    return next((text for text in (counts + eta, counts) if len(text) <= room), counts[:room])


def _bar(done: int, total: int, width: int) -> str:
    filled = width * done // total if total else width
    return "#" * filled + "-" * (width - filled)


def duration(seconds: float) -> str:
    """`42s`, `3m05s`, `1h02m`."""
    whole = round(seconds)
    if whole < 60:
        return f"{whole}s"
    minutes, secs = divmod(whole, 60)
    if minutes < 60:
        return f"{minutes}m{secs:02d}s"
    hours, minutes = divmod(minutes, 60)
    return f"{hours}h{minutes:02d}m"


def stream_columns(stream: TextIO) -> int:
    """The width of the terminal `stream` writes to (stdout may be redirected when stderr
    is not); `terminal_width()` when the stream's own cannot be read."""
    try:
        columns = os.get_terminal_size(stream.fileno()).columns
    except (AttributeError, OSError, ValueError):
        columns = 0  # a pseudo-terminal nobody sized answers 0 too
    return columns if columns > 0 else terminal_width()


class Progress:
    """Shows `progress_line`: redrawn in place on a terminal, logged now and then elsewhere."""

    def __init__(
        self,
        stream: TextIO | None = None,
        clock: Callable[[], float] = time.monotonic,
        unit: str = "queries",
    ) -> None:
        self.stream = sys.stderr if stream is None else stream
        self.on_terminal = self.stream.isatty()
        self.clock = clock
        self.unit = unit
        """What is counted, in the plural ("queries", "documents", "judgments")."""
        self.first: tuple[float, int] | None = None
        """When the first update came, and its count: the rate is measured from there, so
        that the time spent before the first unit (loading, indexing) does not count."""
        self.shown_at: float | None = None
        self.updated_at: float | None = None
        """When the update before this one came: the gap between updates foretells when
        the next one will."""
        self.drawn = False
        """Whether a line is on the terminal to erase."""
        self.heading: str | None = None
        """A line written once, before the first progress line (when one is shown: a
        short run shows neither), such as what the count is of."""

    def update(self, done: int, total: int) -> None:
        """Record that `done` of `total` units are finished (shows it now and then)."""
        now = self.clock()
        if self.first is None:
            self.first = (now, done)
        gap = 0.0 if self.updated_at is None else now - self.updated_at
        self.updated_at = now
        if not self._due(now, done >= total, gap):
            return
        if self.heading is not None:
            self.close()
            self.stream.write(self.heading + "\n")
            self.heading = None
        self.shown_at = now
        started, counted = self.first
        rate = (done - counted) / (now - started) if now > started else 0.0
        if self.on_terminal:
            line = progress_line(done, total, rate, stream_columns(self.stream), self.unit)
            self.stream.write(f"\r{line}{_CLEAR_TO_END}")
            self.drawn = True
        else:
            self.stream.write(progress_line(done, total, rate, None, self.unit) + "\n")
        self.stream.flush()

    def _due(self, now: float, finished: bool, gap: float) -> bool:
        """On a terminal: the first, the last, and one each 0.1 s. Logged: one each 10 s
        (earlier when slow updates could leave a longer silence, see `_FORESIGHT`), and
        the last when any came before it."""
        assert self.first is not None
        if self.on_terminal:
            return finished or self.shown_at is None or now - self.shown_at >= _REDRAW_S
        since = self.first[0] if self.shown_at is None else self.shown_at
        if now - since >= _LOG_EVERY_S:
            return True
        early = now - since >= _LOG_EVERY_S / 2 and now - since + _FORESIGHT * gap > _LOG_EVERY_S
        if gap >= _SLOW_STEP_S and early:
            return True
        return finished and self.shown_at is not None

    def close(self) -> None:
        """Erase the line on a terminal, leaving the cursor at the start of an empty row."""
        if self.drawn:
            self.stream.write(f"\r{_CLEAR_TO_END}")
            self.stream.flush()
            self.drawn = False

    def __enter__(self) -> Progress:
        return self

    def __exit__(
        self,
        kind: type[BaseException] | None,
        error: BaseException | None,
        trace: TracebackType | None,
    ) -> None:
        self.close()
