"""Progress: redrawn in place on a terminal of any width, throttled, erased at the end;
logged as plain lines now and then elsewhere.

The terminal tests run a script that drives `Progress` (with a clock of its own, so
nothing depends on timing) on a real pseudo-terminal of a set size, and under tmux,
a real terminal emulator, to see what is left on the screen.
"""

from __future__ import annotations

import io
import os
import shlex
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import pytest

from llm_eval.progress import Progress, duration, progress_line, stream_columns

CLEAR = "\x1b[K"
WIDTHS = [20, 30, 52, 80]
posix_only = pytest.mark.skipif(sys.platform == "win32", reason="pseudo-terminals are POSIX")


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
    ("columns", "line"),
    [
        (80, "[##########----------] 171/342 queries  38.2/s  ETA 4s"),
        (55, "[##########----------] 171/342 queries  38.2/s  ETA 4s"),
        (52, "[########---------] 171/342 queries  38.2/s  ETA 4s"),  # the bar narrows
        (45, "[#####-----] 171/342 queries  38.2/s  ETA 4s"),
        (44, "[####-----] 171/342 queries  38.2/s  ETA 4s"),
        (43, "[####----] 171/342 queries  38.2/s  ETA 4s"),
        (42, "[#######--------] 171/342 queries  ETA 4s"),  # then the rate goes
        (35, "[####----] 171/342 queries  ETA 4s"),
        (34, "[#######--------] 171/342  ETA 4s"),  # then the word
        (30, "[#####------] 171/342  ETA 4s"),
        (27, "[####----] 171/342  ETA 4s"),
        (26, "171/342  ETA 4s"),  # then the bar
        (20, "171/342  ETA 4s"),
        (15, "171/342"),  # then the time left
        (8, "171/342"),
        (5, "171/"),  # narrower than the counts: cut
        (1, ""),
    ],
)
def test_the_line_fits_in_one_column_less_than_the_terminal(columns: int, line: str) -> None:
    assert progress_line(171, 342, 38.2, columns) == line


@pytest.mark.parametrize(("done", "total", "rate"), [(0, 7, 0.0), (3, 1400, 0.01), (9, 9, 1e4)])
def test_at_every_width_the_line_leaves_the_last_column_free_and_keeps_the_counts(
    done: int, total: int, rate: float
) -> None:
    full = progress_line(done, total, rate)
    counts = f"{done}/{total}"
    for columns in range(2, 90):
        line = progress_line(done, total, rate, columns)
        assert len(line) <= columns - 1
        assert line == full or len(full) > columns - 1
        assert counts in line or len(counts) > columns - 1


@pytest.mark.parametrize(
    ("seconds", "text"), [(0.4, "0s"), (59.4, "59s"), (61, "1m01s"), (3725, "1h02m")]
)
def test_durations(seconds: float, text: str) -> None:
    assert duration(seconds) == text


def test_off_a_terminal_a_short_run_writes_nothing() -> None:
    stream, clock = io.StringIO(), Clock()
    with Progress(stream, clock) as progress:
        for done in range(1, 11):
            clock.now += 0.9
            progress.update(done, 10)
    assert stream.getvalue() == ""


def test_off_a_terminal_a_step_longer_than_ten_seconds_is_not_silent() -> None:
    """Steps of 25 s: the watcher's ticks log the count reached so far each ten seconds
    of silence, and nothing once the work is done."""
    stream, clock = io.StringIO(), Clock()
    with Progress(stream, clock, "documents") as progress:
        progress.tick()  # before any update: nothing to say
        for done in (0, 100, 200):
            progress.update(done, 200)
            for _ in range(25):
                clock.now += 1.0
                progress.tick()
    assert stream.getvalue() == (
        "[--------------------]   0/200 documents  0.0/s\n"  # at 10 s
        "[--------------------]   0/200 documents  0.0/s\n"  # at 20 s
        "[##########----------] 100/200 documents  3.3/s  ETA 30s\n"  # 30 s
        "[##########----------] 100/200 documents  2.5/s  ETA 40s\n"
        "[##########----------] 100/200 documents  2.0/s  ETA 50s\n"
        "[####################] 200/200 documents  4.0/s\n"
    )


