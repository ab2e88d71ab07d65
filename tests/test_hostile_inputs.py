"""The hostile-input corpus: every malformed input the tool reads, through its command line.

`tests/hostile/manifest.toml` lists the cases. Each copies the small valid project in
`tests/hostile/base/` to a temporary folder, replaces one file (by a committed case
file, by one made by `tests/hostile/make_inputs.py`, or by a folder, a symlink loop,
nothing), runs `llm-eval COMMAND` there, and must end with the expected exit code and
exactly one line on stderr that contains the expected fragment (the file, line and
key), and never a traceback.

Most cases call `llm_eval.cli.main` in this process, as `scripts/fuzz_inputs.py` does:
the same error handler, without an interpreter's start-up per case. A sample runs as
`python -m llm_eval.cli` in a fresh interpreter, so that the real entry point stays
covered: the first case of each kind, and the cases that set `PYTHONIOENCODING` (an
interpreter reads it only when it starts).
"""

from __future__ import annotations

import io
import json
import os
import shlex
import shutil
import subprocess
import sys
import tomllib
import warnings
from collections.abc import Iterator
from contextlib import ExitStack, contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any
from urllib.parse import quote

import pytest
from conftest import no_hang, script
from fake_github import FakeGitHub
from fake_github import serve as serve_github
from servers import Received, Reply
from servers import serve as serve_http

from llm_eval.cli import main

stub_openai = script("stub_openai")
HOSTILE = Path(__file__).parent / "hostile"
CASES: list[dict[str, Any]] = tomllib.loads((HOSTILE / "manifest.toml").read_text("utf-8"))["case"]
sys.path.insert(0, str(HOSTILE))
from make_inputs import ENDPOINT_ANSWERS, ENDPOINT_KEY, GENERATORS  # noqa: E402

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

MCP_CONFIG = """gold:
  - {{path: gold.jsonl, tier: A}}
retriever:
  kind: mcp
  {server}
  arguments: {{query: "${{query}}", limit: "${{top_k}}"}}
  results_path: hits
  fields: {{doc_id: id}}
  timeout_s: 20
metrics: [recall@5, mrr]
baseline: baseline.json
"""
MCP_SERVER = Path(__file__).parent / "mcp_search_server.py"

ENDPOINT = "{{base_url: {url}, model: m, api_key: '${{HOSTILE_API_KEY}}', retries: 0{extra}}}"
OPENAI_CONFIGS = {
    "openai-embedding": """gold:
  - {{path: gold.jsonl, tier: A}}
corpus: corpus.jsonl
retriever: {{kind: embedding, {settings}}}
metrics: [recall@5, mrr]
baseline: baseline.json
output: out
""",
    "openai-judge": """gold:
  - {{path: gold.jsonl, tier: A}}
corpus: corpus.jsonl
retriever: {{kind: bm25}}
judge: {endpoint}
metrics: [recall@5, context_precision@2]
baseline: baseline.json
output: out
""",
}
"""The configs of the cases against the fake OpenAI-compatible endpoint."""


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
    openai_url: str
    github: dict[str, str]
    """Mode (`ok`, `html`, `redirect`, `moved`) → the fake GitHub's base URL."""


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
        "gold review answers",
        "init target",
        "MCP server messages",
        "fusion component answers",
        "experiment variants",
        "model endpoint answers",
    }
    assert len({case["name"] for case in CASES}) == len(CASES)


def _through_the_entry_point(cases: list[dict[str, Any]]) -> set[str]:
    """The cases run in a fresh interpreter: the first of each kind, and those that set
    `PYTHONIOENCODING`."""
    first_of_kind = {case["kind"]: case["name"] for case in reversed(cases)}
    encoding = {case["name"] for case in cases if "PYTHONIOENCODING" in case.get("env", {})}
    return set(first_of_kind.values()) | encoding


IN_A_SUBPROCESS = _through_the_entry_point(CASES)


