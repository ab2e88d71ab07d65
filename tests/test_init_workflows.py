"""What `llm-eval init` writes into a new repository, run as written.

`init --source acme/retriever@SHA` in a fresh git repository; SHA is a commit of a git
repository made from this checkout's working tree, which stands in for
github.com/acme/retriever. Each written workflow is linted by actionlint (with
shellcheck on its scripts); each distinct `pip install` line is run as written by pip
into a fresh virtualenv, git's `url.<base>.insteadOf` sending
`https://github.com/acme/retriever.git` to that local repository, so pip checks the
distribution's name and the ref and records the GitHub URL (PEP 610);
then the workflows' `run:` steps run with bash in the repository with that
virtualenv's `llm-eval`. Where a step is an action GitHub provides (checkout,
setup-python, artifacts, Pages), the test does its local equivalent and says so; the
GitHub API is tests/fake_github.py, and a push goes to a bare repository as `origin`.
"""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import conftest
import pytest
from fake_github import FakeGitHub, serve
from workflow_steps import (
    ActionsCache,
    git,
    load,
    named,
    resolve,
    run_script,
    run_step,
    runner_environ,
    steps,
    tool,
)

from llm_eval import DISTRIBUTION, __version__

REPO = Path(__file__).resolve().parents[1]
OWNER_REPO = "acme/retriever"
WRITTEN = [
    "baseline-refresh.yml",
    "dashboard.yml",
    "retrieval-gate-comment.yml",
    "retrieval-gate.yml",
]
stub = conftest.script("stub_openai")
TOKEN = "ghp_workflow-token-0123456789abcdefghijklmnopqrst"
FORK_TOKEN = "ghp_fork-run-token-0123456789abcdefghijklmnopqrst"


@dataclass(frozen=True, slots=True)
class Source:
    """The stand-in for github.com/acme/retriever: a repository and its one commit."""

    root: Path
    sha: str


@pytest.fixture(scope="module")
def source(tmp_path_factory: pytest.TempPathFactory) -> Source:
    """This checkout's working tree (its tracked and untracked files, not the ignored
    ones) committed into a repository of its own, so that uncommitted edits are tested."""
    root = tmp_path_factory.mktemp("acme-retriever")
    listed = git(REPO, "ls-files", "-z", "--cached", "--others", "--exclude-standard")
    for name in filter(None, listed.split("\0")):
        if (REPO / name).is_file():  # a tracked file deleted in the working tree is not
            (root / name).parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(REPO / name, root / name)
    git(root, "init", "--quiet")
    git(root, "add", "--all")
    git(root, "commit", "--quiet", "--message", "llm-eval")
    return Source(root, git(root, "rev-parse", "HEAD").strip())


def init_repository(root: Path, source: Source, *args: str) -> Path:
    """A new repository at `root` after `llm-eval init --source acme/retriever@SHA ARGS`,
    committed on main: the first push to the default branch."""
    root.mkdir()
    git(root, "init", "--quiet", "--initial-branch", "main")
    made = subprocess.run(
        [
            sys.executable,
            "-m",
            "llm_eval.cli",
            "init",
            "--source",
            f"{OWNER_REPO}@{source.sha}",
            *args,
        ],
        cwd=root,
        capture_output=True,
        text=True,
        check=False,
    )
    assert made.returncode == 0, made.stderr
    git(root, "add", "--all")
    git(root, "commit", "--quiet", "--message", "llm-eval init")
    return root


@pytest.fixture(scope="module")
def initialised(tmp_path_factory: pytest.TempPathFactory, source: Source) -> Path:
    """A new repository after `llm-eval init --source acme/retriever@SHA`."""
    return init_repository(tmp_path_factory.mktemp("initialised") / "repo", source)


@pytest.fixture
def repo(initialised: Path, tmp_path: Path) -> Path:
    """A copy of the initialised repository for one test to change."""
    return Path(shutil.copytree(initialised, tmp_path / "repo", symlinks=True))


def workflow(repo: Path, name: str) -> dict[str, Any]:
    return load(repo / ".github" / "workflows" / name)


