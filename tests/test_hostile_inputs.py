"""The hostile-input corpus: every malformed input the tool reads, through the real CLI.

`tests/hostile/manifest.toml` lists the cases. Each copies the small valid project in
`tests/hostile/base/` to a temporary folder, replaces one file (by a committed case
file, by one made by `tests/hostile/make_inputs.py`, or by a folder, a symlink loop,
nothing), runs `python -m llm_eval.cli COMMAND` there, and must end with the expected
exit code and exactly one line on stderr that contains the expected fragment (the
file, line and key), and never a traceback. The cases run two at a time, once per
session; each test then checks one outcome.
"""

from __future__ import annotations

import os
import shlex
import shutil
import subprocess
import sys
import tomllib
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from contextlib import ExitStack, contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
from fake_github import FakeGitHub
from fake_github import serve as serve_github
from servers import Received, Reply
from servers import serve as serve_http

HOSTILE = Path(__file__).parent / "hostile"
CASES: list[dict[str, Any]] = tomllib.loads((HOSTILE / "manifest.toml").read_text("utf-8"))["case"]
sys.path.insert(0, str(HOSTILE))
from make_inputs import GENERATORS  # noqa: E402

TOKEN = "ghp_hostile-corpus-token-0123456789"
HTTP_CONFIG = """gold:
  - {{path: gold.jsonl, tier: A}}
retriever:
  kind: http
  url: {url}
  retries: 0
  timeout_s: 5
metrics: [recall@5, mrr]
baseline: baseline.json
"""


@dataclass(frozen=True)
class Outcome:
    """How one case's command ended."""

    code: int
    out: str
    err: str


@dataclass(frozen=True)
class Services:
    """The local servers the HTTP and GitHub cases talk to."""

    http_url: str
    github: dict[str, str]
    """Mode (`ok`, `html`, `redirect`) → the fake GitHub's base URL."""


def test_the_corpus_is_large_and_covers_every_file_kind() -> None:
    kinds = {case["kind"] for case in CASES}
    assert len(CASES) >= 60
    assert kinds == {
        "gold JSONL",
        "run JSONL",
        "TREC run",
        "TREC qrels",
        "BEIR qrels",
        "corpus JSONL",
        "versions sidecar",
        "llm-eval.yaml",
        "ship-criteria.yaml",
        "baseline.json",
        "report.json",
        "HTTP retriever response",
        "GitHub API response",
        "environment and output",
    }
    assert len({case["name"] for case in CASES}) == len(CASES)


@pytest.fixture(scope="module")
def outcomes(tmp_path_factory: pytest.TempPathFactory) -> Iterator[dict[str, Outcome]]:
    """Every case's outcome, run two at a time (the cases are independent)."""
    with _services() as services, ThreadPoolExecutor(max_workers=2) as pool:
        root = tmp_path_factory.mktemp("hostile")
        runs = {
            case["name"]: pool.submit(_run_case, case, root / case["name"], services)
            for case in CASES
        }
        yield {name: run.result() for name, run in runs.items()}


@pytest.mark.parametrize("case", CASES, ids=[case["name"] for case in CASES])
def test_hostile_input(case: dict[str, Any], outcomes: dict[str, Outcome]) -> None:
    if case.get("needs") == "non_root" and os.geteuid() == 0:
        pytest.skip("file permissions do not bind root")
    outcome = outcomes[case["name"]]
    assert "Traceback" not in outcome.out + outcome.err
    assert outcome.code == case["exit"], outcome.err
    if case.get("stream") == "stdout":
        assert outcome.err == ""
        assert case["message"] in outcome.out
        return
    assert outcome.err.endswith("\n") and outcome.err.count("\n") == 1, outcome.err
    assert case["message"] in outcome.err
    assert case.get("also", "") in outcome.err


def _run_case(case: dict[str, Any], project: Path, services: Services) -> Outcome:
    shutil.copytree(HOSTILE / "base", project)
    for folder in case.get("mkdir", []):
        (project / folder).mkdir()
    served = b""
    for target, source in case.get("replace", {}).items():
        content = _replace(project / target, source)
        served = content if target == "response" else served
    env = _environment(case, project, services)
    if case.get("config") == "http":
        RESPONSES[case["name"]] = served
        url = f"{services.http_url}/{case['name']}"
        (project / "config" / "llm-eval.yaml").write_text(HTTP_CONFIG.format(url=url))
    done = subprocess.run(
        [sys.executable, "-m", "llm_eval.cli", *shlex.split(case["command"])],
        cwd=project,
        env=env,
        capture_output=True,
        check=False,
        timeout=120,
    )
    # Decoded leniently: the stream cases check the bytes are what their encoding allows.
    decode = env.get("PYTHONIOENCODING", "utf-8")
    return Outcome(
        done.returncode,
        done.stdout.decode(decode, "replace"),
        done.stderr.decode(decode, "replace"),
    )


def _replace(target: Path, source: str) -> bytes:
    """Put the case's input at `target`; returns the content written (b"" for specials)."""
    if target.is_dir():
        shutil.rmtree(target)
    else:
        target.unlink(missing_ok=True)
    kind, _, name = source.partition(":")
    if kind == "special":
        if name == "directory":
            target.mkdir()
            (target / "inside.jsonl").write_text("{}\n")
        elif name == "symlink_loop":
            target.symlink_to(target.name)
        elif name == "unreadable":
            target.write_text("{}\n")
            target.chmod(0)
        return b""
    content = GENERATORS[name]() if kind == "generate" else (HOSTILE / source).read_bytes()
    target.write_bytes(content)
    return content


def _environment(case: dict[str, Any], project: Path, services: Services) -> dict[str, str]:
    """This interpreter's environment without CI's variables, plus the case's."""
    env = {k: v for k, v in os.environ.items() if not k.startswith(("GITHUB_", "PYTHONIO"))}
    mode = case.get("github")
    if mode is not None:
        event = project / "event.json"
        if not event.exists():
            event.write_text('{"pull_request": {"number": 7}}')
        env |= {
            "GITHUB_API_URL": services.github[mode],
            "GITHUB_REPOSITORY": "octo/demo",
            "GITHUB_TOKEN": TOKEN,
            "GITHUB_EVENT_PATH": str(event),
        }
    return env | case.get("env", {})


RESPONSES: dict[str, bytes] = {}
"""Case name → the body the search server answers that case's requests with."""


def _answer(request: Received) -> Reply:
    return Reply(raw=RESPONSES[request.path.strip("/")])


@contextmanager
def _services() -> Iterator[Services]:
    """The HTTP search server and three fake GitHubs: sound, HTML pages, redirecting."""
    with ExitStack() as stack:
        http = stack.enter_context(serve_http(_answer))
        bases: dict[str, str] = {}
        for mode in ("ok", "html", "redirect"):
            state = FakeGitHub(users={TOKEN: "llm-eval-bot"})
            state.add_pull(7, "ab" * 20)
            state.html = mode == "html"
            state.redirect = bases["ok"] if mode == "redirect" else ""
            bases[mode] = stack.enter_context(serve_github(state)).base_url
        yield Services(http.url.removesuffix("/search"), bases)
