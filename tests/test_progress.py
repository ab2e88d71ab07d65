"""The progress bar: drawn on a terminal only, throttled, erased at the end."""

from __future__ import annotations

import io

import pytest

from llm_eval.progress import Progress, duration, progress_line


class Terminal(io.StringIO):
    def isatty(self) -> bool:
        return True


class Clock:
    def __init__(self) -> None:
        self.now = 100.0

    def __call__(self) -> float:
        return self.now


@pytest.mark.parametrize(
    ("done", "total", "rate", "line"),
    [
        (0, 342, 0.0, "[--------------------]   0/342 queries  0.0/s"),
        (171, 342, 42.75, "[##########----------] 171/342 queries  42.8/s  ETA 4s"),
        (342, 342, 42.75, "[####################] 342/342 queries  42.8/s"),
        (1, 1400, 0.5, "[--------------------]    1/1400 queries  0.5/s  ETA 46m38s"),
    ],
)
def test_the_line_shows_counts_rate_and_time_left(
    done: int, total: int, rate: float, line: str
) -> None:
    assert progress_line(done, total, rate) == line


@pytest.mark.parametrize(
    ("seconds", "text"), [(0.4, "0s"), (59.4, "59s"), (61, "1m01s"), (3725, "1h02m")]
)
def test_durations(seconds: float, text: str) -> None:
    assert duration(seconds) == text


def test_nothing_is_written_when_stderr_is_not_a_terminal() -> None:
    stream = io.StringIO()
    with Progress(stream) as progress:
        for done in range(1, 11):
            progress.update(done, 10)
    assert stream.getvalue() == ""


def test_on_a_terminal_it_redraws_at_most_ten_times_a_second_and_erases_itself() -> None:
    stream, clock = Terminal(), Clock()
    with Progress(stream, clock) as progress:
        progress.update(1, 4)
        clock.now += 0.05
        progress.update(2, 4)  # too soon: skipped
        clock.now += 0.1
        progress.update(3, 4)
        progress.update(4, 4)  # the last one is always drawn
    frames = stream.getvalue().split("\r")
    assert frames[1] == "[#####---------------] 1/4 queries  0.0/s"
    assert frames[2] == "[###############-----] 3/4 queries  13.3/s  ETA 0s"  # 2 in 0.15 s
    assert frames[3].rstrip() == "[####################] 4/4 queries  20.0/s"  # padded
    assert frames[4] == " " * len(frames[3].rstrip()) and frames[5] == ""
