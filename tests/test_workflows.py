"""The GitHub Actions surfaces: the composite action and the workflows.

actionlint checks the workflows (and, through `uses: ./`, the action's inputs); the
tests here check the security properties on the YAML itself, and run the action's
gate step, a bash script, on the demo.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
from pathlib import Path
from typing import Any

import pytest
from conftest import Cli, copy_demo
from conftest import script as repo_script
from fake_github import FakeGitHub, serve
from workflow_steps import (
    ActionsCache,
    git,
    load,
    run_script,
    run_step,
    runner_environ,
    script,
    steps,
    tool,
)

from llm_eval import DISTRIBUTION
from llm_eval.commands.init import point_workflow

REPO = Path(__file__).resolve().parents[1]
ACTION = REPO / "action.yml"
WORKFLOWS = sorted((REPO / ".github" / "workflows").glob("*.yml"))
FILES = [ACTION, *WORKFLOWS]

PINNED = re.compile(r"^[\w.-]+/[\w./-]+@[0-9a-f]{40} # v\d+(\.\d+)*$")
"""owner/repo[/path]@<40 hex> # vX.Y.Z: a full commit sha, the version as a comment."""


def triggers(workflow: dict[str, Any]) -> dict[str, Any]:
    """The `on:` mapping (YAML 1.1 reads the bare key `on` as True)."""
    on: dict[str, Any] = workflow[True]
    return on


def uses_lines(path: Path) -> list[str]:
    """The text after `uses:` on each line that has one, comment included."""
    found = re.findall(r"^\s*(?:- )?uses: (.+)$", path.read_text(encoding="utf-8"), re.M)
    return [line.strip() for line in found]


def test_the_dashboard_is_published_with_least_privilege() -> None:
    """Pages on pushes to the default branch: the build job may write the repository's
    contents only to keep each push's report on the history branch (its whole history:
    the dashboard is the baseline's git log), and only the deploy job may write Pages
    and ask for the OIDC token Pages deploys with."""
    workflow = load(REPO / ".github" / "workflows" / "dashboard.yml")
    assert triggers(workflow)["push"] == {"branches": ["main"]}
    assert workflow["permissions"] == {"contents": "read"}
    build, deploy = workflow["jobs"]["build"], workflow["jobs"]["deploy"]
    assert build["permissions"] == {"contents": "write"}
    assert build["if"] == "github.ref_name == github.event.repository.default_branch"
    checkout = build["steps"][0]
    assert checkout["with"] == {"fetch-depth": 0, "persist-credentials": False}
    runs = [step.get("run", "") for step in build["steps"]]
    assert any('llm-eval dashboard --out "$RUNNER_TEMP/site"' in run for run in runs)
    assert deploy["permissions"] == {"pages": "write", "id-token": "write"}
    assert deploy["needs"] == "build"
    assert [step["uses"].split("@")[0] for step in deploy["steps"]] == ["actions/deploy-pages"]


def dashboard_step(name: str) -> str:
    return script(load(REPO / ".github" / "workflows" / "dashboard.yml"), name)


def test_each_push_keeps_its_report_on_the_history_branch(
    pushed: Path,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    cli: Cli,
) -> None:
    """The keep and dashboard steps, run by bash as the runner runs them, against a
    bare `origin`: the first push starts the history branch, the second adds a line, and
    `llm-eval history` and the dashboard read both reports as points of the history."""
    origin = tmp_path / "origin.git"
    git(tmp_path, "init", "--quiet", "--bare", str(origin))
    git(pushed, "remote", "add", "origin", str(origin))
    git(pushed, "push", "--quiet", "origin", "HEAD:refs/heads/main")
    shas = []
    for push in (1, 2):
        runner = tmp_path / f"runner-{push}"
        runner.mkdir()
        sha = git(pushed, "rev-parse", "HEAD").strip()
        shas.append(sha)
        for name in ("Keep this push's report", "Write the dashboard"):
            environ = runner_environ(
                RUNNER_TEMP=str(runner), GITHUB_SHA=sha, HISTORY_BRANCH="llm-eval-history"
            )
            done = run_script(dashboard_step(name), pushed, environ)
            assert done.returncode == 0, done.stderr
        assert (runner / "site" / "index.html").is_file()
        git(pushed, "worktree", "prune")
        kept = git(origin, "show", "llm-eval-history:history.jsonl").splitlines()
        assert len(kept) == push
        assert json.loads(kept[-1])["provenance"]["head_commit"] == sha
        assert git(origin, "log", "--format=%s", "-1", "llm-eval-history") == (
            f"Keep the report of {sha}\n"
        )
        git(pushed, "commit", "--quiet", "--allow-empty", "--message", f"change {push}")
    history = tmp_path / "history.jsonl"
    history.write_text(git(origin, "show", "llm-eval-history:history.jsonl"))
    monkeypatch.chdir(pushed)
    code, out, _ = cli("history", "--history-file", history)
    assert code == 0
    table = out.split("subject\n", 1)[1].splitlines()[1:]
    # The first push is the baseline's own commit: one point; the second a kept report.
    assert [row.split()[1] for row in table] == [sha[:7] for sha in shas]
    assert table[-1].endswith("(kept report)")


