"""docs/tutorials/your-repository.md, run as a reader runs it.

Each block marked `<!-- tutorial: step -->` runs in order with bash, in a fresh git
repository, with llm-eval installed from a wheel built from this checkout into an
environment of its own, not the checkout's editable install: what the tutorial uses
(the judge's stub server included) must ship in the package. The environment reuses
the test environment's installed dependencies (a `.pth` line after its own
site-packages), so only the wheel is installed, without its dependencies.
"""

from __future__ import annotations

import contextlib
import os
import re
import shutil
import signal
import socket
import subprocess
import sys
import sysconfig
from collections.abc import Iterator
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parent.parent
TUTORIAL = REPO / "docs" / "tutorials" / "your-repository.md"
STEP = re.compile(r"^<!-- tutorial: step -->\n```sh\n(.*?)^```$", re.MULTILINE | re.DOTALL)

EXPECTED = [
    ("Wrote 11 files and gold/baseline.json in .:", "Report: .llm-eval/report.md"),
    ("gold set OK", "Wrote gold/baseline.json", "Report: .llm-eval/report.md"),
    (
        "rejection_score_threshold: 1.1 separates the top scores of the bm25 retriever best: "
        "of the questions with scored results, it keeps 6 of 6 answerable ones confident and "
        "rejects 1 of 1 rejection question.",
    ),
    ("Wrote gold/baseline.json",),
    ("Corpus: 10 documents in 8 sections and 6 areas.", "Wrote .llm-eval/plan.json"),
    (
        "candidates written to .llm-eval/candidates.jsonl",
        "Every candidate is decided.",
        "into gold/gold-A.jsonl",
    ),
    ("Wrote gold/baseline.json", "Report: .llm-eval/report.md"),
]
"""What each step must print (its output with line breaks made spaces), in order."""


def tutorial_steps() -> list[str]:
    return STEP.findall(TUTORIAL.read_text(encoding="utf-8"))


@pytest.fixture(scope="session")
def installed(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The bin folder of an environment with the wheel of this checkout installed."""
    root = tmp_path_factory.mktemp("installed")
    source = root / "source"
    source.mkdir()
    for name in ("pyproject.toml", "README.md", "LICENSE"):
        shutil.copy(REPO / name, source / name)
    ignored = shutil.ignore_patterns("__pycache__", "*.pyc")
    shutil.copytree(REPO / "llm_eval", source / "llm_eval", ignore=ignored)
    pip = [sys.executable, "-m", "pip", "--disable-pip-version-check", "-q"]
    wheels = root / "wheels"
    subprocess.run([*pip, "wheel", "--no-deps", "-w", wheels, source], check=True)
    environment = root / "env"
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", environment], check=True)
    python = environment / "bin" / "python"
    site = subprocess.run(
        [python, "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])"],
        capture_output=True,
        text=True,
        check=True,
    ).stdout.strip()
    # The test environment's dependencies, after the environment's own packages.
    Path(site, "zz-test-dependencies.pth").write_text(sysconfig.get_paths()["purelib"] + "\n")
    wheel = next(wheels.glob("llm_eval_ci-*.whl"))
    subprocess.run([*pip, "--python", python, "install", "--no-deps", wheel], check=True)
    return environment / "bin"


def _free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


@pytest.fixture
def sessions() -> Iterator[list[int]]:
    """Process groups the steps ran in: any left (a server a failed step did not stop)
    are ended when the test ends."""
    started: list[int] = []
    yield started
    for group in started:
        with contextlib.suppress(ProcessLookupError):
            os.killpg(group, signal.SIGTERM)


def test_the_tutorial_runs_from_an_installed_package(
    installed: Path, tmp_path: Path, sessions: list[int]
) -> None:
    steps = tutorial_steps()
    assert len(steps) == len(EXPECTED), "a step was added or removed: update EXPECTED"
    repository = tmp_path / "repository"
    repository.mkdir()
    subprocess.run(["git", "init", "-q"], cwd=repository, check=True)
    environ = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "VIRTUAL_ENV")}
    environ |= {
        "PATH": f"{installed}{os.pathsep}{environ['PATH']}",
        "JUDGE_PORT": str(_free_port()),
        "COLUMNS": "80",
        "NO_COLOR": "1",
    }
    where = subprocess.run(
        ["python", "-c", "import llm_eval; print(llm_eval.__file__)"],
        cwd=repository,
        env=environ,
        capture_output=True,
        text=True,
        check=True,
    ).stdout
    assert Path(where).is_relative_to(installed.parent), where
    for number, (step, expected) in enumerate(zip(steps, EXPECTED, strict=True), 1):
        process = subprocess.Popen(
            ["bash", "-e", "-c", step],
            cwd=repository,
            env=environ,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
            start_new_session=True,
        )
        sessions.append(process.pid)
        out, err = process.communicate(timeout=600)
        said = " ".join(out.split())
        assert process.returncode == 0, f"step {number} failed:\n{step}\n{out}\n{err}"
        for fragment in expected:
            assert fragment in said, f"step {number}: {fragment!r} not in:\n{out}"


def test_the_threshold_the_tutorial_sets_is_the_one_gold_stats_suggests() -> None:
    steps = tutorial_steps()
    suggested = re.search(r"rejection_score_threshold: (\S+) separates", EXPECTED[2][0])
    assert suggested is not None
    assert f'echo "rejection_score_threshold: {suggested[1]}"' in steps[3]
    page = TUTORIAL.read_text(encoding="utf-8")
    assert f"`rejection_score_threshold: {suggested[1]} separates the top scores" in page