def test_the_watcher_runs_only_on_the_real_clock_off_a_terminal() -> None:
    with Progress(io.StringIO(), Clock()) as progress:
        assert progress._watcher is None
    with Progress(Terminal()) as progress:
        assert progress._watcher is None
    with Progress(io.StringIO()) as progress:
        watcher = progress._watcher
        assert watcher is not None and watcher.is_alive() and watcher.daemon
    assert not watcher.is_alive() and progress._watcher is None


def test_the_heading_comes_once_before_the_first_line_and_never_on_a_short_run() -> None:
    for steps, expected in ((3, ""), (12, "said first\n[####")):
        stream, clock = io.StringIO(), Clock()
        with Progress(stream, clock, "documents") as progress:
            progress.heading = "said first"
            for done in range(steps):
                progress.update(done, 12)
                clock.now += 1.0
        assert stream.getvalue().startswith(expected)
        assert stream.getvalue().count("said first") == (steps > 3)


@pytest.mark.parametrize("unit", ["documents", "judgments"])
def test_the_unit_is_the_callers_word(unit: str) -> None:
    assert (
        progress_line(3, 8, 1.0, None, unit) == f"[#######-------------] 3/8 {unit}  1.0/s  ETA 5s"
    )
    # "documents" and "judgments" are as long: the rate goes first at 36 columns
    assert progress_line(3, 8, 1.0, 36, unit) == f"[####-------] 3/8 {unit}  ETA 5s"


def test_off_a_terminal_a_line_every_ten_seconds_and_one_at_the_end() -> None:
    stream, clock = io.StringIO(), Clock()
    with Progress(stream, clock) as progress:
        for done in range(1, 31):
            progress.update(done, 30)
            clock.now += 1.0
    assert stream.getvalue() == (
        "[#######-------------] 11/30 queries  1.0/s  ETA 19s\n"
        "[##############------] 21/30 queries  1.0/s  ETA 9s\n"
        "[####################] 30/30 queries  1.0/s\n"
    )