def test_a_corrupt_report_is_not_kept(
    shared_demo: Path,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    cli: Cli,
) -> None:
    history = tmp_path / "history.jsonl"
    history.write_text('{"kept": "before"}\n')
    report = tmp_path / "report.json"
    report.write_text('{"verdict": "pass"}')
    monkeypatch.chdir(shared_demo)
    code, _, err = cli("history", "--record", report, "--history-file", history)
    assert code == 3
    assert err == f"llm-eval: error: {report}: changes: missing required key\n"
    assert history.read_text() == '{"kept": "before"}\n'
    assert cli("history", "--record", report)[0] == 2  # no file named to keep it in


def test_the_expected_files_are_there() -> None:
    assert [p.name for p in WORKFLOWS] == [
        "baseline-refresh.yml",
        "ci.yml",
        "dashboard.yml",
        "retrieval-gate-comment.yml",
        "retrieval-gate.yml",
    ]


def test_actionlint_passes_on_every_workflow() -> None:
    done = subprocess.run(
        [tool("actionlint"), "-no-color", "-oneline", *map(str, WORKFLOWS)],
        cwd=REPO,
        capture_output=True,
        text=True,
        check=False,
    )
    assert done.returncode == 0, done.stdout + done.stderr


def test_the_action_is_a_composite_with_its_inputs_and_outputs() -> None:
    action = load(ACTION)
    assert set(action["inputs"]) == {
        "config",
        "criteria",
        "baseline",
        "run",
        "judgments",
        "gate-args",
        "comment",
        "python-version",
        "working-directory",
        "id",
        "cache",
    }
    assert all("description" in spec for spec in action["inputs"].values())
    assert set(action["outputs"]) == {"verdict", "report", "exit-code"}
    assert action["runs"]["using"] == "composite"
    for step in steps(action):
        assert ("run" in step) != ("uses" in step), step
        if "run" in step:
            assert step.get("shell") == "bash", step


def test_the_action_installs_llm_eval_from_its_own_checkout() -> None:
    install = next(s for s in steps(load(ACTION)) if s.get("name") == "Install llm-eval")
    assert '"$GITHUB_ACTION_PATH"' in install["run"]


def test_the_action_fails_last_with_the_gates_exit_code() -> None:
    action_steps = list(steps(load(ACTION)))
    names = [step.get("name") for step in action_steps]
    assert names.index("Run the gate") < names.index("Upload the report")
    assert names.index("Upload the report") < names.index("Comment on the pull request")
    assert names[-1] == "Fail when the gate failed"
    assert action_steps[-1]["if"] == "steps.gate.outputs.exit-code != '0'"


# --- the cache under the output folder ------------------------------------------------

CACHED = [
    ACTION,
    REPO / ".github" / "workflows" / "baseline-refresh.yml",
    REPO / ".github" / "workflows" / "dashboard.yml",
]
"""The files that run the retriever themselves (retrieval-gate.yml and ci.yml's gate job
run it through the action)."""


