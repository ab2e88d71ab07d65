"""Benchmark the dashboard page at 1,000 points × 20 series, measured in Chromium.

Builds a synthetic history (no git: the records the dashboard draws, 1,000 entries
with a gap every 97th, 2 metrics × 10 slices), renders the page, and opens it in
headless Chromium (Debian's `chromium`) several times with a fresh profile each, reading
what the page's own script records: `data-ready-ms` (navigation start to the end of the
script that draws the markers: HTML parsed, SVG built, every marker added, the page laid
out; painting is not included) and
`data-points` (markers drawn). Prints the page weight and the best and median times.

The named peer, in the same run: the same page with every marker written into the
SVG by Python as a linked circle with its tooltip (no script), the obvious alternative
design. The ratios say what drawing markers from data buys in weight and time.

Usage: python scripts/bench_dashboard.py [--entries 1000] [--series 20] [--repeat 5]
"""

from __future__ import annotations

import argparse
import os
import random
import re
import statistics
import subprocess
import tempfile
from pathlib import Path

from llm_eval.dashboard import Dashboard, Series
from llm_eval.formats.commands.dashboard import point_count, render_dashboard
from llm_eval.history import Entry, Point, Skipped

FLAGS = [
    "--headless",
    "--no-sandbox",
    "--disable-gpu",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
    "--no-first-run",
]


def synthetic(entries: int, series: int) -> Dashboard:
    """A random walk per series, a skipped entry every 97th."""
    rng = random.Random(0)
    timeline: list[Entry] = []
    for i in range(entries):
        sha = f"{rng.getrandbits(160):040x}"
        date = f"2026-{1 + i // 28 % 12:02}-{1 + i % 28:02}T00:00:00+00:00"
        if i % 97 == 96:
            timeline.append(Skipped(sha, date, f"baseline at {sha[:7]}", "invalid JSON"))
        else:
            timeline.append(Point(sha, date, "refresh", "baseline", None, {}))
    lines = []
    metrics = ("recall@5", "mrr")
    for s in range(series):
        level, values = 0.6, []
        for entry in timeline:
            level = min(1.0, max(0.0, level + rng.gauss(0, 0.005)))
            values.append(None if isinstance(entry, Skipped) else level)
        lines.append(Series(metrics[s % 2], f"tag:t{s // 2}", tuple(values)))
    return Dashboard(tuple(timeline), tuple(lines), commit_url="https://github.com/o/r/commit/")


def static_peer(page: str, board: Dashboard) -> str:
    """The page with its markers written as SVG by Python instead of drawn by the script."""
    script = re.compile(r"<script>\(function.*?</script>", re.S)
    page = script.sub(
        "<script>document.body.getBoundingClientRect();"
        "document.body.dataset.readyMs = performance.now().toFixed(1);"
        "document.body.dataset.points = document.querySelectorAll('.pts circle').length;"
        "</script>",
        page,
    )
    charts = iter(
        re.finditer(
            r'data-x0="([\d.]+)" data-dx="([\d.]+)" data-y0="([\d.]+)" '
            r'data-ky="([\d.]+)"',
            page,
        )
    )
    pieces = page.split("</svg>")
    out = []
    for piece, series in zip(pieces, board.series, strict=False):
        x0, dx, y0, ky = (float(g) for g in next(charts).groups())
        dots = []
        for i, v in enumerate(series.values):
            if v is None:
                continue
            entry = board.entries[i]
            dots.append(
                f'<a href="{board.commit_url}{entry.commit[:12]}"><circle cx="{x0 + i * dx:.1f}" '
                f'cy="{y0 - v * ky:.1f}" r="2.5"><title>{entry.date[:10]} {entry.commit[:12]}: '
                f"{v * 100:.1f}%</title></circle></a>"
            )
        out.append(f'{piece}<g class="pts">{"".join(dots)}</g>')
    return "</svg>".join([*out, *pieces[len(out) :]])


def measure(page: Path, repeat: int) -> tuple[list[float], int]:
    """`data-ready-ms` of each of `repeat` loads, and the markers drawn."""
    times, points = [], 0
    for run in range(repeat):
        with tempfile.TemporaryDirectory() as profile:
            dom = subprocess.run(
                ["chromium", *FLAGS, f"--user-data-dir={profile}", "--dump-dom", page.as_uri()],
                capture_output=True,
                text=True,
                timeout=300,
                check=True,
            ).stdout
        ready = re.search(r'data-ready-ms="([\d.]+)"', dom)
        drawn = re.search(r'data-points="(\d+)"', dom)
        if ready is None or drawn is None:
            raise SystemExit(f"{page.name}: the page's script did not finish (run {run + 1})")
        times.append(float(ready.group(1)))
        points = int(drawn.group(1))
    return times, points


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--entries", type=int, default=1000)
    parser.add_argument("--series", type=int, default=20)
    parser.add_argument("--repeat", type=int, default=5)
    args = parser.parse_args()
    board = synthetic(args.entries, args.series)
    page = render_dashboard(board)
    with tempfile.TemporaryDirectory() as folder:
        ours, peer = Path(folder) / "index.html", Path(folder) / "static.html"
        ours.write_text(page, "utf-8")
        peer.write_text(static_peer(page, board), "utf-8")
        results = {
            name: (path.stat().st_size, *measure(path, args.repeat))
            for name, path in (("dashboard", ours), ("static markers", peer))
        }
    load = os.getloadavg()[0]
    print(
        f"{args.entries} entries × {args.series} series, {point_count(board):,} points; "
        f"Chromium, best and median of {args.repeat} loads (fresh profile each); "
        f"load average {load:.1f} on {os.cpu_count()} CPUs"
    )
    for name, (size, times, drawn) in results.items():
        print(
            f"  {name:15} {size / 1e6:5.2f} MB  ready in {min(times):6.0f} ms best, "
            f"{statistics.median(times):6.0f} ms median  ({drawn:,} markers)"
        )
    (size, times, _), (peer_size, peer_times, _) = results.values()
    print(
        f"  ratio (static markers / dashboard): weight {peer_size / size:.2f}×, "
        f"median time {statistics.median(peer_times) / statistics.median(times):.2f}×"
    )


if __name__ == "__main__":
    main()