def test_on_a_terminal_it_redraws_at_most_ten_times_a_second_and_erases_itself(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setenv("COLUMNS", "80")  # a StringIO has no terminal size of its own
    stream, clock = Terminal(), Clock()
    with Progress(stream, clock) as progress:
        progress.update(1, 4)
        clock.now += 0.05
        progress.update(2, 4)  # too soon: skipped
        clock.now += 0.1
        progress.update(3, 4)
        progress.update(4, 4)  # the last one is always drawn
    assert stream.getvalue().split("\r") == [
        "",
        f"[#####---------------] 1/4 queries  0.0/s{CLEAR}",
        f"[###############-----] 3/4 queries  13.3/s  ETA 0s{CLEAR}",  # 2 in 0.15 s
        f"[####################] 4/4 queries  20.0/s{CLEAR}",  # what is left is cleared
        CLEAR,
    ]


def test_on_a_terminal_the_line_follows_the_width(monkeypatch: pytest.MonkeyPatch) -> None:
    stream, clock = Terminal(), Clock()
    with Progress(stream, clock) as progress:
        for columns, done in [(80, 1), (30, 2), (20, 3)]:
            monkeypatch.setenv("COLUMNS", str(columns))
            clock.now += 1.0
            progress.update(done, 342)
    assert stream.getvalue().split("\r")[1:4] == [
        f"[--------------------]   1/342 queries  0.0/s{CLEAR}",
        f"[--------]   2/342  ETA 5m40s{CLEAR}",
        f"3/342  ETA 5m39s{CLEAR}",  # without the bar, no alignment
    ]


def test_without_a_terminal_size_of_its_own_the_width_is_the_usual_fallback(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setenv("COLUMNS", "61")
    assert stream_columns(Terminal()) == 61


# --- on a real terminal --------------------------------------------------------------

DRIVER = """
import fcntl, struct, sys, termios
from llm_eval.progress import Progress

class Clock:
    now = 0.0
    def __call__(self):
        return self.now

total, keep, widths = int(sys.argv[1]), sys.argv[2] == "keep", sys.argv[3:]
clock = Clock()
progress = Progress(clock=clock)
for done in range(1, total + 1):
    if widths:  # the terminal is resized as the run goes
        columns = int(widths[(done - 1) * len(widths) // total])
        fcntl.ioctl(2, termios.TIOCSWINSZ, struct.pack("HHHH", 10, columns, 0, 0))
    clock.now += 0.25
    progress.update(done, total)
if keep:
    sys.stderr.write("\\nDONE\\n")
else:
    progress.close()
"""


def expected_frame(done: int, total: int, columns: int) -> str:
    """What DRIVER draws for `done`: a query each 0.25 s, measured from the first."""
    return progress_line(done, total, 4.0 if done > 1 else 0.0, columns)


def run_on_a_pty(columns: int, total: int, *widths: int) -> str:
    """DRIVER's stderr on a pseudo-terminal `columns` wide, as the terminal received it."""
    import fcntl
    import struct
    import termios

    master, slave = os.openpty()
    fcntl.ioctl(slave, termios.TIOCSWINSZ, struct.pack("HHHH", 10, columns, 0, 0))
    child = subprocess.Popen(
        [sys.executable, "-c", DRIVER, str(total), "close", *map(str, widths)],
        stdin=subprocess.DEVNULL,
        stdout=subprocess.DEVNULL,
        stderr=slave,
    )
    os.close(slave)
    received = bytearray()
    try:
        while chunk := os.read(master, 65536):
            received += chunk
    except OSError:  # EIO: the child closed its end
        pass
    finally:
        os.close(master)
    assert child.wait() == 0
    return received.decode()


@posix_only
@pytest.mark.parametrize("columns", WIDTHS)
def test_on_a_pseudo_terminal_each_redraw_fits_and_clears_to_the_end(columns: int) -> None:
    written = run_on_a_pty(columns, 120)
    assert "\n" not in written
    frames = written.split("\r")
    assert frames[0] == "" and frames[-1] == CLEAR
    assert frames[1:-1] == [f"{expected_frame(d, 120, columns)}{CLEAR}" for d in range(1, 121)]
    assert max(len(frame.removesuffix(CLEAR)) for frame in frames) <= columns - 1


@posix_only
def test_on_a_pseudo_terminal_the_line_follows_a_resize() -> None:
    written = run_on_a_pty(80, 120, 80, 30, 52, 20)
    frames = written.split("\r")[1:-1]
    widths = [[80, 30, 52, 20][(d - 1) * 4 // 120] for d in range(1, 121)]
    assert frames == [
        f"{expected_frame(d, 120, w)}{CLEAR}" for d, w in zip(range(1, 121), widths, strict=True)
    ]


@posix_only
@pytest.mark.skipif(shutil.which("tmux") is None, reason="needs tmux, a terminal emulator")
@pytest.mark.parametrize("columns", WIDTHS)
def test_in_a_terminal_emulator_only_the_last_line_is_left(columns: int, tmp_path: Path) -> None:
    """tmux interprets what the terminal receives; a redraw that wrapped would leave
    the start of each longer line stacked above the last one."""
    driver = tmp_path / "driver.py"
    driver.write_text(DRIVER, encoding="utf-8")
    command = f"{shlex.quote(sys.executable)} {shlex.quote(str(driver))} 120 keep; exec sleep 60"
    environ = {k: v for k, v in os.environ.items() if k != "TMUX"}  # not nested in a caller's
    environ["PYTHONPATH"] = str(Path(__file__).resolve().parents[1])
    # A server of its own, on a socket path short enough for AF_UNIX (tmp_path may not be).
    with tempfile.TemporaryDirectory(prefix="tmux") as folder:
        tmux = ["tmux", "-S", f"{folder}/s", "-f", os.devnull]
        subprocess.run(
            [*tmux, "new-session", "-d", "-x", str(columns), "-y", "10", command],
            check=True,
            env=environ,
        )
        try:
            screen = ""
            deadline = time.monotonic() + 30  # only a bound on waiting for the driver
            while "DONE" not in screen and time.monotonic() < deadline:
                time.sleep(0.05)
                screen = subprocess.run(
                    [*tmux, "capture-pane", "-p"], capture_output=True, text=True, check=True
                ).stdout
        finally:
            subprocess.run([*tmux, "kill-server"], check=False, capture_output=True)
    assert screen.rstrip("\n").split("\n") == [expected_frame(120, 120, columns), "DONE"]