@pytest.mark.parametrize("path", CACHED, ids=lambda p: p.name)
def test_the_cache_is_restored_before_the_retriever_and_saved_after_it_whatever_happened(
    path: Path,
) -> None:
    """The key is the product's; the restore and save never fail the job (the cache
    service may be down); the save runs after a failed gate or refresh too, and not
    when the exact key was restored (a cache cannot be overwritten)."""
    document = load(path)
    names = [step.get("name") for step in steps(document)]
    retrieving = next(n for n in names if n in RETRIEVING)
    order = ["Compute the cache key", "Restore the cache", retrieving, "Save the cache"]
    assert [names.index(name) for name in order] == sorted(names.index(name) for name in order)
    key, restore, save = (
        next(s for s in steps(document) if s.get("name") == name)
        for name in ("Compute the cache key", "Restore the cache", "Save the cache")
    )
    assert re.search(
        r'^\s*llm-eval cache-key( --config "\$LLM_EVAL_CONFIG")? >> "\$GITHUB_OUTPUT" \|\|$',
        key["run"],
        re.M,
    )
    assert restore["if"] == "steps.cache-key.outputs.key != ''"
    assert save["if"] == (
        "always() && steps.cache-key.outputs.key != '' && "
        "steps.restore-cache.outputs.cache-hit != 'true'"
    )
    assert restore["continue-on-error"] is True and save["continue-on-error"] is True
    assert restore["with"] == {
        "path": "${{ steps.cache-key.outputs.path }}",
        "key": "${{ steps.cache-key.outputs.key }}",
        "restore-keys": "${{ steps.cache-key.outputs.restore-key }}",
    }
    assert save["with"] == {
        "path": "${{ steps.cache-key.outputs.path }}",
        "key": "${{ steps.cache-key.outputs.key }}",
    }


RETRIEVING = ("Run the gate", "Recompute the baseline", "Keep this push's report")


def test_the_actions_cache_input_and_a_run_file_skip_the_cache() -> None:
    action = load(ACTION)
    assert action["inputs"]["cache"]["default"] == "true"
    key = next(s for s in steps(action) if s.get("name") == "Compute the cache key")
    assert key["if"] == "inputs.cache != 'false' && inputs.run == ''"


stub = repo_script("stub_openai")

DENSE = """\
gold:
  - path: gold/few.jsonl
    tier: A
corpus: gold/corpus.jsonl
retriever:
  kind: embedding
  base_url: ${EMBEDDINGS_URL}
  model: stub-embed
metrics: [recall@5, mrr]
baseline: gold/dense-baseline.json  # none yet: the floors alone, which the stub fails
"""


def run_action_on_a_fresh_runner(
    repo: Path, runner: Path, cache: ActionsCache, url: str
) -> tuple[dict[str, str], dict[str, str], dict[str, str]]:
    """The action's steps from the cache key to the cache's save, as a new runner runs
    them on a checkout with no output folder: the outputs of the key, restore and gate
    steps. The save step's `if:` is evaluated here as written (the gate step never
    fails the job, so `always()` holds)."""
    shutil.rmtree(repo / ".llm-eval", ignore_errors=True)
    runner.mkdir()
    action = load(ACTION)
    inputs = {name: str(spec.get("default", "")) for name, spec in action["inputs"].items()}
    inputs["config"] = "config/dense.yaml"
    context = {f"inputs.{name}": value for name, value in inputs.items()}
    output = runner / "output"
    environ = runner_environ(RUNNER_TEMP=str(runner), GITHUB_OUTPUT=str(output), EMBEDDINGS_URL=url)
    outputs = []
    for name in ("Compute the cache key", "Restore the cache", "Run the gate"):
        output.write_text("")
        if name == "Restore the cache":
            restored = cache.step(action, name, context)
            context |= {f"steps.restore-cache.outputs.{k}": v for k, v in restored.items()}
            outputs.append(restored)
            continue
        done = run_step(action, name, repo, environ, context)
        assert done.returncode == 0, done.stderr
        outputs.append(dict(line.split("=", 1) for line in output.read_text().splitlines()))
        context |= {f"steps.cache-key.outputs.{k}": v for k, v in outputs[0].items()}
    if outputs[0]["key"] != "" and outputs[1]["cache-hit"] != "true":
        cache.step(action, "Save the cache", context)
    return outputs[0], outputs[1], outputs[2]