def install_scripts(root: Path) -> dict[str, list[str]]:
    """Each distinct script of a step that runs `pip install`, with the workflows it is in."""
    found: dict[str, list[str]] = {}
    for name in WRITTEN:
        for step in steps(workflow(root, name)):
            if "pip install" in step.get("run", ""):
                found.setdefault(step["run"], []).append(name)
    return found


def via_github(source: Source) -> dict[str, str]:
    """git's configuration, in the environment, that fetches
    `https://github.com/acme/retriever.git` from the local repository, as a mirror would:
    what init wrote runs unedited."""
    return {
        "GIT_CONFIG_COUNT": "1",
        "GIT_CONFIG_KEY_0": f"url.{source.root.as_uri()}.insteadOf",
        "GIT_CONFIG_VALUE_0": f"https://github.com/{OWNER_REPO}.git",
    }


def fresh_venv(where: Path) -> Path:
    """A new virtualenv, as setup-python gives a job a Python of its own; its bin folder."""
    subprocess.run([sys.executable, "-m", "venv", str(where)], check=True)
    return where / "bin"


@pytest.fixture(scope="module")
def installed(initialised: Path, source: Source, tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The bin folder of a virtualenv into which every install step init wrote has run
    (once per distinct script), as written but for the URL."""
    bin_dir = fresh_venv(tmp_path_factory.mktemp("runner") / "venv")
    for script, names in install_scripts(initialised).items():
        assert script.count(f"git+https://github.com/{OWNER_REPO}.git@") == 1, script
        done = run_script(script, initialised, runner_environ(bin_dir, **via_github(source)))
        assert done.returncode == 0, f"{names}: {done.stderr}"
    return bin_dir


def test_init_writes_the_four_workflows_and_actionlint_passes_on_them(initialised: Path) -> None:
    folder = initialised / ".github" / "workflows"
    assert sorted(path.name for path in folder.iterdir()) == WRITTEN
    done = subprocess.run(
        [tool("actionlint"), "-no-color", "-oneline", f"-shellcheck={tool('shellcheck')}"],
        cwd=initialised,
        capture_output=True,
        text=True,
        check=False,
    )
    assert done.returncode == 0, done.stdout + done.stderr


EXERCISED = {
    "baseline-refresh.yml": [
        "Install llm-eval",
        "Compute the cache key",
        "Recompute the baseline",
        "Open or update the pull request",
    ],
    "dashboard.yml": [
        "Install llm-eval",
        "Compute the cache key",
        "Keep this push's report",
        "Write the dashboard",
    ],
    "retrieval-gate-comment.yml": ["Install llm-eval", "Comment on the pull request"],
    "retrieval-gate.yml": [],  # its one step is the action, whose steps run below
}
"""The `run:` steps of each written workflow that the tests below run."""


def test_every_script_init_writes_is_run_below(initialised: Path) -> None:
    """A new `run:` step in a written workflow fails here until a test runs it."""
    scripts = {
        name: [step["name"] for step in steps(workflow(initialised, name)) if "run" in step]
        for name in WRITTEN
    }
    assert scripts == EXERCISED


DIRECT_URL = (
    "import importlib.metadata, sys; "
    "print(importlib.metadata.distribution(sys.argv[1]).read_text('direct_url.json'))"
)
"""Where pip says an installed distribution came from (PEP 610)."""


def test_the_install_lines_install_the_pinned_commit_by_the_distributions_name(
    initialised: Path, installed: Path, source: Source
) -> None:
    scripts = install_scripts(initialised)
    assert sorted(name for names in scripts.values() for name in names) == [
        "baseline-refresh.yml",
        "dashboard.yml",
        "retrieval-gate-comment.yml",
    ]
    assert all(f'"{DISTRIBUTION} @ git+https://' in script for script in scripts)
    shown = subprocess.run(
        [str(installed / "python"), "-I", "-c", DIRECT_URL, DISTRIBUTION],
        capture_output=True,
        text=True,
        check=True,
    )
    direct = json.loads(shown.stdout)
    assert direct["url"] == f"https://github.com/{OWNER_REPO}.git"
    assert direct["vcs_info"]["commit_id"] == source.sha
    version = subprocess.run(
        [str(installed / "llm-eval"), "--version"], capture_output=True, text=True, check=True
    )
    assert version.stdout.split()[-1] == __version__


def test_init_from_a_git_install_pins_the_commit_it_came_from_and_links_its_docs(
    installed: Path, source: Source, tmp_path: Path
) -> None:
    """The llm-eval those lines installed, run with no --source in a new repository:
    its workflows take the action and package from acme/retriever at the installed
    commit, and its reports link the metrics page of that commit."""
    git(tmp_path, "init", "--quiet")
    made = subprocess.run(
        [str(installed / "llm-eval"), "init"],
        cwd=tmp_path,
        env=runner_environ(installed, COLUMNS="200"),
        capture_output=True,
        text=True,
        check=False,
    )
    assert made.returncode == 0, made.stderr
    pinned = f"{OWNER_REPO}@{source.sha}"
    assert (
        f"The workflows take the action and package from {pinned}, the commit this llm-eval "
        "was installed from.\n"
    ) in made.stdout
    gate = (tmp_path / ".github" / "workflows" / "retrieval-gate.yml").read_text()
    assert f"      - uses: {pinned}\n" in gate
    docs = subprocess.run(
        [str(installed / "python"), "-I", "-c", DOCS_PAGE],
        env=runner_environ(installed),
        capture_output=True,
        text=True,
        check=True,
    )
    assert docs.stdout == (
        f"https://github.com/{OWNER_REPO}/blob/{source.sha}/docs/reference/metrics.md\n"
    )


DOCS_PAGE = (
    "from llm_eval.docs_address import docs_address; "
    "from llm_eval.installation_io import installed_source; "
    "print(docs_address({}, installed_source()).page('reference/metrics', 'mrr'))"
)
"""The metrics page the reports of an installed llm-eval link to, outside the action."""


def runner_context(runner: Path) -> dict[str, str]:
    """The expressions the written workflows' `env:` read, with plausible values."""
    return {
        "github.token": TOKEN,
        "runner.temp": str(runner),
        "vars.LLM_EVAL_DASHBOARD_URL": "",
        "github.event.repository.default_branch": "main",
    }


def with_origin(repo: Path, tmp_path: Path) -> Path:
    """A bare repository as the repository's `origin`, holding its main branch."""
    origin = tmp_path / "origin.git"
    git(tmp_path, "init", "--quiet", "--bare", str(origin))
    git(repo, "remote", "add", "origin", str(origin))
    git(repo, "push", "--quiet", "origin", "HEAD:refs/heads/main")
    return origin


def empty_passages(repo: Path, every: bool) -> None:
    """Commit a corpus where passages say nothing: every one (recall falls below its
    floor), or those relevant to the gold set's first question (the scores move a little)."""
    corpus = repo / "gold" / "corpus.jsonl"
    documents = [json.loads(line) for line in corpus.read_text(encoding="utf-8").splitlines()]
    with (repo / "gold" / "gold-A.jsonl").open(encoding="utf-8") as gold:
        relevant = json.loads(gold.readline())["relevant"]
    emptied = [
        d | {"title": "Nothing", "text": "Nothing."} if every or d["_id"] in relevant else d
        for d in documents
    ]
    corpus.write_text("".join(json.dumps(d) + "\n" for d in emptied), encoding="utf-8")
    git(repo, "commit", "--quiet", "--all", "--message", "empty passages")


# --- baseline-refresh.yml --------------------------------------------------------------


def outputs(path: Path) -> dict[str, str]:
    """A step's outputs, from the file $GITHUB_OUTPUT names."""
    return dict(line.split("=", 1) for line in path.read_text().splitlines())


def test_the_baseline_refresh_proposes_nothing_after_init_and_a_branch_once_scores_move(
    repo: Path, installed: Path, tmp_path: Path
) -> None:
    """The push that commits init's files: the refresh finds nothing moved. After a
    change that moves the scores it commits the baseline to llm-eval/baseline-refresh,
    pushes it to origin and asks `gh` for the pull request. `gh` talks to github.com
    only (no GITHUB_API_URL), so a stand-in on PATH records what it is asked."""
    origin = with_origin(repo, tmp_path)
    document = workflow(repo, "baseline-refresh.yml")
    runner = tmp_path / "runner"
    runner.mkdir()
    stand_ins = tmp_path / "stand-ins"
    stand_ins.mkdir()
    asked = tmp_path / "gh.log"
    (stand_ins / "gh").write_text(f'#!/bin/sh\necho "$*" >> {asked}\n')
    (stand_ins / "gh").chmod(0o755)
    sha = git(repo, "rev-parse", "HEAD").strip()
    environ = runner_environ(installed, RUNNER_TEMP=str(runner), GITHUB_SHA=sha)
    environ["PATH"] = f"{stand_ins}:{environ['PATH']}"
    context = runner_context(runner)

    cache = ActionsCache(tmp_path / "github-cache")
    restored: list[dict[str, str]] = []

    def refresh() -> str:
        """The job on a new runner: no output folder until the cache is restored."""
        shutil.rmtree(repo / ".llm-eval", ignore_errors=True)
        ran = cached_steps(document, "Recompute the baseline", repo, environ, context, cache)
        restored.append(ran.restored)
        return ran.outputs["moved"]

    assert refresh() == "false"
    assert restored[-1]["cache-hit"] == "false"
    assert refresh() == "false"
    assert restored[-1]["cache-hit"] == "true"  # the BM25 index was not built again
    assert not asked.exists()
    empty_passages(repo, every=False)
    assert refresh() == "true"
    # A new corpus: a new key, restored from the last cache of the same retriever.
    assert restored[-1] == {"cache-hit": "false", "cache-matched-key": cache.saved[0]}
    assert len(cache.saved) == 2
    done = run_step(document, "Open or update the pull request", repo, environ, context)
    assert done.returncode == 0, done.stderr
    branch = "llm-eval/baseline-refresh"
    assert git(origin, "log", "--format=%s", "-1", branch) == "Refresh the retrieval baseline\n"
    changed = git(origin, "diff", "--name-only", f"{branch}~1", branch)
    assert changed == "gold/baseline.json\n"
    body = runner / "body.md"
    assert f"`llm-eval baseline refresh` at {sha}" in body.read_text()
    assert (runner / "refresh.txt").read_text() in body.read_text()
    assert asked.read_text().splitlines() == [
        f"pr list --head {branch} --state open --json number --jq .[0].number // empty",
        f"pr create --base main --head {branch} --title Refresh the retrieval baseline "
        f"--body-file {body}",
    ]


@dataclass(frozen=True, slots=True)
class CachedRun:
    """What the steps around a cached step did."""

    restored: dict[str, str]
    """The restore step's outputs."""
    outputs: dict[str, str]
    """The cached step's outputs."""


def cached_steps(
    document: dict[str, Any],
    names: str | tuple[str, ...],
    repo: Path,
    environ: dict[str, str],
    context: dict[str, str],
    cache: ActionsCache,
) -> CachedRun:
    """The cache key, the restore, the steps called `names` in turn and the save, as the
    runner runs them (the save step's `if:` evaluated as written: `always()` holds)."""
    runner = Path(context["runner.temp"])
    output = runner / "output"
    output.write_text("")
    environ = environ | {"GITHUB_OUTPUT": str(output)}
    done = run_step(document, "Compute the cache key", repo, environ, context)
    assert done.returncode == 0, done.stderr
    key = outputs(output)
    assert key["path"] == str(repo / ".llm-eval" / "cache")
    context = context | {f"steps.cache-key.outputs.{k}": v for k, v in key.items()}
    restored = cache.step(document, "Restore the cache", context)
    context |= {f"steps.restore-cache.outputs.{k}": v for k, v in restored.items()}
    output.write_text("")
    for name in (names,) if isinstance(names, str) else names:
        done = run_step(document, name, repo, environ, context)
        assert done.returncode == 0, done.stderr
        assert "::warning::" not in done.stdout
    if restored["cache-hit"] != "true":
        cache.step(document, "Save the cache", context)
    assert (cache.root / key["key"] / "bm25").is_dir()  # the index is what is kept
    return CachedRun(restored, outputs(output))


# --- dashboard.yml ---------------------------------------------------------------------


def test_the_dashboard_keeps_the_first_pushs_report_and_writes_the_page(
    repo: Path, installed: Path, tmp_path: Path
) -> None:
    """The build job's steps after checkout (the repository, with its history) and
    setup-python (the virtualenv): the report is kept on llm-eval-history in origin and
    the page is written where upload-pages-artifact takes it from."""
    origin = with_origin(repo, tmp_path)
    document = workflow(repo, "dashboard.yml")
    runner = tmp_path / "runner"
    runner.mkdir()
    sha = git(repo, "rev-parse", "HEAD").strip()
    environ = runner_environ(installed, RUNNER_TEMP=str(runner), GITHUB_SHA=sha)
    context = runner_context(runner)
    cache = ActionsCache(tmp_path / "github-cache")
    kept = cached_steps(document, "Keep this push's report", repo, environ, context, cache)
    assert kept.restored["cache-hit"] == "false"
    assert len(cache.saved) == 1
    done = run_step(document, "Write the dashboard", repo, environ, context)
    assert done.returncode == 0, done.stderr
    assert "::warning::" not in done.stdout
    (kept,) = git(origin, "show", "llm-eval-history:history.jsonl").splitlines()
    assert json.loads(kept)["provenance"]["head_commit"] == sha
    upload = next(s for s in steps(document) if "upload-pages-artifact" in s.get("uses", ""))
    site = Path(resolve(upload["with"]["path"], context))
    assert (site / "index.html").is_file()


# --- retrieval-gate.yml (the action) and retrieval-gate-comment.yml --------------------


@pytest.fixture(scope="module")
def action_bin(tmp_path_factory: pytest.TempPathFactory, source: Source) -> Path:
    """A virtualenv into which the action's own install step has installed llm-eval from
    the action's checkout (GITHUB_ACTION_PATH: acme/retriever at the pinned commit)."""
    bin_dir = fresh_venv(tmp_path_factory.mktemp("action") / "venv")
    action = load(source.root / "action.yml")
    environ = runner_environ(bin_dir, GITHUB_ACTION_PATH=str(source.root))
    done = run_step(action, "Install llm-eval", source.root, environ)
    assert done.returncode == 0, done.stderr
    return bin_dir


@dataclass(frozen=True, slots=True)
class GateRun:
    """What a run of the gate workflow did."""

    outputs: dict[str, str]
    """The gate step's outputs."""
    failed_with: int | None
    """The exit code of the action's last step, when it ran (the check goes red)."""


def run_gate_workflow(
    repo: Path,
    source: Source,
    action_bin: Path,
    runner: Path,
    github: FakeGitHub,
    fork: bool = False,
) -> GateRun:
    """The gate job on pull request 7, from a branch of the repository or from a fork,
    after its checkout: the action's steps, as `uses: acme/retriever@SHA` with its
    `with:` gives them. Its upload-artifact step is checked to find the files it names."""
    job = workflow(repo, "retrieval-gate.yml")["jobs"]["gate"]
    uses = job["steps"][-1]
    assert uses["uses"] == f"{OWNER_REPO}@{source.sha}"
    event = runner / "event.json"
    event.write_text(json.dumps({"pull_request": {"number": 7}}), encoding="utf-8")
    context = runner_context(runner) | {
        # A fork's run gets a read-only token, and its `comment:` input is false.
        "github.token": FORK_TOKEN if fork else TOKEN,
        "github.event.pull_request.head.repo.full_name == github.repository": str(not fork).lower(),
        "vars.LLM_EVAL_DASHBOARD_URL": "",
    }
    action = load(source.root / "action.yml")
    inputs = {name: str(spec.get("default", "")) for name, spec in action["inputs"].items()}
    inputs |= {name: resolve(str(value), context) for name, value in uses["with"].items()}
    context |= {f"inputs.{name}": value for name, value in inputs.items()}
    environ = runner_environ(
        action_bin,
        RUNNER_TEMP=str(runner),
        GITHUB_OUTPUT=str(runner / "output"),
        GITHUB_API_URL=github.base_url,
        GITHUB_REPOSITORY=github.repo,
        GITHUB_EVENT_NAME="pull_request",
        GITHUB_EVENT_PATH=str(event),
    )
    environ |= {k: resolve(v, context) for k, v in job.get("env", {}).items()}
    (runner / "output").write_text("")
    cwd = repo / inputs["working-directory"]
    done = run_step(action, "Run the gate", cwd, environ, context)
    assert done.returncode == 0, done.stderr
    gate = outputs(runner / "output")
    context |= {f"steps.gate.outputs.{key}": value for key, value in gate.items()}
    upload = named(action, "Upload the report")
    assert all(Path(path).is_file() for path in resolve(upload["with"]["path"], context).split())
    context["steps.upload.outputs.artifact-url"] = f"{github.base_url}/artifacts/1"
    if inputs["comment"] != "false":  # the step's `if:`, the event being a pull request
        done = run_step(action, "Comment on the pull request", cwd, environ, context)
        assert done.returncode == 0, done.stderr
    failed_with = None
    if gate["exit-code"] != "0":
        failed_with = run_step(
            action, "Fail when the gate failed", cwd, environ, context
        ).returncode
    return GateRun(gate, failed_with)


def pull_request_branch(repo: Path, change: bool) -> str:
    """A branch for the pull request, with a change that moves the scores or none; its
    head commit."""
    git(repo, "switch", "--quiet", "--create", "change")
    if change:
        empty_passages(repo, every=True)
    else:
        git(repo, "commit", "--quiet", "--allow-empty", "--message", "nothing to score")
    return git(repo, "rev-parse", "HEAD").strip()


@pytest.mark.parametrize(
    ("change", "verdict", "comments", "failed_with"),
    [(False, "pass", 0, None), (True, "fail", 1, 1)],
    ids=["no change", "corpus emptied"],
)
def test_the_gate_workflow_gates_a_pull_request_with_the_pinned_action(
    repo: Path,
    source: Source,
    action_bin: Path,
    tmp_path: Path,
    change: bool,
    verdict: str,
    comments: int,
    failed_with: int | None,
) -> None:
    """A team's first pull request: a change that moves no score passes with no comment
    (on_change); one that empties the corpus fails the check with a comment."""
    github = FakeGitHub(repo=OWNER_REPO, users={TOKEN: "github-actions[bot]"})
    github.add_pull(7, pull_request_branch(repo, change))
    runner = tmp_path / "runner"
    runner.mkdir()
    with serve(github):
        run = run_gate_workflow(repo, source, action_bin, runner, github)
    assert run.outputs["verdict"] == verdict
    assert len(github.comments.get(7, [])) == comments
    assert run.failed_with == failed_with


def test_the_comment_workflow_posts_a_forks_report_found_by_its_head_commit(
    repo: Path, source: Source, action_bin: Path, installed: Path, tmp_path: Path
) -> None:
    """A fork's pull request: its gate run, with a read-only token, uploads the report;
    the comment workflow, installed by its pip line, posts it on the pull request whose
    head is the run's commit. The artifact GitHub keeps between the runs is a copy here."""
    head = pull_request_branch(repo, change=True)
    github = FakeGitHub(
        repo=OWNER_REPO,
        users={TOKEN: "github-actions[bot]", FORK_TOKEN: "github-actions[bot]"},
        read_only={FORK_TOKEN},
    )
    github.add_pull(7, head)
    gate_runner, runner = tmp_path / "gate-runner", tmp_path / "runner"
    gate_runner.mkdir()
    runner.mkdir()
    document = workflow(repo, "retrieval-gate-comment.yml")
    context = runner_context(runner) | {"github.event.workflow_run.head_sha": head}
    with serve(github):
        run_gate_workflow(repo, source, action_bin, gate_runner, github, fork=True)
        assert github.writes() == []
        download = named(document, "Download the report")
        shutil.copytree(gate_runner / "llm-eval-report", resolve(download["with"]["path"], context))
        environ = runner_environ(
            installed, GITHUB_API_URL=github.base_url, GITHUB_REPOSITORY=github.repo
        )
        done = run_step(document, "Comment on the pull request", runner, environ, context)
    assert done.returncode == 0, done.stderr
    (comment,) = github.comments[7]
    assert "recall@5" in comment.body


# --- retrieval-gate.yml as `init --shards 3` writes it ---------------------------------


@pytest.fixture(scope="module")
def sharded(tmp_path_factory: pytest.TempPathFactory, source: Source) -> Path:
    """A new repository after `llm-eval init --source acme/retriever@SHA --shards 3`."""
    return init_repository(tmp_path_factory.mktemp("sharded") / "repo", source, "--shards", "3")


def test_init_shards_writes_a_matrix_gate_that_actionlint_passes(
    sharded: Path, initialised: Path
) -> None:
    done = subprocess.run(
        [tool("actionlint"), "-no-color", "-oneline", f"-shellcheck={tool('shellcheck')}"],
        cwd=sharded,
        capture_output=True,
        text=True,
        check=False,
    )
    assert done.returncode == 0, done.stdout + done.stderr
    jobs = workflow(sharded, "retrieval-gate.yml")["jobs"]
    assert jobs["retrieve"]["strategy"]["matrix"]["shard"] == [1, 2, 3]
    assert jobs["gate"]["needs"] == "retrieve"
    for name in WRITTEN:  # the other workflows are the ones init writes without shards
        if name != "retrieval-gate.yml":
            assert workflow(sharded, name) == workflow(initialised, name)


def test_every_script_of_the_sharded_gate_is_run_below(sharded: Path, initialised: Path) -> None:
    """A new `run:` step fails here until the test below runs it; its install line is
    one `installed` ran."""
    document = workflow(sharded, "retrieval-gate.yml")
    scripts = [step["name"] for step in steps(document) if "run" in step]
    assert scripts == [
        "Install llm-eval",
        "Compute the cache key",
        "Retrieve this shard",
        "Judge this shard",
    ]
    assert named(document, "Install llm-eval")["run"] in install_scripts(initialised)


def without_timings(report: dict[str, Any]) -> dict[str, Any]:
    """report.json without what differs from run to run: timings, generated_at."""
    kept = {key: value for key, value in report.items() if key != "timings"}
    kept["provenance"] = {k: v for k, v in report["provenance"].items() if k != "generated_at"}
    return kept


def judged_repository(repo: Path, url: str) -> None:
    """The repository's config with a judge (the stub at `url`) and a judged metric, its
    gold questions with expected answers, and the baseline refreshed, on main."""
    config = repo / "config" / "llm-eval.yaml"
    text = config.read_text().replace("metrics: [", "metrics: [context_precision@3, ")
    config.write_text(text + f"judge: {{base_url: '{url}', model: stub, retries: 0}}\n")
    gold = repo / "gold" / "gold-A.jsonl"
    rows = [json.loads(line) for line in gold.read_text().splitlines()]
    for row in rows:
        row["expected_answer"] = row["query"]
    gold.write_text("".join(json.dumps(row) + "\n" for row in rows))
    refreshed = subprocess.run(
        [sys.executable, "-m", "llm_eval.cli", "baseline", "refresh", "--force"],
        cwd=repo,
        capture_output=True,
        text=True,
        check=False,
    )
    assert refreshed.returncode == 0, refreshed.stderr
    shutil.rmtree(repo / ".llm-eval")
    git(repo, "add", "--all")
    git(repo, "commit", "--quiet", "--message", "a judge")


@pytest.mark.parametrize("judged", [False, True], ids=["retrieved", "retrieved and judged"])
def test_the_sharded_gate_gates_from_the_parts_its_matrix_uploaded(
    sharded: Path, source: Source, installed: Path, action_bin: Path, tmp_path: Path, judged: bool
) -> None:
    """Each matrix job on a runner of its own (the cache restored, the shard retrieved
    and judged, the cache saved, the parts uploaded), then the gate job: the parts
    downloaded as download-artifact does (every artifact named llm-eval-part-*, merged
    in one folder) and the action's steps on them. The artifacts GitHub keeps between
    the jobs are folders here. The report is the one `llm-eval gate` gives in one
    process; with a judge (the stub on 127.0.0.1), the gate job asks it nothing."""
    repo = Path(shutil.copytree(sharded, tmp_path / "repo", symlinks=True))
    with stub.serve() as judge:
        if judged:
            judged_repository(repo, judge.url)
        head = pull_request_branch(repo, change=False)
        document = workflow(repo, "retrieval-gate.yml")
        artifacts = upload_parts(repo, document, installed, tmp_path, judged)
        asked = len(judge.requests)
        report, single = gate_from_parts(
            repo, document, source, action_bin, tmp_path, artifacts, head
        )
    # The gate job asked the judge nothing: every call after the parts is the single run's.
    made = single["judge"]["calls"] if judged else 0
    assert len(judge.requests) == asked + made
    if judged:
        assert report["judge"]["calls"] == 0
        assert report["judge"]["cached"] == single["judge"]["calls"] > 0
        for key in ("calls", "cached", "cost", "prompt_tokens", "completion_tokens"):
            del report["judge"][key], single["judge"][key]
    assert without_timings(report) == without_timings(single)


def upload_parts(
    repo: Path, document: dict[str, Any], installed: Path, tmp_path: Path, judged: bool
) -> Path:
    """The matrix's jobs, each on a new runner; the folder of the artifacts they uploaded."""
    cache = ActionsCache(tmp_path / "github-cache")
    artifacts = tmp_path / "artifacts"
    upload = named(document, "Upload the part")
    for shard in document["jobs"]["retrieve"]["strategy"]["matrix"]["shard"]:
        runner = tmp_path / f"runner-{shard}"
        runner.mkdir()
        shutil.rmtree(repo / ".llm-eval", ignore_errors=True)  # a new runner
        context = runner_context(runner) | {"matrix.shard": str(shard)}
        environ = runner_environ(installed, RUNNER_TEMP=str(runner))
        names = ("Retrieve this shard", "Judge this shard")
        ran = cached_steps(document, names, repo, environ, context, cache)
        assert ran.restored["cache-hit"] == ("false" if shard == 1 else "true")
        given = {key: resolve(str(value), context) for key, value in upload["with"].items()}
        shutil.copytree(given["path"], artifacts / given["name"])
        made = sorted(p.name for p in (artifacts / given["name"]).iterdir())
        judgments = [f"judged-{shard}.jsonl"] if judged else []
        assert made == [*judgments, f"run-{shard}.jsonl"]
    assert sorted(p.name for p in artifacts.iterdir()) == [f"llm-eval-part-{i}" for i in (1, 2, 3)]
    return artifacts


def gate_from_parts(
    repo: Path,
    document: dict[str, Any],
    source: Source,
    action_bin: Path,
    tmp_path: Path,
    artifacts: Path,
    head: str,
) -> tuple[dict[str, Any], dict[str, Any]]:
    """The gate job of pull request 7 (at `head`) on the downloaded parts, then `llm-eval
    gate` in one process on a new runner: their report.json files."""
    runner = tmp_path / "gate-runner"
    runner.mkdir()
    shutil.rmtree(repo / ".llm-eval", ignore_errors=True)
    download = named(document, "Download the parts")["with"]
    into = Path(resolve(download["path"], runner_context(runner)))
    into.mkdir()
    for artifact in artifacts.glob(download["pattern"]):  # merge-multiple: one folder
        for part in artifact.iterdir():
            shutil.copy2(part, into / part.name)
    github = FakeGitHub(repo=OWNER_REPO, users={TOKEN: "github-actions[bot]"})
    github.add_pull(7, head)
    with serve(github):
        run = run_gate_workflow(repo, source, action_bin, runner, github)
    assert run.outputs["verdict"] == "pass"
    assert run.failed_with is None
    shutil.rmtree(repo / ".llm-eval", ignore_errors=True)
    single = subprocess.run(
        [str(action_bin / "llm-eval"), "gate", "--out", str(tmp_path / "single")],
        cwd=repo,
        capture_output=True,
        text=True,
        check=False,
    )
    assert single.returncode == 0, single.stderr
    merged = json.loads(Path(run.outputs["report"]).read_text())
    return merged, json.loads((tmp_path / "single" / "report.json").read_text())
