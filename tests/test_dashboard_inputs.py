"""The dashboard's inputs and its page against hostile content: an experiment file of
the wrong shape is one line and exit 3 through the real command line; text from the
inputs (commits, tags, questions, gate and metric names) can neither stop the page's
script nor hide in it, checked in headless Chromium where it is installed."""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
from conftest import REPO
from test_dashboard import GATES, OPEN_ALL, _gates, console_errors, open_page, with_script

from llm_eval.formats._markup import visible
from llm_eval.history.dashboard import Dashboard, build_series
from llm_eval.history.dashboard_view import render_dashboard
from llm_eval.history.series import Point

needs_chromium = pytest.mark.skipif(
    shutil.which("chromium") is None,
    reason="Debian's chromium is not installed (.ci/run installs it)",
)
HOSTILE = ["<!--<script>", "</script>", "<!--", "a\u2028b\u2029c", "x&amp;<b>"]
"""Values that, raw in a script block or its JSON, end it, open a comment in it, or
break a line of JavaScript."""
HIDDEN = re.compile("[\x00-\x09\x0b-\x1f\x7f\u202a-\u202e\u2066-\u2069\u200e\u200f\u061c]")
"""Characters a reader cannot see: none may reach the page raw (a newline may, between
its parts)."""
GIT = ["git", "-c", "user.name=t", "-c", "user.email=t@x"]