def test_the_action_keeps_the_embeddings_between_runs_and_across_a_corpus_change(
    tmp_path: Path,
) -> None:
    """A dense retriever against an embeddings endpoint on 127.0.0.1, gated three times,
    each on a new runner. The first run embeds the corpus and the queries and saves the
    cache, although its gate fails; the second restores it by its key and asks the
    endpoint nothing; after one document changes, the key changes, the restore key
    does not, and the third run starts from the first one's cache: the queries' vectors
    are not asked for again. Another model restores nothing."""
    repo = copy_demo(tmp_path / "repo")
    gold = (repo / "gold" / "python-docs-A.jsonl").read_text(encoding="utf-8").splitlines()[:12]
    (repo / "gold" / "few.jsonl").write_text("\n".join(gold) + "\n", encoding="utf-8")
    (repo / "config" / "dense.yaml").write_text(DENSE, encoding="utf-8")
    queries = {json.loads(line)["query"] for line in gold}
    cache = ActionsCache(tmp_path / "github-cache")
    with stub.serve() as server:
        key, restored, gate = run_action_on_a_fresh_runner(repo, tmp_path / "1", cache, server.url)
        asked = {text for request in server.requests for text in request["input"]}
        assert queries <= asked and len(asked) > len(queries)  # the queries and the corpus
        assert restored == {"cache-hit": "false", "cache-matched-key": ""}
        assert gate["exit-code"] == "1"  # saved all the same
        assert cache.saved == [key["key"]]
        assert key["path"] == str(repo / ".llm-eval" / "cache")
        assert key["restore-key"] and key["key"].startswith(key["restore-key"])

        server.requests.clear()
        again, restored, gate = run_action_on_a_fresh_runner(
            repo, tmp_path / "2", cache, server.url
        )
        assert again == key
        assert restored == {"cache-hit": "true", "cache-matched-key": key["key"]}
        assert server.requests == []
        assert gate["exit-code"] == "1"
        assert cache.saved == [key["key"]]  # not saved again

        corpus = repo / "gold" / "corpus.jsonl"
        first, rest = corpus.read_text(encoding="utf-8").split("\n", 1)
        changed = json.loads(first) | {"text": "A passage rewritten since."}
        corpus.write_text(json.dumps(changed) + "\n" + rest, encoding="utf-8")
        server.requests.clear()
        moved, restored, _ = run_action_on_a_fresh_runner(repo, tmp_path / "3", cache, server.url)
        assert moved["restore-key"] == key["restore-key"]
        assert moved["key"] != key["key"]
        assert restored == {"cache-hit": "false", "cache-matched-key": key["key"]}
        asked = {text for request in server.requests for text in request["input"]}
        assert any("A passage rewritten since." in text for text in asked)
        assert not queries & asked
        assert cache.saved == [key["key"], moved["key"]]

        # Another model: nothing of the old one's cache is restored.
        (repo / "config" / "dense.yaml").write_text(
            DENSE.replace("model: stub-embed", "model: stub-embed-2"), encoding="utf-8"
        )
        server.requests.clear()
        other, restored, _ = run_action_on_a_fresh_runner(repo, tmp_path / "4", cache, server.url)
        assert other["restore-key"] != key["restore-key"]
        assert restored == {"cache-hit": "false", "cache-matched-key": ""}
        asked = {text for request in server.requests for text in request["input"]}
        assert queries <= asked


@pytest.mark.parametrize("path", FILES, ids=lambda p: p.name)
def test_no_pull_request_target(path: Path) -> None:
    assert "pull_request_target" not in path.read_text(encoding="utf-8")


@pytest.mark.parametrize("path", WORKFLOWS, ids=lambda p: p.name)
def test_every_workflow_declares_top_level_permissions(path: Path) -> None:
    assert load(path)["permissions"] == {"contents": "read"}


@pytest.mark.parametrize("path", FILES, ids=lambda p: p.name)
def test_every_checkout_keeps_no_credentials(path: Path) -> None:
    for step in steps(load(path)):
        if step.get("uses", "").startswith("actions/checkout@"):
            assert step["with"]["persist-credentials"] is False, step


@pytest.mark.parametrize("path", FILES, ids=lambda p: p.name)
def test_every_external_action_is_pinned_to_a_full_commit_sha(path: Path) -> None:
    external = [line for line in uses_lines(path) if not line.startswith("./")]
    assert external
    for line in external:
        assert PINNED.match(line), line


def test_a_sha_stands_for_one_version_across_the_files() -> None:
    versions: dict[str, set[str]] = {}
    for path in FILES:
        for line in uses_lines(path):
            if not line.startswith("./"):
                ref, version = line.split(" # ")
                versions.setdefault(ref, set()).add(version)
    assert all(len(v) == 1 for v in versions.values()), versions


# Every value from the event (titles, branch names, shas) reaches a script through
# `env:` only, where the shell sees it as data. No `${{` at all inside `run:` is the
# simplest rule that guarantees it; the action reads its own path from
# $GITHUB_ACTION_PATH, so the allow-list is empty.
RUN_EXPRESSIONS_ALLOWED: frozenset[str] = frozenset()


@pytest.mark.parametrize("path", FILES, ids=lambda p: p.name)
def test_no_expression_inside_a_script(path: Path) -> None:
    for step in steps(load(path)):
        found = set(re.findall(r"\$\{\{.*?\}\}", step.get("run", "")))
        assert found <= RUN_EXPRESSIONS_ALLOWED, (step.get("name"), found)


