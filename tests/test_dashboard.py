"""`llm-eval dashboard` on a generated git history, opened in headless Chromium: every
chart drew one marker per point of its series (counted in the DOM after the page's
script ran, against numbers computed here from the generated baselines), and the
console stayed free of errors."""

from __future__ import annotations

import json
import math
import re
import shutil
import subprocess
from pathlib import Path
from typing import Any

import pytest
from conftest import script
from test_history import demo_baseline, fast_import, init_repo, with_misses

from llm_eval.cli import main

CHROMIUM = shutil.which("chromium")
needs_chromium = pytest.mark.skipif(
    CHROMIUM is None, reason="Debian's chromium is not installed (.ci/run installs it)"
)
# The benchmark's flags (headless, no sandbox, no background networking: this machine's
# network is closed), with Chromium's console on stderr for the no-error check.
FLAGS = [*script("bench_dashboard").FLAGS, "--enable-logging=stderr", "--v=0"]


def open_page(page: Path, profile: Path) -> tuple[str, str]:
    """The DOM after the page's scripts ran, and Chromium's log (console messages)."""
    assert CHROMIUM is not None
    done = subprocess.run(
        [CHROMIUM, *FLAGS, f"--user-data-dir={profile}", "--dump-dom", page.as_uri()],
        capture_output=True,
        text=True,
        timeout=120,
        check=True,
    )
    return done.stdout, done.stderr


def console_errors(log: str) -> list[str]:
    """Console messages of level error and uncaught exceptions in Chromium's log."""
    return [
        line
        for line in log.splitlines()
        if "CONSOLE" in line and ("Uncaught" in line or ":ERROR:" in line or "error" in line)
    ]


@needs_chromium
def test_the_console_check_sees_an_error(tmp_path: Path) -> None:
    page = tmp_path / "broken.html"
    page.write_text("<!doctype html><script>console.error('broken'); null.x;</script>")
    _, log = open_page(page, tmp_path / "profile")
    assert console_errors(log), log


@needs_chromium
def test_every_chart_draws_its_points(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    repo = init_repo(tmp_path / "repo")
    base = demo_baseline()
    versions: list[dict[str, Any] | None] = [with_misses(base, i % 9) for i in range(1, 31)]
    blobs = [json.dumps(v).encode() for v in versions]
    blobs[11] = b"{not json"  # refresh 12: unreadable, a labelled gap
    versions[11] = None
    fast_import(repo, blobs)
    monkeypatch.chdir(repo)
    monkeypatch.delenv("GITHUB_REPOSITORY", raising=False)
    subprocess.run(["git", "remote", "add", "origin", "git@github.com:acme/rag.git"], check=True)
    assert main(["dashboard", "--out", "site"]) == 0
    printed = capsys.readouterr().out
    assert "31 entries (1 skipped, drawn as gaps)" in printed
    page = repo / "site" / "index.html"
    assert not re.search(r"""(src|href)=["']?(https?:)?//""", page.read_text())  # no CDN

    dom, log = open_page(page, tmp_path / "profile")
    assert console_errors(log) == []
    charts = re.findall(r"<svg [^>]*class=\"chart\"[^>]*>.*?</svg>", dom, re.S)
    everything = [base, *(v for v in versions if v is not None)]
    expected_charts = {
        (metric, key)
        for data in everything
        for key, row in data["aggregates"].items()
        for metric in row
        if metric != "n"
    }
    assert len(charts) == len(expected_charts)
    for chart in charts:
        metric = re.search(r'data-metric="([^"]+)"', chart)
        slice_ = re.search(r'data-slice="([^"]+)"', chart)
        assert metric and slice_
        expected = sum(
            1
            for data in everything
            if isinstance(v := data["aggregates"].get(slice_[1], {}).get(metric[1]), float)
            and math.isfinite(v)
        )
        assert len(re.findall(r"<circle ", chart)) == expected, (metric[1], slice_[1])
    assert 'href="https://github.com/acme/rag/commit/' in dom
    assert "not json" not in dom and "invalid JSON" in dom  # the gap's reason is listed


def test_the_page_shows_the_latest_change_the_calibration_and_the_experiment() -> None:
    from llm_eval.against_baseline import RankChange
    from llm_eval.dashboard import Change, Dashboard, Series
    from llm_eval.formats.commands.dashboard import render_dashboard
    from llm_eval.history import Point

    entries = (
        Point("a" * 40, "2026-01-01T00:00:00+00:00", "one", "baseline", None, {}),
        Point("b" * 40, "2026-01-02T00:00:00+00:00", "two", "baseline", None, {}),
    )
    board = Dashboard(
        entries,
        (Series("recall@5", "overall", (0.5, 0.4)),),
        Change("a" * 40, "b" * 40, 5, (RankChange("q-7", 2, 0),), (RankChange("q-9", 0, 4),)),
        judge={"model": "judge-1", "calibration": {"chunks": 40, "kappa": 0.61}},
        experiment={
            "quality": "recall@5",
            "recommendation": "Keep bm25.",
            "variants": [
                {
                    "name": "dense",
                    "values": {"recall@5": 0.45},
                    "versus_reference": {"recall@5": {"delta": -0.05}},
                    "pareto_front": False,
                }
            ],
        },
        questions={"q-7": "How do I <sort>?"},
    )
    page = render_dashboard(board)
    assert "From aaaaaaa to bbbbbbb: 1 question lost its relevant result" in page
    assert (
        "<td><code>q-7</code></td><td>How do I &lt;sort&gt;?</td><td>2 → not retrieved</td>" in page
    )
    assert "<td>not retrieved → 4</td>" in page
    assert "<tr><th>kappa</th><td>0.610</td></tr>" in page
    assert "<tr><td>dense</td><td>0.450</td><td>-0.050</td><td></td></tr>" in page
    assert "Keep bm25." in page