@pytest.fixture(scope="module")
def project(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The hostile corpus's small valid project, as one commit of a new repository."""
    root = tmp_path_factory.mktemp("dashboard-inputs") / "project"
    shutil.copytree(REPO / "tests" / "hostile" / "base", root)
    for args in (["init", "-q", "-b", "main"], ["add", "-A"], ["commit", "-qm", "base"]):
        subprocess.run([*GIT, *args], cwd=root, check=True)
    return root


def run_cli(root: Path, *args: str) -> subprocess.CompletedProcess[str]:
    """`llm-eval ARGS` in a fresh interpreter, in `root`, outside GitHub Actions."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("GITHUB_")}
    return subprocess.run(
        [sys.executable, "-m", "llm_eval.cli", *args],
        cwd=root,
        env={**env, "GITHUB_REPOSITORY": "acme/rag"},
        capture_output=True,
        text=True,
        timeout=300,
    )


VARIANT = {"name": "dense", "values": {"mrr": 0.5}, "versus_reference": {}, "pareto_front": True}


def experiment(**changed: Any) -> str:
    """An experiment.json the dashboard reads, with `changed` keys replaced."""
    document = {"quality": "mrr", "recommendation": "Keep bm25.", "variants": [VARIANT]}
    return json.dumps({**document, **changed})


def variant(**changed: Any) -> str:
    return experiment(variants=[{**VARIANT, **changed}])


WRONG_SHAPES = [
    ("[1,2]", "(top level): expected an object, got an array"),
    ('{"variants": 5}', "quality: missing required key"),
    ('{"quality": "mrr", "variants": [5, "x", null]}', "recommendation: missing required key"),
    ("null", "(top level): expected an object, got null"),
    ('"experiment"', "(top level): expected an object, got a string"),
    ("5", "(top level): expected an object, got a number"),
    ("", "empty file, expected JSON"),
    ("{", "invalid JSON"),
    ("[" * 300 + "]" * 300, "JSON nested deeper than"),
    ('{"quality": 1, "quality": 2}', "quality: duplicate key"),
    (experiment(variants=5), "variants: expected a list, got a number"),
    (experiment(variants={"a": 1}), "variants: expected a list, got an object"),
    (experiment(variants=[5, "x", None]), "variants[0]: expected an object, got a number"),
    (experiment(variants=[VARIANT, None]), "variants[1]: expected an object, got null"),
    (experiment(quality=5), "quality: expected a string, got a number"),
    (experiment(quality=None), "quality: expected a string, got null"),
    (experiment(recommendation=["a"]), "recommendation: expected a string, got an array"),
    (experiment(variants=[{"values": {}}]), "variants[0].name: missing required key"),
    (variant(name=None), "variants[0].name: expected a string, got null"),
    (variant(name={"x": 1}), "variants[0].name: expected a string, got an object"),
    (variant(values=[0.5]), "variants[0].values: expected an object, got an array"),
    (variant(values={"mrr": "x"}), 'variants[0].values.mrr: expected a finite number, got "x"'),
    (variant(values={"mrr": True}), "variants[0].values.mrr: expected a finite number, got true"),
    (variant(values={"mrr": [1]}), "variants[0].values.mrr: expected a finite number, got [1]"),
    (
        '{"quality": "mrr", "recommendation": "r", "variants": [{"name": "a", "values": '
        '{"mrr": NaN}, "versus_reference": {}, "pareto_front": false}]}',
        "variants[0].values.mrr: expected a finite number, got NaN",
    ),
    (variant(values={"mrr": 10**400}), "expected a finite number, got an integer of 401 digits"),
    (variant(versus_reference=[]), "variants[0].versus_reference: expected an object, got an"),
    (variant(versus_reference={"mrr": 5}), "versus_reference.mrr: expected an object, got a n"),
    (variant(versus_reference={"mrr": {"delta": "-"}}), 'delta: expected a finite number, got "-"'),
    (variant(pareto_front="yes"), 'variants[0].pareto_front: expected true or false, got "yes"'),
    (variant(pareto_front=None), "variants[0].pareto_front: expected true or false, got null"),
]


@pytest.mark.parametrize(
    ("text", "message"), WRONG_SHAPES, ids=[f"shape-{i}" for i in range(len(WRONG_SHAPES))]
)
def test_an_experiment_file_of_the_wrong_shape_is_one_line_and_exit_3(
    project: Path, tmp_path: Path, text: str, message: str
) -> None:
    path = tmp_path / "exp.json"
    path.write_text(text, "utf-8")
    done = run_cli(project, "dashboard", "--experiment", str(path), "--out", str(tmp_path / "s"))
    assert done.returncode == 3, done.stderr
    assert "Traceback" not in done.stderr
    assert len(done.stderr.splitlines()) == 1, done.stderr
    assert done.stderr.startswith(f"llm-eval: error: {path}:")  # then the line, or the key
    assert message in done.stderr
    assert not (tmp_path / "s").exists()


@pytest.mark.parametrize("given", ["missing.json", "a folder"])
def test_an_experiment_file_named_but_not_there_is_an_error(
    project: Path, tmp_path: Path, given: str
) -> None:
    """The default experiment.json is shown when it exists; one named must exist."""
    path = tmp_path / given
    if given == "a folder":
        path.mkdir()
    done = run_cli(project, "dashboard", "--experiment", str(path), "--out", str(tmp_path / "s"))
    assert done.returncode == 3 and len(done.stderr.splitlines()) == 1, done.stderr
    assert done.stderr.startswith(f"llm-eval: error: {path}: ")


def test_the_experiment_file_the_experiment_command_writes_is_shown(
    project: Path, tmp_path: Path
) -> None:
    config = "config/llm-eval.yaml"
    written = run_cli(project, "experiment", config, config, "--out", str(tmp_path / "e"))
    assert written.returncode == 0, written.stderr
    document = json.loads((tmp_path / "e" / "experiment.json").read_text())
    done = run_cli(
        project,
        "dashboard",
        "--experiment",
        str(tmp_path / "e" / "experiment.json"),
        "--out",
        str(tmp_path / "s"),
    )
    assert done.returncode == 0, done.stderr
    page = (tmp_path / "s" / "index.html").read_text()
    for row in document["variants"]:
        assert f"<tr><td>{row['name']}</td>" in page


JUDGE_PART = {
    "corrected": [],
    "uncorrected": [],
    "model": "m",
    "calibration": None,
    "calls": 3,
    "cached": 0,
    "failed": 0,
    "prompt_tokens": 30,
    "completion_tokens": 3,
    "cost": 0.0,
    "unscored_count": 0,
    "repeats": 1,
    "spread": {},
    "flips_count": 0,
}
"""A judge part with every key the renderings read, as a judged gate writes it."""


def kept_report(commit: str, **judge: Any) -> str:
    report = json.loads((REPO / "tests/gold/reports/pass.json").read_text())
    report["provenance"]["head_commit"] = commit
    if judge:
        report["judge"] = {**JUDGE_PART, **judge}
    return json.dumps(report)


@pytest.mark.parametrize(
    ("judge", "reason"),
    [
        ({"model": "m", "calibration": [1, 2]}, "judge.calibration: expected an object"),
        ({"model": "m", "calibration": {"chunks": "x"}}, "judge.calibration.agreement: missing"),
        ({"model": 5, "calibration": None}, "judge.model: expected a string, got a number"),
        ({"calls": "3"}, "judge.calls: expected"),
        ({"spread": {"context_precision@5": None}}, "judge.spread.context_precision@5: expected"),
        ({"cost": None}, "judge.cost: expected"),
    ],
)
def test_a_kept_report_whose_judge_part_has_the_wrong_shape_is_a_gap(
    project: Path, tmp_path: Path, judge: dict[str, Any], reason: str
) -> None:
    """The judge table reads the newest kept report's `judge`: one of another shape is
    listed as a gap with its reason, as any report that does not fit the schema."""
    kept = tmp_path / "history.jsonl"
    kept.write_text(kept_report("f" * 40, **judge) + "\n", "utf-8")
    out = tmp_path / "s"
    done = run_cli(project, "dashboard", "--history-file", str(kept), "--out", str(out))
    assert done.returncode == 0 and done.stderr == "", done.stderr
    page = (out / "index.html").read_text()
    assert "1 skipped, drawn as gaps" in done.stdout
    assert reason in page
    assert "No kept report has judged metrics" in page


def hostile_board(tmp_path: Path, values: list[str]) -> Dashboard:
    """Points whose commits and subjects are `values`, on a tag, a question and a gate
    name holding bidirectional and control characters."""
    tag = "tag:rtl\u202eevil\u2066\x1b[31m"
    rows = [
        {"overall": {"recall@5": 0.5 + 0.02 * i, "mrr": 0.4, "n": 100}, tag: {"recall@5": 0.3}}
        for i in range(len(values))
    ]
    entries = tuple(
        Point(commit, f"2026-01-{1 + i:02}T00:00:00+00:00", commit, "baseline", None, {}, row)
        for i, (commit, row) in enumerate(zip(values, rows, strict=True))
    )
    gates = _gates(tmp_path, GATES.replace("g_recall", "g_\u202erecall"))
    from llm_eval.against_baseline import RankChange
    from llm_eval.history.dashboard import Change

    change = Change(values[-2], values[-1], 5, (RankChange("q\u200f1", 2, 0),), ())
    return Dashboard(
        entries,
        build_series(entries, gates),
        change,
        judge={"model": "judge\u202e", "calibration": {"kappa\u2067": 0.5}},
        experiment={"quality": "mrr", "recommendation": "</script><!--", "variants": []},
        commit_url="https://github.com/acme/rag/commit/",
        questions={"q\u200f1": "sort\u202e</script><!--<script>\u2028?"},
    )


def test_no_content_reaches_the_script_block_raw(tmp_path: Path) -> None:
    page = render_dashboard(hostile_board(tmp_path, HOSTILE))
    block = re.search(r'<script type="application/json" id="points">(.*?)</script>', page, re.S)
    assert block
    assert not re.search("[<>&\u2028\u2029]", block[1])
    data = json.loads(block[1])
    assert [c[0] for c in data["commits"]] == [visible(v[:12]) for v in HOSTILE]
    assert "<!--" not in page  # nor anywhere else in the page
    assert page.count("<script") == page.count("</script>") == 2  # the data, the script


def test_no_hidden_character_reaches_the_page(tmp_path: Path) -> None:
    """Bidirectional and control characters are shown as the PR comment shows them:
    escapes a reader sees, wherever text from the inputs is written."""
    page = render_dashboard(hostile_board(tmp_path, HOSTILE))
    assert HIDDEN.findall(page) == []
    assert "\u2028" not in page and "\u2029" not in page
    assert "tag rtl\\u202eevil\\u2066\\x1b[31m" in page  # the tag's row and chart
    assert "g_\\u202erecall" in page  # the gate's name
    assert "sort\\u202e&lt;/script&gt;&lt;!--&lt;script&gt; ?" in page  # the question
    assert "<code>q\\u200f1</code>" in page
    assert "Judge judge\\u202e" in page and "kappa\\u2067" in page


@needs_chromium
@pytest.mark.parametrize("commit", [*HOSTILE, "rtl\u202ex"])
def test_markers_and_links_are_drawn_whatever_the_commit_says(tmp_path: Path, commit: str) -> None:
    board = hostile_board(tmp_path, [f"{'a' * 40}", commit, "b" * 40, commit])
    page = tmp_path / "index.html"
    page.write_text(render_dashboard(board), "utf-8")
    dom, log = open_page(with_script(page, OPEN_ALL), tmp_path / "profile")
    assert console_errors(log) == []
    assert every_marker_is_drawn_and_linked(dom) > 0


def every_marker_is_drawn_and_linked(dom: str) -> int:
    """The markers drawn: in every chart one per known value (`data-expected`, counted
    by the page's Python), each a link to its commit; their number."""
    charts = re.findall(r'<svg [^>]*class="chart"[^>]*>.*?</svg>', dom, re.S)
    assert charts
    for chart in charts:
        expected = int(re.search(r'data-expected="(\d+)"', chart)[1])  # type: ignore[index]
        links = r'<a href="https://github\.com/acme/rag/commit/[^"]*"><circle '
        assert len(re.findall(r"<circle ", chart)) == expected
        assert len(re.findall(links, chart)) == expected
    drawn = sum(len(re.findall(r"<circle ", chart)) for chart in charts)
    assert f'data-points="{drawn}"' in dom
    return drawn


@needs_chromium
def test_a_kept_report_with_a_hostile_commit_leaves_the_page_whole(
    project: Path, tmp_path: Path
) -> None:
    """The case found: `--record` kept a report whose commit is `<!--<script>`."""
    kept = tmp_path / "history.jsonl"
    kept.write_text(kept_report("<!--<script>") + "\n", "utf-8")
    out = tmp_path / "s"
    done = run_cli(project, "dashboard", "--history-file", str(kept), "--out", str(out))
    assert done.returncode == 0 and done.stderr == "", done.stderr
    page = out / "index.html"
    assert "<!--<script>" not in page.read_text()
    dom, log = open_page(with_script(page, OPEN_ALL), tmp_path / "profile")
    assert console_errors(log) == []
    assert every_marker_is_drawn_and_linked(dom) > 0


def test_the_default_experiment_is_shown_unless_left_out(project: Path, tmp_path: Path) -> None:
    """The experiment.json `llm-eval experiment` wrote into the output folder is shown
    without being named; --no-experiment leaves it out; naming one and leaving it out
    together is a usage error."""
    project = shutil.copytree(project, tmp_path / "own", symlinks=True)  # its output changes
    config = "config/llm-eval.yaml"
    written = run_cli(project, "experiment", config, config)
    assert written.returncode == 0, written.stderr
    shown = run_cli(project, "dashboard", "--out", str(tmp_path / "shown"))
    left = run_cli(project, "dashboard", "--no-experiment", "--out", str(tmp_path / "left"))
    assert shown.returncode == left.returncode == 0, shown.stderr + left.stderr
    names = json.loads((project / "out/experiment/experiment.json").read_text())
    row = f"<tr><td>{names['variants'][0]['name']}</td>"
    assert row in (tmp_path / "shown" / "index.html").read_text()
    assert row not in (tmp_path / "left" / "index.html").read_text()
    both = run_cli(project, "dashboard", "--no-experiment", "--experiment", "x.json")
    assert both.returncode == 2 and "cannot be given together" in both.stderr