def test_the_gate_workflow_runs_on_pull_requests_one_run_per_pull_request() -> None:
    workflow = load(REPO / ".github" / "workflows" / "retrieval-gate.yml")
    assert set(triggers(workflow)) == {"pull_request"}
    assert workflow["concurrency"] == {
        "group": "retrieval-gate-${{ github.event.pull_request.number }}",
        "cancel-in-progress": True,
    }
    (job,) = workflow["jobs"].values()
    assert job["permissions"] == {"contents": "read", "pull-requests": "write"}
    assert [step["uses"] for step in job["steps"]][-1] == "./"


def test_the_comment_workflow_runs_trusted_code_on_the_gates_report() -> None:
    gate = load(REPO / ".github" / "workflows" / "retrieval-gate.yml")
    workflow = load(REPO / ".github" / "workflows" / "retrieval-gate-comment.yml")
    assert triggers(workflow) == {
        "workflow_run": {"workflows": [gate["name"]], "types": ["completed"]}
    }
    (job,) = workflow["jobs"].values()
    assert job["permissions"] == {
        "actions": "read",
        "contents": "read",
        "pull-requests": "write",
    }
    assert "head_repository.full_name != github.repository" in job["if"]
    for step in job["steps"]:
        if step.get("uses", "").startswith("actions/checkout@"):
            assert set(step["with"]) == {"persist-credentials"}, "only the base repository"
    download = next(s for s in job["steps"] if "download-artifact" in s.get("uses", ""))
    assert download["with"]["run-id"] == "${{ github.event.workflow_run.id }}"
    assert download["with"]["github-token"] == "${{ github.token }}"
    comment = job["steps"][-1]
    assert comment["env"]["HEAD_SHA"] == "${{ github.event.workflow_run.head_sha }}"
    assert comment["run"] == 'llm-eval comment --report "$REPORT" --head-sha "$HEAD_SHA"'


def test_the_baseline_refresh_proposes_a_pull_request_and_never_pushes_the_default() -> None:
    workflow = load(REPO / ".github" / "workflows" / "baseline-refresh.yml")
    assert triggers(workflow) == {"workflow_dispatch": None, "push": {"branches": ["main"]}}
    assert workflow["concurrency"]["group"] == "baseline-refresh"
    (job,) = workflow["jobs"].values()
    assert job["permissions"] == {"contents": "write", "pull-requests": "write"}
    assert job["env"]["BRANCH"] == "llm-eval/baseline-refresh"
    scripts = "\n".join(step.get("run", "") for step in job["steps"])
    assert re.findall(r"\bpush\b.*", scripts) == ['push --force origin "HEAD:refs/heads/$BRANCH"']
    assert "llm-eval baseline refresh" in scripts
    assert "gh pr create" in scripts
    assert "gh pr edit" in scripts


# --- the baseline refresh's "moved" decision ------------------------------------------

REFRESH = REPO / ".github" / "workflows" / "baseline-refresh.yml"


def refresh_script() -> str:
    return script(load(REFRESH), "Recompute the baseline")


@pytest.fixture
def pushed(tmp_path: Path, demo_indexes: Path) -> Path:
    """The default branch after a push: the demo in a git repository, baseline committed,
    and the demo's indexes in its (uncommitted) cache, so the refresh need not build them."""
    repo = copy_demo(tmp_path / "repo")
    shutil.copytree(demo_indexes, repo / ".llm-eval" / "cache")
    git(repo, "init", "--quiet")
    git(repo, "add", "config", "gold")
    git(repo, "commit", "--quiet", "--message", "demo")
    return repo


def run_refresh_step(repo: Path, tmp_path: Path, baseline: str = "gold/baseline.json") -> str:
    """Run the workflow's refresh step as the runner would; return its `moved` output."""
    output = tmp_path / "github_output"
    output.write_text("")
    environ = runner_environ(
        RUNNER_TEMP=str(tmp_path), GITHUB_OUTPUT=str(output), BASELINE=baseline
    )
    done = run_script(refresh_script(), repo, environ)
    assert done.returncode == 0, done.stderr
    outputs = dict(line.split("=", 1) for line in output.read_text().splitlines())
    assert (tmp_path / "refresh.txt").exists()  # the pull request's text
    return outputs["moved"]


def test_the_refresh_step_passes_shellcheck() -> None:
    done = subprocess.run(
        [tool("shellcheck"), "--shell=bash", "-"],
        input=refresh_script(),
        capture_output=True,
        text=True,
        check=False,
    )
    assert done.returncode == 0, done.stdout


