"""Drift against a pinned reference, on a scripted repository: six changes that each
drop recall@10 by 2 points (a fifth of the queries lose one of their ten relevant
documents), every one allowed by a 3-point regression limit and followed by a
baseline refresh. An 11-point `drift_max` since the first baseline passes the first
five (10 points down in sum) and fails the sixth (12 points)."""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
from pathlib import Path
from typing import Any

import pytest
from conftest import Cli, script

from llm_eval.actions import links_from_env
from llm_eval.commands.baseline import refresh
from llm_eval.commands.gate import run_gate
from llm_eval.criteria_io import load_criteria
from llm_eval.errors import InputError
from llm_eval.formats._markup import Links
from llm_eval.formats.markdown import render_comment
from llm_eval.history.series import sparkline

drift = script("drift_repository")
CRITERIA = drift.CRITERIA
write_run = drift.write_run


def git(repo: Path, *args: str) -> str:
    done = subprocess.run(
        ["git", "-C", str(repo), "-c", "user.name=t", "-c", "user.email=t@x", *args],
        capture_output=True,
        text=True,
        check=True,
    )
    return done.stdout


@pytest.fixture
def scripted(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """The repository at its reference: the first baseline committed and tagged."""
    repo = tmp_path / "repo"
    drift.write_project(repo)
    monkeypatch.chdir(repo)
    git(repo, "init", "-q", "-b", "main")
    refresh_and_commit(repo, "reference baseline")
    git(repo, "tag", "reference")
    return repo


def refresh_and_commit(repo: Path, message: str) -> None:
    refresh(
        config_path=Path("config/llm-eval.yaml"), criteria_path=Path("config/ship-criteria.yaml")
    )
    git(repo, "add", "-A")
    git(repo, "commit", "-qm", message)


def gate() -> dict[str, Any]:
    outcome = run_gate(
        config_path=Path("config/llm-eval.yaml"),
        criteria_path=Path("config/ship-criteria.yaml"),
    )
    return dict(outcome.report["gates"][0]) | {"exit_code": outcome.exit_code}


def test_each_step_is_allowed_and_the_sum_is_caught(scripted: Path) -> None:
    seen = []
    for step in range(1, 7):
        write_run(scripted, step)
        result = gate()
        assert result["decision"] == "pass", result  # each step within regression_max
        assert result["delta"] == pytest.approx(-0.02)
        drift = result["drift"]
        assert drift["delta"] == pytest.approx(-0.02 * step)
        assert drift["commit"] == git(scripted, "rev-parse", "reference").strip()
        seen.append((drift["decision"], result["status"], result["exit_code"]))
        if step < 6:
            refresh_and_commit(scripted, f"change {step}")
    assert seen == [("pass", "pass", 0)] * 5 + [("fail", "fail", 1)]
    assert result["reason"] == "drift" and result["blocking"]
    assert drift["stats"]["ci_high"] < -0.11  # the whole interval beyond the limit
    assert drift["sentence"] == (  # quoted in docs/how-to/history-and-drift.md
        "recall@10 (tier A) since reference dropped from 100.0% to 88.0% (−12.0 pp; 90% CI "
        "−12.8 to −11.0 pp): more than the 11.0 pp drift allowed"
    )


def test_every_surface_renders_the_drift_from_the_record(
    scripted: Path, cli: Cli, monkeypatch: pytest.MonkeyPatch
) -> None:
    # as in the action's steps: its repository and ref name the documentation's pages
    monkeypatch.delenv("LLM_EVAL_DOCS_URL", raising=False)
    monkeypatch.setenv("GITHUB_ACTION_REPOSITORY", "acme/llm-eval")
    monkeypatch.setenv("GITHUB_ACTION_REF", "v1")
    for step in range(1, 6):
        write_run(scripted, step)
        refresh_and_commit(scripted, f"change {step}")
    write_run(scripted, 6)
    code, terminal, _ = cli("gate")
    assert code == 1
    written = scripted / ".llm-eval" / "report.json"
    if os.environ.get("LLM_EVAL_UPDATE_GOLDEN") == "1":  # the fixture of comment_drift.md
        shutil.copyfile(written, Path(__file__).parent.parent / "gold" / "reports" / "drift.json")
    report = json.loads(written.read_text())
    sentence = report["gates"][0]["drift"]["sentence"]
    assert report["gates"][0]["sentence"] == sentence
    assert report["summary"] == [sentence]
    assert sentence in " ".join(terminal.split())
    comment = (scripted / ".llm-eval" / "report.md").read_text()
    # the metric's name, the first time it is printed, links to its definition
    docs = "https://github.com/acme/llm-eval/blob/v1/docs/reference/metrics.md"
    read = re.sub(rf'\[([^\]]+)\]\({re.escape(docs)} "[^"]*"\)', r"\1", comment)
    assert f"{sentence}." in read
    assert read != comment
    assert "set the gate's since to a newer reference in the ship criteria" in comment
    assert "Δ ≥ −3.0 pp, since reference Δ ≥ −11.0 pp" in comment
    junit = (scripted / ".llm-eval" / "report.junit.xml").read_text()
    assert "since reference dropped from 100.0% to 88.0%" in junit


def test_the_comment_shows_the_trend_of_the_committed_baselines(scripted: Path) -> None:
    for step in range(1, 6):
        write_run(scripted, step)
        refresh_and_commit(scripted, f"change {step}")
    write_run(scripted, 6)
    report = run_gate(
        config_path=Path("config/llm-eval.yaml"),
        criteria_path=Path("config/ship-criteria.yaml"),
    ).report
    trend = report["trend"]
    assert trend is not None
    values = [p["value"] for p in trend["points"]]
    assert values == pytest.approx([1.0, 0.98, 0.96, 0.94, 0.92, 0.90])
    assert [p["commit"] for p in trend["points"]] == git(
        scripted, "log", "--reverse", "--format=%H"
    ).split()
    assert trend["value"] == pytest.approx(0.88) and not trend["shallow"]
    line = (
        "Trend of recall@10 (tier A) over the last 6 committed baselines and this run: "
        f"{sparkline([*values, 0.88], 0.03)} 100.0% → 88.0% (scale ▁ 88.0% to █ 100.0%)"
    )
    assert sparkline([*values, 0.88], 0.03) == "█▇▆▅▃▂▁"
    lines = render_comment(report).splitlines()
    assert lines[lines.index(next(x for x in lines if x.startswith("❌"))) + 2] == line
    linked = render_comment(report, Links(dashboard="https://owner.github.io/repo/"))
    assert f"{line} · [dashboard](https://owner.github.io/repo/)" in linked
    assert links_from_env({"LLM_EVAL_DASHBOARD_URL": "https://d.example/"}).dashboard == (
        "https://d.example/"
    )


def test_since_a_number_of_refreshes(scripted: Path) -> None:
    for step in range(1, 6):
        write_run(scripted, step)
        refresh_and_commit(scripted, f"change {step}")
    write_run(scripted, 6)
    criteria = scripted / "config" / "ship-criteria.yaml"
    criteria.write_text(CRITERIA.format(since=5))  # the committed baseline is the 5th
    result = gate()
    assert result["drift"]["commit"] == git(scripted, "rev-parse", "reference").strip()
    assert result["drift"]["label"] == "since 5 refreshes ago"
    assert result["status"] == "fail"
    criteria.write_text(CRITERIA.format(since=1))  # one refresh before the committed one
    result = gate()
    assert result["drift"]["delta"] == pytest.approx(-0.04)
    assert result["status"] == "pass"


def test_a_reference_the_clone_cannot_see_is_named(scripted: Path, tmp_path: Path) -> None:
    criteria = scripted / "config" / "ship-criteria.yaml"
    criteria.write_text(CRITERIA.format(since=3))
    with pytest.raises(InputError) as caught:
        gate()
    assert caught.value.render() == (
        "config/ship-criteria.yaml:8: gates[0].since: gold/baseline.json: the baseline 3 "
        "refreshes back is not in the git history: 1 commits of it are"
    )
    criteria.write_text(CRITERIA.format(since="v9"))
    with pytest.raises(InputError) as caught:
        gate()
    assert caught.value.render().endswith(
        "gates[0].since: gold/baseline.json: git cannot find 'v9'"
    )


@pytest.mark.parametrize(
    ("gate_text", "error"),
    [
        (
            "    drift_max: 0.1\n",
            "4: gates[0].drift_max: drift_max needs `since:` (a git ref, a tag, or a number of "
            "refreshes)",
        ),
        (
            "    since: v1\n",
            "4: gates[0].since: since: is the reference of `drift_max`; set both or neither",
        ),
        (
            "    drift_max: 0.1\n    since: 0\n",
            "5: gates[0].since: expected a git ref or tag, or a number of refreshes >= 1, got 0",
        ),
        (
            "    drift_max: 0.1\n    since: --all\n",
            "5: gates[0].since: expected a git ref or tag, got '--all'",
        ),
        (
            "    drift_max: 1.5\n    since: v1\n",
            "4: gates[0].drift_max: must be a number between 0 and 1, got 1.5",
        ),
    ],
)
def test_drift_settings_are_checked(tmp_path: Path, gate_text: str, error: str) -> None:
    path = tmp_path / "criteria.yaml"
    path.write_text("gates:\n  - name: retrieval_recall_at_5\n    threshold: 0.5\n" + gate_text)
    with pytest.raises(InputError) as caught:
        load_criteria(path)
    assert caught.value.render() == f"{path}:{error}"