@pytest.fixture(scope="module")
def services() -> Iterator[Services]:
    with _services() as running:
        yield running


@pytest.mark.parametrize("case", CASES, ids=[case["name"] for case in CASES])
def test_hostile_input(
    case: dict[str, Any],
    services: Services,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    if case.get("needs") == "non_root" and os.geteuid() == 0:
        pytest.skip("file permissions do not bind root")
    project = _prepare(case, tmp_path / "project", services)
    env = _environment(case, project, services)
    if case["name"] in IN_A_SUBPROCESS:
        outcome = _run_subprocess(case, project, env)
    else:
        outcome = _run_in_process(case, project, env, monkeypatch, capsys)
    assert "Traceback" not in outcome.out + outcome.err
    assert outcome.code == case["exit"], outcome.err
    for name in case.get("unchanged", []):
        assert (project / name).read_bytes() == (HOSTILE / "base" / name).read_bytes(), name
    assert [name for name in case.get("absent", []) if (project / name).exists()] == []
    if case.get("stream") == "stdout":
        assert outcome.err == ""
        assert case["message"] in outcome.out
        if case.get("secret"):
            _assert_the_key_is_nowhere(project, outcome)
        return
    assert outcome.err.endswith("\n") and outcome.err.count("\n") == 1, outcome.err
    assert case["message"] in outcome.err
    assert case.get("also", "") in outcome.err
    if case.get("secret"):
        _assert_the_key_is_nowhere(project, outcome)


def _assert_the_key_is_nowhere(project: Path, outcome: Outcome) -> None:
    """Not the key, nor its JSON- or URL-escaped forms, in the output or any file."""
    forms = {ENDPOINT_KEY, json.dumps(ENDPOINT_KEY)[1:-1], quote(ENDPOINT_KEY, safe="")}
    files = [p.read_bytes().decode("utf-8", "replace") for p in project.rglob("*") if p.is_file()]
    for form in forms:
        assert form not in outcome.out + outcome.err
        assert not [text for text in files if form in text]


def test_the_sample_through_the_entry_point_has_every_kind() -> None:
    kinds = {case["kind"] for case in CASES if case["name"] in IN_A_SUBPROCESS}
    assert kinds == {case["kind"] for case in CASES}
    assert len(IN_A_SUBPROCESS) < len(CASES) / 4


def _prepare(case: dict[str, Any], project: Path, services: Services) -> Path:
    """The base project with the case's input in place; the search server primed."""
    shutil.copytree(HOSTILE / "base", project)
    for folder in case.get("mkdir", []):
        (project / folder).mkdir()
    for folder in case.get("readonly", []):
        (project / folder).chmod(0o555)
    served = b""
    for target, source in case.get("replace", {}).items():
        content = _replace(project / target, source)
        served = content if target == "response" else served
    url = f"{services.http_url}/{case['name']}"
    if "endpoint" in case:
        ENDPOINT_CASES[case["name"]] = case["endpoint"]
    RESPONSES[case["name"]] = Reply(
        raw=served, headers={"Content-Type": case.get("content_type", "application/json")}
    )
    config = project / "config" / "llm-eval.yaml"
    if case.get("config") == "http":
        config.write_text(HTTP_CONFIG.format(url=url))
    elif case.get("config") == "mcp-http":
        config.write_text(MCP_CONFIG.format(server=f"url: {url}"))
    elif case.get("config") in OPENAI_CONFIGS:
        base = f"{services.openai_url}/{case['name']}"
        extra = "".join(f", {k}: {v}" for k, v in case.get("settings", {}).items())
        endpoint = ENDPOINT.format(url=base, extra=extra)
        config.write_text(
            OPENAI_CONFIGS[case["config"]].format(settings=endpoint[1:-1], endpoint=endpoint)
        )
    elif case.get("config") == "mcp-stdio":
        command = [sys.executable, str(MCP_SERVER), "stdio", *case.get("server_args", [])]
        config.write_text(MCP_CONFIG.format(server=f"command: {json.dumps(command)}"))
    return project


def _stdin(case: dict[str, Any]) -> bytes:
    """What the case types: the bytes of its `stdin` file, or nothing."""
    return (HOSTILE / case["stdin"]).read_bytes() if "stdin" in case else b""


def _run_subprocess(case: dict[str, Any], project: Path, env: dict[str, str]) -> Outcome:
    done = subprocess.run(
        [sys.executable, "-m", "llm_eval.cli", *shlex.split(case["command"])],
        cwd=project,
        env=env,
        input=_stdin(case),
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


HIDDEN_BY_DEFAULT = (DeprecationWarning, PendingDeprecationWarning, ImportWarning, ResourceWarning)
"""The warnings Python's default filters do not show."""


def _run_in_process(
    case: dict[str, Any],
    project: Path,
    env: dict[str, str],
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> Outcome:
    """`main()` with the case's environment and folder. A warning is written to stderr
    as a fresh interpreter would write it, so the one-line rule still holds it."""
    for name in os.environ.keys() - env.keys():
        monkeypatch.delenv(name)
    for name, value in env.items():
        monkeypatch.setenv(name, value)
    monkeypatch.chdir(project)
    # Read as a pipe is read where the locale does not say how to decode bad bytes.
    typed = io.TextIOWrapper(io.BytesIO(_stdin(case)), encoding="utf-8")
    monkeypatch.setattr(sys, "stdin", typed)
    capsys.readouterr()
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("default")
        try:
            with no_hang():  # a special file opened (a FIFO) would wait forever
                code = main(shlex.split(case["command"]))
        except SystemExit as exc:  # read as the interpreter reads it
            code = exc.code if isinstance(exc.code, int) else int(exc.code is not None)
    out, err = capsys.readouterr()
    shown = [w for w in caught if not issubclass(w.category, HIDDEN_BY_DEFAULT)]
    err += "".join(
        warnings.formatwarning(w.message, w.category, w.filename, w.lineno) for w in shown
    )
    return Outcome(code, out, err)


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
        elif name == "fifo":  # opened for reading, it would wait for a writer forever
            os.mkfifo(target)
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
    return env | {"HOSTILE_API_KEY": ENDPOINT_KEY} | case.get("env", {})


RESPONSES: dict[str, Reply] = {}
"""Case name → what the search server answers that case's requests with."""


ENDPOINT_CASES: dict[str, str] = {}
"""Case name → the `ENDPOINT_ANSWERS` rewrite the fake OpenAI endpoint applies for it."""


def _endpoint_answer(path: str, answer: dict[str, Any]) -> bytes:
    """The fake endpoint's answer for the case its path names (`/v1/<case>/...`)."""
    return ENDPOINT_ANSWERS[ENDPOINT_CASES[path.split("/")[2]]](path, answer)


def _answer(request: Received) -> Reply:
    return RESPONSES[request.path.strip("/")]


@contextmanager
def _services() -> Iterator[Services]:
    """The HTTP search server and four fake GitHubs: sound, HTML pages, redirecting with
    302 and with 301 (which PyGithub refuses in different ways)."""
    with ExitStack() as stack:
        http = stack.enter_context(serve_http(_answer))
        openai = stack.enter_context(
            stub_openai.serve(stub_openai.StubOpenAI(rewrite=_endpoint_answer))
        )
        bases: dict[str, str] = {}
        for mode in ("ok", "html", "redirect", "moved"):
            state = FakeGitHub(users={TOKEN: "llm-eval-bot"})
            state.add_pull(7, "ab" * 20)
            state.html = mode == "html"
            state.redirect = bases["ok"] if mode in ("redirect", "moved") else ""
            state.redirect_status = 301 if mode == "moved" else 302
            bases[mode] = stack.enter_context(serve_github(state)).base_url
        yield Services(http.url.removesuffix("/search"), openai.url, bases)