def test_the_refresh_step_says_not_moved_until_a_score_moves(pushed: Path, tmp_path: Path) -> None:
    for _ in range(2):
        assert run_refresh_step(pushed, tmp_path) == "false"
        assert git(pushed, "status", "--porcelain", "--", "gold") == ""
    config = pushed / "config" / "llm-eval.yaml"
    config.write_text(config.read_text().replace("k1: 0.9", "k1: 1.2"))  # recall moves
    git(pushed, "commit", "--quiet", "--all", "--message", "BM25 k1 1.2")
    assert run_refresh_step(pushed, tmp_path) == "true"
    assert git(pushed, "status", "--porcelain", "--", "gold") == " M gold/baseline.json\n"


def test_the_refresh_step_says_moved_for_a_first_baseline(pushed: Path, tmp_path: Path) -> None:
    assert run_refresh_step(pushed, tmp_path, baseline="gold/first.json") == "true"


def test_ci_runs_the_ci_script_and_the_gate() -> None:
    """GitHub's CI and a clean clone run the same script: nothing to keep in step."""
    workflow = load(REPO / ".github" / "workflows" / "ci.yml")
    commands = {
        name: [step.get("run") or step.get("uses") for step in job["steps"]]
        for name, job in workflow["jobs"].items()
    }
    assert commands["check"][-1] == ".ci/run"
    assert commands["gate"][-1] == "./"


@pytest.mark.parametrize("failing", ["ruff format", "ruff check", "mypy", "pytest", "pip"])
def test_the_ci_script_fails_when_any_check_fails(tmp_path: Path, failing: str) -> None:
    """`.ci/run` under stand-in tools, one of them failing: the run fails, and nothing
    after the failing check runs. (In `a && b && c` under `set -e`, a failing `a` or `b`
    would be ignored.)"""
    (tmp_path / ".ci").mkdir()
    shutil.copy(REPO / ".ci" / "run", tmp_path / ".ci" / "run")
    tools = tmp_path / "bin"
    tools.mkdir()
    log = tmp_path / "ran.log"
    venv_maker = (
        f"#!/bin/sh\nmkdir -p .venv/bin\nprintf 'PATH={tools}:$PATH\\n' > .venv/bin/activate\n"
    )
    # chromium is a stand-in too: where it is missing, the script would install Debian's
    # with apt-get, for real and for a minute.
    for name in ("ruff", "mypy", "pytest", "pip", "python", "chromium", "apt-get"):
        (tools / name).write_text(
            f'#!/bin/sh\nwhat="{name} $*"\necho "$what" >> {log}\n'
            f'case "$what" in "{failing}"*) exit 1;; esac\nexit 0\n'
        )
    (tools / "python3").write_text(venv_maker)
    for stand_in in tools.iterdir():
        stand_in.chmod(0o755)
    environ = {**os.environ, "PATH": f"{tools}:{os.environ['PATH']}"}
    done = subprocess.run(
        ["bash", str(tmp_path / ".ci" / "run")], env=environ, capture_output=True, check=False
    )
    ran = log.read_text().splitlines()
    assert done.returncode != 0, ran
    assert ran[-1].startswith(failing), ran
    if failing == "pytest":
        assert ran[-2] == "pip install -e .[test]"


def test_the_ci_script_ends_with_the_readme_test_command() -> None:
    readme = (REPO / "README.md").read_text(encoding="utf-8")
    test_command = readme.split("```sh\n", 1)[1].split("\n")[1]
    assert test_command == 'pip install -e ".[test]" && pytest'
    lines = (REPO / ".ci" / "run").read_text(encoding="utf-8").strip().splitlines()
    assert lines[-1] == test_command


# --- the action's scripts ------------------------------------------------------------


def action_script(name: str) -> str:
    return script(load(ACTION), name)


@pytest.mark.parametrize(
    "name",
    [
        "Install llm-eval",
        "Compute the cache key",
        "Run the gate",
        "Comment on the pull request",
        "Fail when the gate failed",
    ],
)
def test_the_actions_scripts_pass_shellcheck(name: str) -> None:
    done = subprocess.run(
        [tool("shellcheck"), "--shell=bash", "-"],
        input=action_script(name),
        capture_output=True,
        text=True,
        check=False,
    )
    assert done.returncode == 0, done.stdout


