"""A one-line progress bar on stderr, drawn only on a terminal.

    [##########----------]  171/342 queries  38.2/s  ETA 4s

It redraws at most ten times a second and erases itself when done. When stderr is
not a terminal (CI logs, a pipe) it writes nothing at all.
"""

from __future__ import annotations

import sys
import time
from collections.abc import Callable
from types import TracebackType
from typing import TextIO

_WIDTH = 20
_INTERVAL_S = 0.1


def progress_line(done: int, total: int, rate: float) -> str:
    """The bar, the counts, the rate (queries a second) and the time left."""
    filled = _WIDTH * done // total if total else _WIDTH
    bar = "#" * filled + "-" * (_WIDTH - filled)
    eta = f"ETA {duration((total - done) / rate)}" if rate > 0 and done < total else ""
    width = len(str(total))
    return f"[{bar}] {done:>{width}}/{total} queries  {rate:.1f}/s  {eta}".rstrip()


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


class Progress:
    """Draws `progress_line` on a terminal; a no-op elsewhere."""

    def __init__(
        self, stream: TextIO | None = None, clock: Callable[[], float] = time.monotonic
    ) -> None:
        self.stream = sys.stderr if stream is None else stream
        self.enabled = self.stream.isatty()
        self.clock = clock
        self.first: tuple[float, int] | None = None
        """When the first update came, and its count: the rate is measured from there, so
        that the time spent before the first query (loading, indexing) does not count."""
        self.drawn_at: float | None = None
        self.width = 0

    def update(self, done: int, total: int) -> None:
        """Record that `done` of `total` queries are finished (redraws now and then)."""
        if not self.enabled:
            return
        now = self.clock()
        if self.first is None:
            self.first = (now, done)
        if self.drawn_at is not None and now - self.drawn_at < _INTERVAL_S and done < total:
            return
        self.drawn_at = now
        started, counted = self.first
        rate = (done - counted) / (now - started) if now > started else 0.0
        line = progress_line(done, total, rate)
        self.stream.write("\r" + line.ljust(self.width))
        self.stream.flush()
        self.width = len(line)

    def close(self) -> None:
        """Erase the bar, leaving the cursor at the start of an empty line."""
        if self.enabled and self.width:
            self.stream.write("\r" + " " * self.width + "\r")
            self.stream.flush()
            self.width = 0

    def __enter__(self) -> Progress:
        return self

    def __exit__(
        self,
        kind: type[BaseException] | None,
        error: BaseException | None,
        trace: TracebackType | None,
    ) -> None:
        self.close()
