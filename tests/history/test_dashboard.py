"""`llm-eval dashboard` on a generated git history, opened in headless Chromium: every
chart drew one marker per point of its series (counted in the DOM after the page's
script ran, against numbers computed here from the generated baselines), the console
stayed free of errors, and at 1280 × 800 the gated charts, their limits and the latest
change are in the first viewport. Without Chromium: the metrics' order, no empty chart,
the numbers in the HTML, contrast and labels, and change points."""

from __future__ import annotations

import html
import itertools
import json
import math
import re
import shutil
import subprocess
from pathlib import Path
from typing import Any

import pytest
from conftest import Cli, script
from test_history import (
    demo_baseline,
    fast_import,
    init_repo,
    recall_a,
    with_builds,
    with_misses,
)

CHROMIUM = shutil.which("chromium")
needs_chromium = pytest.mark.skipif(
    CHROMIUM is None, reason="Debian's chromium is not installed (.ci/run installs it)"
)
# The benchmark's flags (headless, no sandbox, no background networking: this machine's
# network is closed), with Chromium's console on stderr for the no-error check.
FLAGS = [*script("bench_dashboard").FLAGS, "--enable-logging=stderr", "--v=0"]


def open_page(page: Path, profile: Path, *extra: str) -> tuple[str, str]:
    """The DOM after the page's scripts ran, and Chromium's log (console messages)."""
    assert CHROMIUM is not None
    done = subprocess.run(
        [CHROMIUM, *FLAGS, *extra, f"--user-data-dir={profile}", "--dump-dom", page.as_uri()],
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


def with_script(page: Path, script: str) -> Path:
    """A copy of `page` that runs `script` after the page's own."""
    copy = page.with_name(f"{page.stem}-probed.html")
    copy.write_text(page.read_text().replace("</body>", f"<script>{script}</script></body>"))
    return copy


OPEN_ALL = (
    "document.querySelectorAll('details').forEach(function (d) { d.open = true; });"
    "document.querySelectorAll('svg.chart').forEach(window.llmEvalDraw);"
)


@pytest.fixture
def history_page(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, cli: Cli
) -> tuple[Path, list[dict[str, Any]]]:
    """The dashboard of 30 refreshes (one unreadable), and the baselines it read."""
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
    code, printed, _ = cli("dashboard", "--out", "site")
    assert code == 0
    assert "31 entries (1 skipped, drawn as gaps)" in printed
    return repo / "site" / "index.html", [base, *(v for v in versions if v is not None)]


@needs_chromium
def test_every_chart_draws_its_points(
    tmp_path: Path, history_page: tuple[Path, list[dict[str, Any]]]
) -> None:
    page, everything = history_page
    text = page.read_text()
    assert not re.search(r"""src=["']?(https?:)?//""", text)  # no CDN
    assert "<link" not in text

    dom, log = open_page(page, tmp_path / "profile")
    assert console_errors(log) == []
    closed = re.findall(r"<details><summary>chart</summary>(<svg .*?</svg>)", dom, re.S)
    assert closed and not any("<circle " in c for c in closed)  # drawn when opened

    dom, log = open_page(with_script(page, OPEN_ALL), tmp_path / "profile")
    assert console_errors(log) == []
    charts = re.findall(r"<svg [^>]*class=\"chart\"[^>]*>.*?</svg>", dom, re.S)
    expected_charts = {
        (metric, key)
        for data in everything
        for key, row in data["aggregates"].items()
        for metric, v in row.items()
        if metric != "n" and isinstance(v, float) and math.isfinite(v)
    }
    drawn = {
        (m[1], s[1])
        for chart in charts
        if (m := re.search(r'data-metric="([^"]+)"', chart))
        and (s := re.search(r'data-slice="([^"]+)"', chart))
    }
    assert drawn == expected_charts  # a chart for every series with a point, no other
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
    # One build a point: no whisker, no word of builds, not even their style rules.
    assert 'class="builds' not in text and "builds-note" not in text and "builds:" not in text


# Bounding boxes at 1280 × 800, written into the DOM for --dump-dom to carry out.
BOXES = """
function box(e) { var r = e.getBoundingClientRect();
  return {left: r.left, right: r.right, top: r.top, bottom: r.bottom}; }
var found = {
  charts: [].map.call(document.querySelectorAll('#now svg.chart'), box),
  lines: [].map.call(document.querySelectorAll('#now .lim line'), box),
  labels: [].map.call(document.querySelectorAll('#now .lim text'), box),
  latest: [].map.call(document.querySelectorAll('#now .latest'), box),
  plot: [].map.call(document.querySelectorAll('#now svg.chart .line'), box),
  viewport: {width: innerWidth, height: innerHeight}
};
var out = document.createElement('pre'); out.id = 'boxes';
out.textContent = JSON.stringify(found); document.body.appendChild(out);
"""


@pytest.fixture
def thousand_points_page(tmp_path: Path) -> Path:
    """The benchmark's page: 1,000 history entries, 20 tags, two gates."""
    bench = script("bench_dashboard")
    page = tmp_path / "thousand" / "index.html"
    page.parent.mkdir()
    page.write_text(bench.render_dashboard(bench.synthetic(1000, 20)), "utf-8")
    return page


@needs_chromium
@pytest.mark.parametrize("which", ["demo history", "1,000 points × 20 tags"])
def test_the_first_screen_holds_the_gates_their_limits_and_the_latest_change(
    tmp_path: Path, request: pytest.FixtureRequest, which: str
) -> None:
    if which == "demo history":
        page = request.getfixturevalue("history_page")[0]
    else:
        page = request.getfixturevalue("thousand_points_page")
    dom, _ = open_page(with_script(page, BOXES), tmp_path / "profile", "--window-size=1280,800")
    found = json.loads(html.unescape(re.search(r'<pre id="boxes">(.*?)</pre>', dom, re.S)[1]))
    # Headless Chromium's window takes its frame off the height (innerHeight < 800):
    # the boxes are measured from the page's top, against the 1280 × 800 screen.
    assert found["viewport"]["width"] == 1280
    assert len(found["charts"]) == 2  # the demo's two gates
    assert len(found["lines"]) >= 4 and len(found["labels"]) == len(found["lines"])
    assert len(found["latest"]) == 1
    for kind in ("charts", "lines", "labels", "latest"):
        for b in found[kind]:
            assert b["bottom"] <= 800 and b["right"] <= 1280, (kind, b)
    for line, label in zip(found["lines"], found["labels"], strict=True):
        assert label["left"] >= line["right"]  # in the margin, never across a line
    for plot in found["plot"]:
        assert all(
            label["left"] >= plot["right"]
            for label in found["labels"]
            if label["top"] < plot["bottom"]
            and label["bottom"] > plot["top"]
            and label["left"] < plot["right"] + 200
            and label["right"] > plot["left"]
        )
    labels = sorted(found["labels"], key=lambda b: (b["left"], b["top"]))
    for a, b in itertools.pairwise(labels):
        if abs(a["left"] - b["left"]) < 1:
            assert b["top"] >= a["bottom"] - 0.5  # stacked labels do not overlap


def test_the_page_shows_the_latest_change_the_calibration_and_the_experiment() -> None:
    from llm_eval.against_baseline import RankChange
    from llm_eval.history.dashboard import Change, Dashboard, Series
    from llm_eval.history.dashboard_view import render_dashboard
    from llm_eval.history.series import Point

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


def _point(i: int, aggregates: dict[str, dict[str, float | None]], **kw: Any) -> Any:
    from llm_eval.history.series import Point

    return Point(
        f"{i:040x}",
        f"2026-01-{1 + i:02}T00:00:00+00:00",
        f"c{i}",
        "baseline",
        None,
        {},
        aggregates,
        **kw,
    )


def _gates(tmp_path: Path, text: str) -> Any:
    from llm_eval.criteria_io import load_criteria

    path = tmp_path / "criteria.yaml"
    path.write_text(text)
    return load_criteria(path).gates


GATES = """
gates:
  - name: g_recall
    metric: recall@5
    threshold: 0.38
    regression_max: 0.03
    drift_max: 0.05
    since: 2
    severity: error
"""


def _board(tmp_path: Path, rows: list[dict[str, dict[str, float | None]]]) -> Any:
    from llm_eval.history.dashboard import Dashboard, build_series

    entries = tuple(_point(i, r) for i, r in enumerate(rows))
    gates = _gates(tmp_path, GATES)
    return Dashboard(entries, build_series(entries, gates), commit_url="https://h/o/r/commit/")


def test_metrics_come_in_the_designs_order_overall_then_tiers_then_tags(tmp_path: Path) -> None:
    from llm_eval.history.dashboard_view import render_dashboard

    metrics = ("recall@10", "recall@5", "ndcg@10", "mrr", "recall@1", "map", "recall@20")
    row: dict[str, float | None] = dict.fromkeys(metrics, 0.5)
    rows = [{"tag:x": row, "overall": {**row, "n": 100}, "tier:A": row}] * 3
    page = render_dashboard(_board(tmp_path, rows))
    table = page[page.index('id="t-overall"') : page.index('id="t-tiers"')]
    order = re.findall(r'data-metric="([^"]+)"', table)
    assert order == ["recall@1", "recall@5", "recall@10", "mrr", "ndcg@10", "map", "recall@20"]
    sections = [page.index(f'id="{name}"') for name in ("now", "metrics", "tiers", "tags")]
    assert sections == sorted(sections)


def test_no_chart_is_drawn_without_a_point_and_a_word_says_why(tmp_path: Path) -> None:
    from llm_eval.history.dashboard_view import render_dashboard

    rows = [{"overall": {"recall@5": 0.5, "mrr": None}, "tag:x": {"recall@5": None}}] * 2
    page = render_dashboard(_board(tmp_path, rows))
    assert 'data-metric="mrr"' not in page and 'data-slice="tag:x"' not in page
    assert "no data yet: no point has MRR on all queries" in page
    assert "no data yet: no point has recall@5 on tag x" in page
    assert "no data yet: recall@1, recall@10, MRR, nDCG@10" in page  # the design's set


def test_the_first_screen_reads_without_scripts(tmp_path: Path) -> None:
    """The first screen's numbers are in the HTML: the newest value, the floor, the
    regression and drift limits, the interval, the commits and their link."""
    from llm_eval.history.dashboard_view import render_dashboard

    values = [0.60, 0.58, 0.57, 0.52]
    rows = [{"overall": {"recall@5": v, "n": 400}} for v in values]
    page = render_dashboard(_board(tmp_path, rows))
    first = page[page.index('<section id="now"') : page.index("</section>")]
    assert "<script" not in first
    text = re.sub(r"<[^>]+>", " ", first)
    for words in (
        "recall@5, all queries: 52.0%",
        "floor 38.0%",
        "next limit 49.0%",
        "drift limit 53.0%",
        "57.0%",
        "−5.0 pp (beyond its interval)",
    ):
        assert words in text, words
    assert "past its drift limit 53.0%" in text  # the answer, in words
    assert re.search(r"47\.\d%–56\.\d%", text)  # the newest point's interval
    assert f'href="https://h/o/r/commit/{3:040x}"' in first


def test_a_bad_merge_is_a_change_point_and_a_slow_drift_is_not(tmp_path: Path) -> None:
    from llm_eval.history.dashboard import build_series, change_points
    from llm_eval.history.dashboard_view import render_dashboard

    drift = [0.70 - 0.01 * i for i in range(10)]  # 9 points lost, a point at a time
    merge = [0.70] * 5 + [0.60] * 5  # 10 points lost at once
    for values, moves in ((drift, ()), (merge, (5,))):
        rows = [{"overall": {"recall@5": v, "n": 400}} for v in values]
        board = _board(tmp_path, rows)
        assert board.series[0].moves == moves
        page = render_dashboard(board)
        assert len(re.findall(r'class="cp down" data-i=', page)) == 2 * len(moves)  # gate + table
    # A kept report's interval takes the place of the proportion's.
    entries = tuple(
        _point(i, {"overall": {"recall@5": v}}, intervals={"g_recall": (v - 0.005, v + 0.005)})
        for i, v in enumerate(drift)
    )
    series = build_series(entries, _gates(tmp_path, GATES))[0]
    assert series.moves == tuple(range(1, 10))  # every step is beyond so narrow an interval
    assert change_points([0.5, None, 0.4], [None, None, (0.45, 0.55)]) == ()
    assert change_points([0.5, None, 0.4], [None, None, (0.35, 0.45)]) == (2,)


# The accessibility check: contrast of every text colour in the stylesheet, and a name
# for every picture and control.

TEXT_FILLS = (".t", ".yl", ".ll", ".xl")
"""The SVG classes that are text (their `fill` is a text colour)."""


def _luminance(colour: str) -> float:
    digits = colour.lstrip("#")
    if len(digits) == 3:
        digits = "".join(c * 2 for c in digits)
    channels = [int(digits[i : i + 2], 16) / 255 for i in (0, 2, 4)]
    r, g, b = (c / 12.92 if c <= 0.04045 else ((c + 0.055) / 1.055) ** 2.4 for c in channels)
    return 0.2126 * r + 0.7152 * g + 0.0722 * b


def contrast(a: str, b: str) -> float:
    """WCAG 2 contrast ratio of two #rgb/#rrggbb colours."""
    high, low = sorted((_luminance(a), _luminance(b)), reverse=True)
    return (high + 0.05) / (low + 0.05)


def low_contrast(css: str, page_background: str = "#fff") -> list[str]:
    """Every rule whose text colour has less than 4.5:1 against its background."""
    found = []
    for selectors, body in re.findall(r"([^{}]+)\{([^{}]*)\}", css):
        declared = dict(re.findall(r"([\w-]+)\s*:\s*([^;]+)", body))
        background = declared.get("background", page_background).strip().split()[0]
        colours = []
        if "color" in declared:
            colours.append(declared["color"].strip())
        if "fill" in declared and any(s.strip().endswith(TEXT_FILLS) for s in selectors.split(",")):
            colours.append(declared["fill"].strip())
        for colour in colours:
            if not background.startswith("#"):
                background = page_background
            if contrast(colour, background) < 4.5:
                found.append(f"{selectors.strip()}: {colour} on {background}")
    return found


def unnamed(page: str) -> list[str]:
    """Pictures without a title or label, and controls without a label."""
    found = []
    for tag in re.findall(r"<svg\b[^>]*>(?:\s*<title>)?", page):
        if "aria-hidden" not in tag and "aria-label=" not in tag and not tag.endswith("<title>"):
            found.append(tag)
    for tag in re.findall(r"<(?:input|select|textarea)\b[^>]*>", page):
        named = re.search(r'id="([^"]+)"', tag)
        if "aria-label=" not in tag and not (named and f'for="{named[1]}"' in page):
            found.append(tag)
    for button in re.findall(r"<button\b[^>]*>(.*?)</button>", page, re.S):
        if not button.strip():
            found.append(button)
    return found


def test_the_accessibility_check_sees_a_faint_text_and_an_unnamed_picture() -> None:
    assert low_contrast("svg .yl { fill: #999; } .x { color: #777; }") == [
        "svg .yl: #999 on #fff",
        ".x: #777 on #fff",
    ]
    assert low_contrast("svg .line { fill: #eee; } .x { color: #59636e; }") == []
    assert round(contrast("#000", "#fff"), 1) == 21.0
    assert unnamed('<svg width="3"><path/></svg><input id="q">') == [
        '<svg width="3">',
        '<input id="q">',
    ]
    assert (
        unnamed('<svg role="img"><title>t</title></svg><label for="q">Q</label><input id="q">')
        == []
    )


def test_the_page_has_readable_text_and_names_every_picture(tmp_path: Path) -> None:
    from llm_eval.history.dashboard_view import _asset, render_dashboard

    assert low_contrast(_asset("dashboard.css")) == []
    assert low_contrast(_asset("dashboard-builds.css")) == []
    rows = [
        {"overall": {"recall@5": 0.5 + 0.01 * i, "n": 100}, "tag:x": {"mrr": 0.4}} for i in range(5)
    ]
    page = render_dashboard(_board(tmp_path, rows))
    assert page.count("<svg") > 5 and unnamed(page) == []


def test_a_kept_reports_interval_is_its_gated_values_band(tmp_path: Path) -> None:
    """report.json keeps the paired interval of each gate's change: the point's band is
    the baseline plus it; a report that bounds no change (no stats) gives none."""
    from conftest import REPO

    from llm_eval.history.series_io import report_points

    report = json.loads((REPO / "tests/gold/reports/pass.json").read_text())
    report["provenance"]["head_commit"] = "f" * 40
    bare = json.loads(json.dumps(report))
    for gate in bare["gates"]:
        gate["stats"] = None
    kept = tmp_path / "history.jsonl"
    kept.write_text(json.dumps(report) + "\n" + json.dumps(bare) + "\n")
    wanted = {"retrieval_recall_at_5": ("recall@5", "tier=A"), "retrieval_mrr": ("mrr", "all")}
    first, second = report_points(kept, wanted)
    gate = next(g for g in report["gates"] if g["name"] == "retrieval_mrr")
    low, high = first.intervals["retrieval_mrr"]
    assert low == pytest.approx(gate["baseline"] + gate["stats"]["ci_low"])
    assert high == pytest.approx(gate["baseline"] + gate["stats"]["ci_high"])
    assert set(first.intervals) == set(wanted)
    assert second.intervals == {}
    assert first.aggregates["overall"]["n"] == report["slices"][0]["n"]


@needs_chromium
def test_the_first_screen_shows_its_numbers_with_scripts_off(
    tmp_path: Path, history_page: tuple[Path, list[dict[str, Any]]]
) -> None:
    """Chromium dumps no DOM with scripts disabled: the page loses its scripts instead."""
    page, _ = history_page
    bare = page.with_name("bare.html")
    bare.write_text(re.sub(r"<script\b.*?</script>", "", page.read_text(), flags=re.S))
    dom, _ = open_page(bare, tmp_path / "profile")
    assert "data-ready-ms" not in dom and "<script" not in dom  # no script ran
    first = dom[dom.index('<section id="now"') : dom.index("</section>")]
    text = re.sub(r"<[^>]+>", " ", first)
    assert re.search(r"recall@5, tier A: \d+\.\d%", text)
    assert re.search(r"floor 38\.0%", text) and re.search(r"next limit \d+\.\d%", text)
    assert "Latest change" in text and re.search(r"\d+\.\d%–\d+\.\d%", text)
    assert "<circle" not in first and '<path class="line"' in first  # lines without markers


def test_a_drift_limit_since_a_tag_is_drawn_from_the_tagged_baseline(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, cli: Cli
) -> None:
    """The scripted drift (tests/history/test_drift.py): five refreshes of 2 points each since
    the tagged reference at 100%; `drift_max` 0.11 draws its limit at 89.0%."""
    from llm_eval.commands.baseline import refresh

    drift = script("drift_repository")
    repo = tmp_path / "repo"
    drift.write_project(repo)
    monkeypatch.chdir(repo)
    monkeypatch.delenv("GITHUB_REPOSITORY", raising=False)

    def commit(message: str) -> None:
        refresh(
            config_path=Path("config/llm-eval.yaml"),
            criteria_path=Path("config/ship-criteria.yaml"),
        )
        for args in (["add", "-A"], ["commit", "-qm", message]):
            subprocess.run(["git", "-c", "user.name=t", "-c", "user.email=t@x", *args], check=True)

    subprocess.run(["git", "init", "-q", "-b", "main"], check=True)
    commit("reference baseline")
    subprocess.run(["git", "tag", "reference"], check=True)
    for step in range(1, 6):
        drift.write_run(repo, step)
        commit(f"change {step}")
    assert cli("dashboard", "--out", "site")[0] == 0
    page = (repo / "site" / "index.html").read_text()
    first = page[page.index('<section id="now"') : page.index("</section>")]
    assert '<line class="drift"' in first and "drift limit 89.0%" in first
    assert "recall@10, tier A: 90.0%" in first
    assert "(1.0 pp above its drift limit)" in first
    assert ">105.0%<" not in page  # a share's axis ends at 100%


SORT = """
var table = document.getElementById('t-overall');
function order() { return [].map.call(table.tBodies[0].rows, function (r) {
  return r.dataset.change; }); }
var before = order();
table.querySelector('button.sort').click();
var sorted = order();
table.querySelector('button.sort').click();
var out = document.createElement('pre'); out.id = 'sorted';
out.textContent = JSON.stringify({before: before, sorted: sorted, back: order()});
document.body.appendChild(out);
"""


@needs_chromium
def test_the_change_button_sorts_a_table_worst_first_and_back(tmp_path: Path) -> None:
    from llm_eval.history.dashboard_view import render_dashboard

    steps = {"recall@1": 0.02, "recall@5": -0.04, "recall@10": 0.0, "mrr": -0.01}
    rows = [
        {"overall": {m: 0.5 + (step if i else 0.0) for m, step in steps.items()}} for i in range(2)
    ]
    page = tmp_path / "index.html"
    page.write_text(render_dashboard(_board(tmp_path, rows)))
    dom, log = open_page(with_script(page, SORT), tmp_path / "profile")
    assert console_errors(log) == []
    found = json.loads(html.unescape(re.search(r'<pre id="sorted">(.*?)</pre>', dom, re.S)[1]))
    changes = [[round(float(c), 3) for c in found[k]] for k in ("before", "sorted", "back")]
    assert changes[0] == [0.02, -0.04, 0.0, -0.01]  # the design's order
    assert changes[1] == [-0.04, -0.01, 0.0, 0.02]  # worst first
    assert changes[2] == changes[0]


@pytest.mark.parametrize(
    ("skipped", "runs"),
    [
        ((), []),
        ((3,), [(3, 3)]),
        ((0, 1, 2, 5, 7, 8), [(0, 2), (5, 5), (7, 8)]),
        (tuple(range(1, 9)), [(1, 8)]),
    ],
)
def test_gaps_are_drawn_as_runs(skipped: tuple[int, ...], runs: list[tuple[int, int]]) -> None:
    """One band a run of skipped entries: 100,000 unreadable lines in a row are one
    element on each chart, not 100,000 (a page of 16 MB where 2 MB is promised)."""
    from llm_eval.history.dashboard import gap_runs
    from llm_eval.history.series import Skipped

    entries = [
        Skipped(None, None, f"history.jsonl:{i + 1}", "not JSON")
        if i in skipped
        else _point(i, {"overall": {"recall@5": 0.8}})
        for i in range(10)
    ]
    assert gap_runs(entries) == runs


# Points measured on several builds of the retriever


def _builds_board(tmp_path: Path, spreads: dict[int, Any]) -> Any:
    """Three points of recall@5 (gate g_recall), 50.0%, 49.0%, 48.2%, with the builds'
    ranges of `spreads` by position."""
    from llm_eval.history.dashboard import Dashboard, build_series

    values = (0.50, 0.49, 0.482)
    entries = tuple(
        _point(i, {"overall": {"recall@5": v, "n": 400}}, builds=spreads.get(i, {}))
        for i, v in enumerate(values)
    )
    return Dashboard(entries, build_series(entries, _gates(tmp_path, GATES)))


def words(page: str) -> str:
    """The page's text, without its style and script blocks."""
    body = re.sub(r"<(style|script)\b.*?</\1>", " ", page, flags=re.S)
    return " ".join(re.sub(r"<[^>]+>", " ", body).split())


WHISKER = re.compile(r'<path class="builds" d="M([\d.]+) ([\d.]+)V([\d.]+)[^"]*"><title>([^<]*)<')


def test_a_point_on_several_builds_shows_its_range_as_a_whisker_and_in_words(
    tmp_path: Path,
) -> None:
    from llm_eval.history.dashboard_svg import FULL, PAD
    from llm_eval.history.dashboard_view import render_dashboard
    from llm_eval.history.series import BuildRange

    spreads = {
        1: {"g_recall": BuildRange(3, 0.47, 0.50)},
        2: {"g_recall": BuildRange(3, 0.473, 0.511)},
    }
    board = _builds_board(tmp_path, spreads)
    assert board.series[0].builds == (None, BuildRange(3, 0.47, 0.50), BuildRange(3, 0.473, 0.511))
    page = render_dashboard(board)
    text = words(page)
    # The latest change (before, after) and the table's newest value, in words.
    assert "49.0% (3 builds: 47.0–50.0%) 48.2% (3 builds: 47.3–51.1%)" in text
    row = page[page.index('id="s-overall-recall-5"') :]
    assert "<td class=num>48.2% (3 builds: 47.3–51.1%)</td>" in row[: row.index("</tr>")]
    # A whisker at each point of several builds, on the first screen's chart and on the
    # table's, each with its range in its title; the first point has none.
    whiskers = WHISKER.findall(page)
    assert [w[3] for w in whiskers] == 2 * [
        "2026-01-02 0000000: 49.0% (3 builds: 47.0–50.0%)",
        "2026-01-03 0000000: 48.2% (3 builds: 47.3–51.1%)",
    ]
    assert page.count('class="builds"') == len(whiskers) + 1  # and the legend's key
    assert "lowest to highest build" in text
    assert "a rebuild alone, with nothing else changed, moves the value that much" in text
    assert "svg .builds {" in page

    alike = {2: {"g_recall": BuildRange(2, 0.4821, 0.4823)}}
    assert "48.2% (the same in both builds)" in words(
        render_dashboard(_builds_board(tmp_path, alike))
    )
    # A range far past the values widens the axis: the whisker stays in the plot.
    wide = render_dashboard(_builds_board(tmp_path, {2: {"g_recall": BuildRange(4, 0.2, 0.9)}}))
    top, bottom = PAD[2], FULL[1] - PAD[3]
    (_, high, low, _), *_ = WHISKER.findall(wide)
    assert top <= float(high) < float(low) <= bottom

    # Without a point of several builds, the page has none of it.
    plain = render_dashboard(_builds_board(tmp_path, {}))
    assert board.series[0].values == _builds_board(tmp_path, {}).series[0].values
    assert 'class="builds' not in plain and "builds" not in words(plain)
    assert "svg .builds" not in plain


@pytest.fixture
def builds_page(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, cli: Cli) -> tuple[Path, Any]:
    """The dashboard of a git history of ten refreshes, the last five each measured on
    three builds of the retriever, and of a kept report on three builds between the
    eighth and the ninth; with the refreshes' baselines."""
    repo = init_repo(tmp_path / "repo")
    base = demo_baseline()
    versions = [with_misses(base, i) for i in range(1, 6)]
    versions += [with_builds(base, (i, i + 4, i + 1)) for i in range(1, 6)]
    fast_import(repo, [json.dumps(v).encode() for v in versions])
    report = json.loads((Path(__file__).parents[1] / "gold/reports/pass.json").read_text())
    report["provenance"]["head_commit"] = "e" * 40
    report["provenance"]["generated_at"] = "2025-10-17T11:00:00+00:00"  # after refresh 8
    gate = next(g for g in report["gates"] if g["name"] == "retrieval_recall_at_5")
    gate["stats"]["builds"] = {"before": 3, "after": 3, "sd": 0.01, "values": [0.39, 0.42, 0.4]}
    (repo / "history.jsonl").write_text(json.dumps(report) + "\n")
    monkeypatch.chdir(repo)
    monkeypatch.delenv("GITHUB_REPOSITORY", raising=False)
    code, printed, _ = cli("dashboard", "--out", "site", "--history-file", "history.jsonl")
    assert code == 0, printed
    assert "12 entries (0 skipped, drawn as gaps)" in printed
    return repo / "site" / "index.html", versions


def test_a_history_with_builds_draws_their_ranges_and_says_them(
    tmp_path: Path, builds_page: tuple[Path, Any]
) -> None:
    """Real git: each point of several builds (five baselines, one kept report) has its
    whisker on the gate's chart and its range in words; the points of one build (the
    demo's and the first five refreshes) have none. Opened in Chromium, the page draws
    every marker and logs no error."""
    from llm_eval.history.dashboard_svg import builds_span

    page, versions = builds_page
    text = page.read_text()
    first = text[text.index('<section id="now"') : text.index("</section>")]
    gate = re.search(r'<svg [^>]*data-slice="tier:A".*?</svg>', first, re.S)
    assert gate and 'data-metric="recall@5"' in gate[0]
    tips = [w[3] for w in WHISKER.findall(gate[0])]
    assert len(tips) == 6  # the five baselines of three builds and the kept report
    newest = [recall_a(with_misses(demo_baseline(), m)) for m in (5, 9, 6)]
    span = builds_span("recall@5", min(newest), max(newest))
    assert tips[-1].endswith(f"{recall_a(versions[-1]) * 100:.1f}% (3 builds: {span})")
    assert "eeeeeee" in tips[-3] and tips[-3].endswith("(3 builds: 39.0–42.0%)")
    said = words(first)
    assert f"{recall_a(versions[-1]) * 100:.1f}% (3 builds: {span})" in said  # latest change
    assert "a rebuild alone, with nothing else changed, moves the value that much" in said
    assert "0.530 (the same in all 3 builds)" in said  # the builds agree on MRR
    mrr = re.search(r'<svg [^>]*data-metric="mrr" data-slice="overall".*?</svg>', first, re.S)
    assert mrr and len(WHISKER.findall(mrr[0])) == 5  # the report's MRR: one build
    other = text[text.index('id="s-overall-recall-1"') :]
    assert "builds" not in other[: other.index("</tr>")]  # no gate reads it: no range

    if CHROMIUM is None:
        pytest.skip("Debian's chromium is not installed (.ci/run installs it)")
    dom, log = open_page(with_script(page, OPEN_ALL), tmp_path / "profile")
    assert console_errors(log) == []
    charts = re.findall(r"<svg [^>]*class=\"chart\"[^>]*>.*?</svg>", dom, re.S)
    for chart in charts:
        expected = re.search(r'data-expected="(\d+)"', chart)
        assert expected and len(re.findall(r"<circle ", chart)) == int(expected[1])