def run_gate_step(demo: Path, tmp_path: Path, **inputs: str) -> tuple[int, dict[str, str]]:
    """Run the action's gate step as the runner would; return its exit code and outputs."""
    output = tmp_path / "github_output"
    output.touch()
    defaults = {
        "LLM_EVAL_CONFIG": "config/llm-eval.yaml",
        "LLM_EVAL_CRITERIA": "config/ship-criteria.yaml",
        "LLM_EVAL_BASELINE": "",
        "LLM_EVAL_RUN": "",
        "LLM_EVAL_GATE_ARGS": "",
    }
    environ = runner_environ(
        RUNNER_TEMP=str(tmp_path), GITHUB_OUTPUT=str(output), **(defaults | inputs)
    )
    done = run_script(action_script("Run the gate"), demo, environ)
    outputs = dict(line.split("=", 1) for line in output.read_text().splitlines())
    return done.returncode, outputs


def test_the_gate_step_records_a_pass(shared_demo: Path, tmp_path: Path) -> None:
    code, outputs = run_gate_step(shared_demo, tmp_path)
    assert code == 0
    report = tmp_path / "llm-eval-report" / "report.json"
    assert outputs == {"exit-code": "0", "verdict": "pass", "report": str(report)}
    assert json.loads(report.read_text(encoding="utf-8"))["verdict"] == "pass"
    assert (tmp_path / "llm-eval-report" / "report.md").exists()


def test_gate_args_are_passed_one_per_line_and_never_run_by_a_shell(
    shared_demo: Path, tmp_path: Path
) -> None:
    code, outputs = run_gate_step(
        shared_demo, tmp_path, LLM_EVAL_GATE_ARGS="--repeat\n2\n\n--no-cache\n"
    )
    assert (code, outputs["exit-code"], outputs["verdict"]) == (0, "0", "pass")
    hostile = "--allow-gold-change $(touch pwned)\n`touch pwned`"
    code, outputs = run_gate_step(shared_demo, tmp_path, LLM_EVAL_GATE_ARGS=hostile)
    assert (code, outputs["exit-code"]) == (0, "2")  # one unknown argument: a usage error
    assert not (shared_demo / "pwned").exists()


def test_the_gate_step_records_a_failed_gate_without_failing(
    shared_demo: Path, tmp_path: Path
) -> None:
    code, outputs = run_gate_step(
        shared_demo, tmp_path, LLM_EVAL_CONFIG="config/examples/degraded.yaml"
    )
    assert code == 0
    assert outputs["exit-code"] == "1"
    assert outputs["verdict"] == "fail"


def test_the_gate_step_records_an_error_without_a_report(shared_demo: Path, tmp_path: Path) -> None:
    code, outputs = run_gate_step(shared_demo, tmp_path, LLM_EVAL_CONFIG="config/missing.yaml")
    assert code == 0
    assert outputs == {"exit-code": "3", "verdict": "error", "report": ""}


@pytest.mark.parametrize("code", ["1", "3"])
def test_the_last_step_fails_with_the_gates_exit_code(code: str) -> None:
    done = subprocess.run(
        ["bash", "-c", action_script("Fail when the gate failed")],
        env={**os.environ, "LLM_EVAL_EXIT_CODE": code},
        capture_output=True,
        text=True,
        check=False,
    )
    assert str(done.returncode) == code
    assert done.stdout.startswith(f"llm-eval gate exited with {code} (1: a blocking gate failed;")


# --- the action's comment step -------------------------------------------------------

COMMENT_TOKEN = "ghp_action-token-0123456789abcdefghijklmnopqrstu"


def test_the_comment_input_defaults_to_on_change_and_only_false_skips_the_step() -> None:
    action = load(ACTION)
    assert action["inputs"]["comment"]["default"] == "on_change"
    step = next(s for s in steps(action) if s.get("name") == "Comment on the pull request")
    assert step["if"].startswith("inputs.comment != 'false' && ")
    assert step["env"]["LLM_EVAL_COMMENT"] == "${{ inputs.comment }}"


@pytest.mark.parametrize(
    ("value", "report", "posted"),
    [
        ("true", "pass", False),  # true is the command's default, on_change
        ("on_change", "pass", False),
        ("on_change", "warning", True),
        ("always", "pass", True),
        ("on_fail", "warning", False),
        ("on_fail", "failure", True),
    ],
)
def test_the_comment_step_posts_by_the_comment_input(
    tmp_path: Path, value: str, report: str, posted: bool
) -> None:
    github = FakeGitHub(users={COMMENT_TOKEN: "llm-eval-bot"})
    github.add_pull(7, "9f" * 20)
    with serve(github):
        done = run_comment_step(tmp_path, github, LLM_EVAL_COMMENT=value, report=report)
    assert done.returncode == 0, done.stderr
    assert len(github.comments[7]) == int(posted)
    if not posted:
        assert done.stdout.startswith("llm-eval comment: not posted: ")


