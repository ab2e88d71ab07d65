"""Benchmark the dashboard page at 1,000 history points × 20 tags, measured in Chromium.

Builds a synthetic history (no git: the records the dashboard draws, 1,000 entries with
a gap every 97th, a bad merge at entry 600): two gated metrics over all queries with
their floors, limits and a 95% interval per point, the design's five metrics over all
queries, and recall@5 and MRR on each of 20 tags. Renders the page and opens it in
headless Chromium (Debian's `chromium`) several times with a fresh profile each.

Prints the page's weight (the budget: under 2 MB) and, per load, the CPU time of the
whole Chromium process tree (user + system, from `getrusage(RUSAGE_CHILDREN)` around
the run: start-up, parsing, layout, the script, the DOM dump and exit; the budget:
under 1 s), and the page's own `data-ready-ms` (navigation start to the end of its
script: HTML parsed, SVG built, the shown charts' markers added, the page laid out).

Usage: python scripts/bench_dashboard.py [--entries 1000] [--tags 20] [--repeat 5]
"""

from __future__ import annotations

import argparse
import datetime
import os
import random
import re
import resource
import statistics
import subprocess
import tempfile
from pathlib import Path

from llm_eval.history.dashboard import Dashboard, Limit, Series, change_points, wilson
from llm_eval.history.dashboard_view import point_count, render_dashboard
from llm_eval.history.series import Entry, Point, Skipped

SIZE_BUDGET = 2e6
"""Bytes the page may weigh."""
CPU_BUDGET = 1.0
"""CPU seconds Chromium may spend opening it."""

FLAGS = [
    "--headless",
    "--no-sandbox",
    "--disable-gpu",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
    "--no-first-run",
]


FIRST_DAY = datetime.datetime(2024, 1, 1, tzinfo=datetime.UTC)
"""The synthetic history has one refresh a day from here (1,000 run into 2026)."""


def synthetic(entries: int, tags: int) -> Dashboard:
    """A random walk per series, a skipped entry every 97th, a drop of 6 points at
    entry 600; Wilson intervals over 400 queries (40 per tag)."""
    rng = random.Random(0)
    timeline: list[Entry] = []
    for i in range(entries):
        sha = f"{rng.getrandbits(160):040x}"
        date = (FIRST_DAY + datetime.timedelta(days=i)).isoformat()
        if i % 97 == 96:
            timeline.append(Skipped(sha, date, f"baseline at {sha[:7]}", "invalid JSON"))
        else:
            timeline.append(Point(sha, date, "refresh", "baseline", None, {}))

    def walk(metric: str, slice_: str, n: int, gates: tuple[str, ...] = ()) -> Series:
        start = 0.6
        level, values = start, []
        for i, entry in enumerate(timeline):
            level = min(1.0, max(0.0, level + rng.gauss(0, 0.003) - (0.06 if i == 600 else 0)))
            values.append(None if isinstance(entry, Skipped) else level)
        intervals = tuple(None if v is None else wilson(v, n) for v in values)
        newest = next(v for v in reversed(values) if v is not None)
        limits = (
            (
                Limit("floor", start - 0.15, "floor"),
                Limit("limit", newest - 0.03, "next change's limit"),
            )
            if gates
            else ()
        )
        return Series(
            metric,
            slice_,
            tuple(values),
            limits,
            gates,
            intervals,
            change_points(values, intervals),
        )

    lines = []
    for metric, slice_, gates in (
        ("recall@5", "overall", ("retrieval_recall_at_5",)),
        ("mrr", "overall", ("retrieval_mrr",)),
        ("recall@1", "overall", ()),
        ("recall@10", "overall", ()),
        ("ndcg@10", "overall", ()),
    ):
        lines.append(walk(metric, slice_, 400, gates))
    for t in range(tags):
        for metric in ("recall@5", "mrr"):
            lines.append(walk(metric, f"tag:t{t:02}", 40))
    return Dashboard(tuple(timeline), tuple(lines), commit_url="https://github.com/o/r/commit/")


def chromium_cpu(page: Path) -> tuple[float, str]:
    """One load of `page` with a fresh profile: the CPU seconds of Chromium's process
    tree (user + system, its reaped children included), and the DOM it dumped."""
    with tempfile.TemporaryDirectory() as profile:
        before = resource.getrusage(resource.RUSAGE_CHILDREN)
        dom = subprocess.run(
            ["chromium", *FLAGS, f"--user-data-dir={profile}", "--dump-dom", page.as_uri()],
            capture_output=True,
            text=True,
            timeout=300,
            check=True,
        ).stdout
        after = resource.getrusage(resource.RUSAGE_CHILDREN)
    return after.ru_utime + after.ru_stime - before.ru_utime - before.ru_stime, dom


def measure(page: Path, repeat: int) -> tuple[list[float], list[float], int]:
    """Per load: Chromium's CPU seconds and the page's `data-ready-ms`; the markers
    drawn."""
    cpu, ready_ms, points = [], [], 0
    for run in range(repeat):
        seconds, dom = chromium_cpu(page)
        cpu.append(seconds)
        ready = re.search(r'data-ready-ms="([\d.]+)"', dom)
        drawn = re.search(r'data-points="(\d+)"', dom)
        if ready is None or drawn is None:
            raise SystemExit(f"{page.name}: the page's script did not finish (run {run + 1})")
        ready_ms.append(float(ready.group(1)))
        points = int(drawn.group(1))
    return cpu, ready_ms, points


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--entries", type=int, default=1000)
    parser.add_argument("--tags", type=int, default=20)
    parser.add_argument("--repeat", type=int, default=5)
    args = parser.parse_args()
    board = synthetic(args.entries, args.tags)
    page = render_dashboard(board)
    with tempfile.TemporaryDirectory() as folder:
        path = Path(folder) / "index.html"
        path.write_text(page, "utf-8")
        size = path.stat().st_size
        cpu, ready, drawn = measure(path, args.repeat)
        empty = Path(folder) / "empty.html"
        empty.write_text("<!doctype html><title>empty</title>", "utf-8")
        floor = [chromium_cpu(empty)[0] for _ in range(args.repeat)]
    load = os.getloadavg()[0]
    print(
        f"{args.entries} entries × {args.tags} tags: {len(board.series)} series, "
        f"{point_count(board):,} points; Chromium, {args.repeat} loads (fresh profile each); "
        f"load average {load:.1f} on {os.cpu_count()} CPUs"
    )
    print(f"  page weight      {size / 1e6:5.2f} MB (budget {SIZE_BUDGET / 1e6:.0f} MB)")
    print(
        f"  Chromium CPU   {min(cpu):5.2f} s best, {statistics.median(cpu):5.2f} s median "
        f"(budget {CPU_BUDGET:.0f} s; the whole process tree, start-up included)"
    )
    print(
        f"  an empty page  {min(floor):5.2f} s best, {statistics.median(floor):5.2f} s median "
        f"(Chromium's own start-up and exit: the page's share is the difference)"
    )
    print(
        f"  page ready in  {min(ready):5.0f} ms best, {statistics.median(ready):5.0f} ms "
        f"median ({drawn:,} markers drawn on the charts shown)"
    )
    over = [
        what
        for what, bad in (
            ("weight", size >= SIZE_BUDGET),
            ("CPU", statistics.median(cpu) >= CPU_BUDGET),
        )
        if bad
    ]
    if over:
        raise SystemExit(f"over budget: {', '.join(over)}")


if __name__ == "__main__":
    main()
