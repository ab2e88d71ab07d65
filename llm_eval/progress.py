"""Progress on stderr: a line redrawn in place on a terminal, a plain line now and then elsewhere.

    [##########----------]  171/342 queries  38.2/s  ETA 4s
    [###-----------------]  700/5183 documents  9.6/s  ETA 7m47s

The unit is the caller's: queries retrieved, documents embedded, judgments asked.
On a terminal the line is redrawn at most ten times a second, fitted to the terminal's
width at each redraw (read again each time, so a resize is followed), and erased when
done. It never reaches the last column: a line that fills the width makes the terminal
wrap, and the next redraw, which only returns to the start of its own row, would leave
the first part stacked above it. When stderr is not a terminal (CI logs, a pipe) the
same line is written as a line of its own every ten seconds, by a watcher thread
when no update comes for that long (a model loading, a step of texts longer than ten
seconds), with a last one at the end when any was written: a short run writes
nothing.
"""

from __future__ import annotations

import os
import sys
import threading
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
_TICK_S = 0.5
"""How often, off a terminal, a watcher looks for ten silent seconds while work is under
way (a step of texts that takes longer than ten seconds, a model still loading)."""
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
        self.drawn = False
        """Whether a line is on the terminal to erase."""
        self.heading: str | None = None
        """A line written once, before the first progress line (when one is shown: a
        short run shows neither), such as what the count is of."""
        self.last: tuple[int, int] | None = None
        """The latest count and total, which the watcher logs again after ten silent
        seconds."""
        self._lock = threading.RLock()
        """Updates may come from several threads (a judge's), and the watcher's too."""
        self._stop = threading.Event()
        self._watcher: threading.Thread | None = None

    def name_build(self, number: int, count: int) -> None:
        """Name the build under way in the line (`queries (build 2 of 3)`), for a
        retriever built several times."""
        with self._lock:
            self.unit = f"queries (build {number} of {count})"

    def update(self, done: int, total: int) -> None:
        """Record that `done` of `total` units are finished (shows it now and then)."""
        with self._lock:
            now = self.clock()
            if self.first is None:
                self.first = (now, done)
            self.last = (done, total)
            if self._due(now, done >= total):
                self._show(now, done, total)

    def tick(self) -> None:
        """Off a terminal, log the latest count again when ten seconds have passed without
        a line: a CI log never goes longer without one while work is under way, however
        long a step takes. Called by the watcher `with Progress()` starts."""
        with self._lock:
            if self.on_terminal or self.first is None or self.last is None:
                return
            if self.last[0] >= self.last[1]:
                return  # finished: the last line, if any, is written
            now = self.clock()
            since = self.first[0] if self.shown_at is None else self.shown_at
            if now - since >= _LOG_EVERY_S:
                self._show(now, *self.last)

    def _show(self, now: float, done: int, total: int) -> None:
        """Write the line (the heading first, once)."""
        assert self.first is not None
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

    def _due(self, now: float, finished: bool) -> bool:
        """On a terminal: the first, the last, and one each 0.1 s. Logged: one each 10 s
        (the watcher, `tick`, covers a step longer than that), and the last when any came
        before it."""
        assert self.first is not None
        if self.on_terminal:
            return finished or self.shown_at is None or now - self.shown_at >= _REDRAW_S
        since = self.first[0] if self.shown_at is None else self.shown_at
        if now - since >= _LOG_EVERY_S:
            return True
        return finished and self.shown_at is not None

    def close(self) -> None:
        """Erase the line on a terminal, leaving the cursor at the start of an empty row."""
        if self.drawn:
            self.stream.write(f"\r{_CLEAR_TO_END}")
            self.stream.flush()
            self.drawn = False

    def __enter__(self) -> Progress:
        """Off a terminal, start the watcher that calls `tick` (a daemon thread: it never
        keeps the process alive). Only on the real clock: a caller's own clock (a
        test's) is read by the caller's thread alone."""
        if not self.on_terminal and self.clock is time.monotonic:
            self._stop.clear()
            self._watcher = threading.Thread(target=self._watch, name="progress", daemon=True)
            self._watcher.start()
        return self

    def _watch(self) -> None:
        while not self._stop.wait(_TICK_S):
            self.tick()

    def __exit__(
        self,
        kind: type[BaseException] | None,
        error: BaseException | None,
        trace: TracebackType | None,
    ) -> None:
        self._stop.set()
        if self._watcher is not None:
            self._watcher.join()
            self._watcher = None
        self.close()