def test_the_comment_step_updates_the_comment_already_there_and_keeps_ids_apart(
    tmp_path: Path,
) -> None:
    github = FakeGitHub(users={COMMENT_TOKEN: "llm-eval-bot"})
    github.add_pull(7, "9f" * 20)
    with serve(github):
        run_comment_step(tmp_path, github, "failure", LLM_EVAL_COMMENT="always", LLM_EVAL_ID="docs")
        done = run_comment_step(tmp_path, github, LLM_EVAL_COMMENT="on_fail", LLM_EVAL_ID="docs")
        assert done.stdout.startswith("llm-eval comment: updated: ")
        other = run_comment_step(tmp_path, github, LLM_EVAL_COMMENT="on_fail", LLM_EVAL_ID="api")
    assert (
        other.stdout == "llm-eval comment: not posted: the check passes (pass) (comment: on_fail)\n"
    )
    (only,) = github.comments[7]
    assert [r.method for r in github.writes()] == ["POST", "PATCH"]
    assert "docs" in only.body.splitlines()[0]


def test_the_comment_step_refuses_a_value_that_is_no_mode(tmp_path: Path) -> None:
    github = FakeGitHub(users={COMMENT_TOKEN: "llm-eval-bot"})
    github.add_pull(7, "9f" * 20)
    with serve(github):
        done = run_comment_step(tmp_path, github, LLM_EVAL_COMMENT="yes")
    assert done.returncode == 2
    assert "'yes' is not one of 'always', 'on_change', 'on_fail'" in done.stderr
    assert github.requests == []


def run_comment_step(
    tmp_path: Path, github: FakeGitHub, report: str = "pass", **inputs: str
) -> subprocess.CompletedProcess[str]:
    """Run the action's comment step as the runner would, on a pull_request event."""
    event = tmp_path / "event.json"
    event.write_text(json.dumps({"pull_request": {"number": 7}}), encoding="utf-8")
    environ = runner_environ(
        GITHUB_TOKEN=COMMENT_TOKEN,
        GITHUB_API_URL=github.base_url,
        GITHUB_REPOSITORY=github.repo,
        GITHUB_EVENT_PATH=str(event),
        LLM_EVAL_REPORT=str(REPO / "tests" / "gold" / "reports" / f"{report}.json"),
        **({"LLM_EVAL_ARTIFACT_URL": "", "LLM_EVAL_ID": ""} | inputs),
    )
    return run_script(action_script("Comment on the pull request"), None, environ)


def test_every_install_line_names_the_distribution() -> None:
    """The distribution is pyproject's name, llm-eval-ci (the index refuses llm-eval), held
    once as `llm_eval.DISTRIBUTION`; every `"NAME @ git+..."` requirement, in the README,
    the docs, the workflows and those init writes from them, and every `NAME[extra]`, names it."""
    import tomllib

    project = tomllib.loads((REPO / "pyproject.toml").read_text(encoding="utf-8"))["project"]
    assert project["name"] == DISTRIBUTION
    texts = [REPO / "README.md", *(REPO / "docs").rglob("*.md")]
    texts += (REPO / ".github" / "workflows").glob("*.yml")
    texts += (REPO / "llm_eval" / "scaffold").rglob("*.yml")
    written = [point_workflow(path.read_text(encoding="utf-8"), "a/b@c") for path in WORKFLOWS]
    hints = [
        name
        for text in [*(path.read_text(encoding="utf-8") for path in texts), *written]
        for name in re.findall(r'"([\w.-]+) @ git\+', text)
    ]
    assert hints and set(hints) == {DISTRIBUTION}
    assert sum(f'"{DISTRIBUTION} @ git+https://github.com/a/b.git@c"' in t for t in written) == 3
    # Extras are installed by the distribution's name too, also the project's own.
    texts += [REPO / "pyproject.toml", *(REPO / "llm_eval").rglob("*.py")]
    extras = [
        (path.name, name)
        for path in texts
        for name in re.findall(r"([\w.-]+)\[[\w,]+\]", path.read_text(encoding="utf-8"))
        if name.startswith("llm-eval")
    ]
    assert extras and {name for _, name in extras} == {DISTRIBUTION}, extras
