"""The git pre-push check: install and uninstall, and real pushes to a bare remote."""

from __future__ import annotations

import io
import json
import os
import re
import shlex
import shutil
import subprocess
import sys
from collections.abc import Iterator
from contextlib import redirect_stdout
from dataclasses import dataclass
from pathlib import Path

import pytest
import yaml
from conftest import Cli, copy_demo

from llm_eval.cli import main
from llm_eval.commands.hook import install as install_hook
from llm_eval.hook import (
    MARKER,
    PushedRef,
    is_ours,
    parse_push_lines,
    render_script,
    split_rev_list,
)

REPO = Path(__file__).resolve().parents[1]
ZERO = "0" * 40
A = "a" * 40
B = "b" * 40


def git_environment(home: Path) -> dict[str, str]:
    """The process environment with git configured from scratch: no user or system config."""
    config = home / "gitconfig"
    config.write_text(
        "[user]\n\tname = Tester\n\temail = tester@example.com\n"
        "[init]\n\tdefaultBranch = main\n[advice]\n\tdetachedHead = false\n",
        encoding="utf-8",
    )
    environ = {k: v for k, v in os.environ.items() if not k.startswith("GIT_")}
    return environ | {"GIT_CONFIG_GLOBAL": str(config), "GIT_CONFIG_NOSYSTEM": "1"}


def git(cwd: Path, environ: dict[str, str], *args: str) -> str:
    done = subprocess.run(
        ["git", *args], cwd=cwd, env=environ, capture_output=True, text=True, check=True
    )
    return done.stdout.strip()


# --- the pure parts -------------------------------------------------------------


@pytest.mark.parametrize(
    ("text", "refs"),
    [
        (
            f"refs/heads/main {A} refs/heads/main {B}\n",
            (PushedRef("refs/heads/main", A, "refs/heads/main", B),),
        ),
        (
            f"refs/heads/new {A} refs/heads/new {ZERO}\n\n",
            (PushedRef("refs/heads/new", A, "refs/heads/new", ZERO),),
        ),
        (
            f"(delete) {ZERO} refs/heads/old {B}\n",
            (PushedRef("(delete)", ZERO, "refs/heads/old", B),),
        ),
        ("", ()),
        ("refs/heads/x only-three-fields\n", ()),
    ],
)
def test_parse_push_lines(text: str, refs: tuple[PushedRef, ...]) -> None:
    assert parse_push_lines(text) == refs


@pytest.mark.parametrize(
    ("ref", "deletes", "creates"),
    [
        (PushedRef("refs/heads/x", A, "refs/heads/x", B), False, False),
        (PushedRef("refs/heads/x", A, "refs/heads/x", ZERO), False, True),
        (PushedRef("(delete)", ZERO, "refs/heads/x", B), True, False),
        (PushedRef("refs/heads/x", "f" * 64, "refs/heads/x", "0" * 64), False, True),
    ],
)
def test_a_pushed_ref_knows_deletion_and_creation(
    ref: PushedRef, deletes: bool, creates: bool
) -> None:
    assert (ref.deletes, ref.creates) == (deletes, creates)


def test_split_rev_list_separates_new_commits_from_the_boundary() -> None:
    assert split_rev_list(f"{A}\n{B}\n-{'c' * 40}\n") == ((A, B), ("c" * 40,))
    assert split_rev_list("") == ((), ())


def test_the_hook_script_quotes_every_path_and_is_valid_sh(tmp_path: Path) -> None:
    script = render_script(
        "/opt/my env/bin/python",
        ["config/", "data/my gold.jsonl"],
        [("--config", "config/llm-eval.yaml"), ("--criteria", "it's.yaml")],
    )
    assert script.startswith("#!/bin/sh\n" + MARKER + "\n")
    assert "exec '/opt/my env/bin/python' -m llm_eval.hook \"$@\" \\\n" in script
    assert "--watch 'data/my gold.jsonl'" in script
    assert "--criteria 'it'\"'\"'s.yaml'" in script
    assert is_ours(script)
    assert not is_ours("#!/bin/sh\nexec pre-commit hook-impl\n")
    (tmp_path / "pre-push").write_text(script, encoding="utf-8")
    assert subprocess.run(["sh", "-n", str(tmp_path / "pre-push")], check=False).returncode == 0


# --- install and uninstall ----------------------------------------------------------


@pytest.fixture
def repo(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """An empty git repository with the demo's config, as the working directory."""
    for name in [name for name in os.environ if name.startswith("GIT_")]:
        monkeypatch.delenv(name)
    for name, value in git_environment(tmp_path).items():
        monkeypatch.setenv(name, value)
    root = tmp_path / "repo"
    shutil.copytree(REPO / "config", root / "config")
    subprocess.run(["git", "init", "-q", str(root)], check=True)
    monkeypatch.chdir(root)
    return root


def test_install_writes_an_executable_hook_running_this_python(repo: Path, cli: Cli) -> None:
    (repo / "config" / "llm-eval.yaml").write_text(
        "gold:\n  - {path: data/queries.jsonl, tier: A}\ncorpus: gold/corpus.jsonl\n"
        "retriever: {kind: bm25}\n",
        encoding="utf-8",
    )
    code, out, _ = cli("hook", "install")
    assert code == 0
    hook = repo / ".git" / "hooks" / "pre-push"
    assert out == (
        "Installed .git/hooks/pre-push: runs `llm-eval gate` on the tip of each pushed branch "
        "when the push changes config/, gold/, data/queries.jsonl; `git push --no-verify` "
        "skips it once.\n"
    )
    assert os.access(hook, os.X_OK)
    script = hook.read_text(encoding="utf-8")
    assert f"exec {Path(sys.executable).as_posix()} -m llm_eval.hook" in script
    assert re.findall(r"--watch (\S+)", script) == ["config/", "gold/", "data/queries.jsonl"]
    assert "--config config/llm-eval.yaml \\\n    --criteria config/ship-criteria.yaml\n" in script


@pytest.mark.parametrize(
    ("retriever", "files", "watched"),
    [
        (
            "{kind: python, target: 'ranker.api:search', python_path: [src]}",
            ["src/ranker/__init__.py", "src/ranker/api.py"],
            ["src/ranker"],
        ),
        ("{kind: python, target: 'single:search'}", ["single.py"], ["single.py"]),
        ("{kind: run, path: runs/today.jsonl}", [], ["runs/today.jsonl"]),
        ("{kind: http, url: 'http://127.0.0.1:9/search'}", [], []),
    ],
)
def test_install_watches_what_the_retriever_depends_on(
    repo: Path, retriever: str, files: list[str], watched: list[str], cli: Cli
) -> None:
    for name in files:
        (repo / name).parent.mkdir(parents=True, exist_ok=True)
        (repo / name).write_text("", encoding="utf-8")
    (repo / "config" / "llm-eval.yaml").write_text(
        f"gold:\n  - {{path: gold/q.jsonl, tier: A}}\nretriever: {retriever}\n",
        encoding="utf-8",
    )
    assert cli("hook", "install")[0] == 0
    script = (repo / ".git" / "hooks" / "pre-push").read_text(encoding="utf-8")
    assert re.findall(r"--watch (\S+)", script) == ["config/", "gold/", *watched]


def test_install_writes_the_given_watch_paths_and_options(repo: Path, cli: Cli) -> None:
    code, _, _ = cli(
        "hook", "install", "--watch", "src/retriever/", "--watch", "gold/",
        "--config", "config/other.yaml", "--baseline", "gold/b.json",
    )  # fmt: skip
    assert code == 0
    script = (repo / ".git" / "hooks" / "pre-push").read_text(encoding="utf-8")
    assert re.findall(r"--watch (\S+)", script) == ["src/retriever/", "gold/"]
    assert "--config config/other.yaml" in script
    assert "--baseline gold/b.json" in script


def test_install_honours_core_hooks_path(repo: Path, cli: Cli) -> None:
    subprocess.run(["git", "config", "core.hooksPath", "tools/hooks"], check=True)
    assert cli("hook", "install")[0] == 0
    assert is_ours((repo / "tools" / "hooks" / "pre-push").read_text(encoding="utf-8"))
    assert not (repo / ".git" / "hooks" / "pre-push").exists()


def test_install_refuses_a_hook_it_did_not_write_unless_forced(repo: Path, cli: Cli) -> None:
    hook = repo / ".git" / "hooks" / "pre-push"
    hook.write_text("#!/bin/sh\nexec my-own-checks\n", encoding="utf-8")
    code, _, err = cli("hook", "install")
    assert code == 3
    assert err == (
        "llm-eval: error: .git/hooks/pre-push: a pre-push hook that llm-eval did not write "
        "is installed; pass --force to replace it\n"
    )
    assert hook.read_text(encoding="utf-8") == "#!/bin/sh\nexec my-own-checks\n"
    assert cli("hook", "install", "--force")[0] == 0
    assert is_ours(hook.read_text(encoding="utf-8"))
    assert cli("hook", "install")[0] == 0, "its own hook is replaced without --force"


def test_a_hook_whose_python_is_gone_names_the_command_that_mends_it(
    repo: Path, tmp_path: Path, cli: Cli
) -> None:
    """A moved virtualenv: the hook refuses the push and names a command; that command,
    as written, points the hook at the Python now running llm-eval."""
    gone = tmp_path / "moved-venv" / "bin" / "python"
    install_hook(
        config_path=Path("config/llm-eval.yaml"),
        criteria_path=Path("config/ship-criteria.yaml"),
        python=str(gone),
    )
    hook = repo / ".git" / "hooks" / "pre-push"
    done = subprocess.run([str(hook), "origin"], capture_output=True, text=True, check=False)
    assert done.returncode == 1
    said = re.fullmatch(r"llm-eval pre-push: (\S+) is gone; run `([^`]+)` again\n", done.stderr)
    assert said is not None, done.stderr
    assert said[1] == gone.as_posix()
    command = shlex.split(said[2])
    assert command[0] == "llm-eval"
    # The hook there is llm-eval's own: no --force, which would replace anyone's.
    assert "--force" not in command
    assert cli(*command[1:])[0] == 0
    assert f"exec {Path(sys.executable).as_posix()} -m llm_eval.hook" in hook.read_text()


def test_uninstall_removes_only_its_own_hook(repo: Path, cli: Cli) -> None:
    hook = repo / ".git" / "hooks" / "pre-push"
    assert cli("hook", "uninstall")[:2] == (0, "No pre-push hook at .git/hooks/pre-push.\n")
    hook.write_text("#!/bin/sh\nexit 0\n", encoding="utf-8")
    code, _, err = cli("hook", "uninstall")
    assert code == 3
    assert err == (
        "llm-eval: error: .git/hooks/pre-push: not written by llm-eval; leaving it in place\n"
    )
    assert hook.exists()
    assert cli("hook", "install", "--force")[0] == 0
    code, out, _ = cli("hook", "uninstall")
    assert code == 0
    assert out.endswith("Removed .git/hooks/pre-push.\n")
    assert not hook.exists()


def test_install_outside_a_repository_exits_3(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, cli: Cli
) -> None:
    monkeypatch.setenv("GIT_CEILING_DIRECTORIES", str(tmp_path))
    (tmp_path / "work").mkdir()
    monkeypatch.chdir(tmp_path / "work")
    code, _, err = cli("hook", "install")
    assert code == 3
    assert err.startswith("llm-eval: error: not a git repository")


# --- real pushes ----------------------------------------------------------------


@dataclass(frozen=True)
class Project:
    """A clone of the demo with the hook installed, pushing to a bare remote."""

    root: Path
    environ: dict[str, str]
    first_push: str

    def git(self, *args: str) -> str:
        return git(self.root, self.environ, *args)

    def push(self, *args: str) -> subprocess.CompletedProcess[str]:
        return subprocess.run(
            ["git", "push", "origin", *args],
            cwd=self.root,
            env=self.environ,
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
            text=True,
            check=False,
        )

    def remote_sha(self, branch: str) -> str:
        line = self.git("ls-remote", "origin", f"refs/heads/{branch}")
        return line.split()[0] if line else ""

    def commit(self, path: str, text: str, message: str) -> None:
        file = self.root / path
        file.parent.mkdir(parents=True, exist_ok=True)
        file.write_text(text, encoding="utf-8")
        self.git("add", path)
        self.git("commit", "-q", "-m", message)


def install(project: Project, *options: str) -> str:
    """What `llm-eval hook install` printed, run in this process in the project with its
    git environment: the hook it writes is what the pushes test."""
    git_only = {name: value for name, value in project.environ.items() if name.startswith("GIT_")}
    with pytest.MonkeyPatch.context() as patch, redirect_stdout(io.StringIO()) as printed:
        for name in [name for name in os.environ if name.startswith("GIT_")]:
            patch.delenv(name)
        for name, value in git_only.items():
            patch.setenv(name, value)
        patch.chdir(project.root)
        assert main(["hook", "install", *options]) == 0
    return printed.getvalue()


@pytest.fixture(scope="module")
def demo(tmp_path_factory: pytest.TempPathFactory, demo_indexes: Path) -> Project:
    """The demo's config/ and gold/ (with its baseline) in a repository whose main is
    pushed, through the hook, to an empty bare remote; the hook's gate finds the demo's
    BM25 indexes in its cache."""
    home = tmp_path_factory.mktemp("hook")
    environ = git_environment(home)
    root, remote = copy_demo(home / "project"), home / "remote.git"
    (root / ".gitignore").write_text(".llm-eval/\n", encoding="utf-8")
    for args in (["init", "-q", str(root)], ["init", "-q", "--bare", str(remote)]):
        git(home, environ, *args)
    git(root, environ, "add", "-A")
    git(root, environ, "commit", "-q", "-m", "The demo")
    git(root, environ, "remote", "add", "origin", str(remote))
    shutil.copytree(demo_indexes, root / ".llm-eval" / "pre-push" / "cache")
    project = Project(root, environ, "")
    install(project)
    first = project.push("main")
    assert first.returncode == 0, first.stdout
    return Project(root, environ, first.stdout)


@pytest.fixture
def project(demo: Project) -> Iterator[Project]:
    """The demo project, back on a clean main after the test."""
    yield demo
    demo.git("switch", "-q", "--force", "main")


def test_the_first_push_to_an_empty_remote_runs_the_gate(demo: Project) -> None:
    assert "llm-eval pre-push: refs/heads/main shares no commit with origin; running" in (
        demo.first_push
    )
    assert "llm-eval gate: PASS" in demo.first_push


def test_a_push_that_changes_no_watched_path_skips_the_gate(project: Project) -> None:
    project.git("switch", "-q", "-c", "docs", "main")
    project.commit("docs/notes.md", "Notes.\n", "Notes")
    pushed = project.push("docs")
    assert pushed.returncode == 0, pushed.stdout
    assert "llm-eval pre-push: nothing under config/, gold/ changed; gate skipped." in pushed.stdout
    assert "llm-eval gate" not in pushed.stdout
    assert project.remote_sha("docs") == project.git("rev-parse", "docs")


def mistune(project: Project, branch: str) -> tuple[str, str]:
    """A branch pushed once (the gate skipped), then a commit that mistunes BM25 (recall@5
    below its floor); the remote's commit and the config as it was."""
    project.git("switch", "-q", "-c", branch, "main")
    project.commit("NOTES", "tuning ahead\n", "Start tuning")
    assert "gate skipped" in project.push(branch).stdout
    config = (project.root / "config" / "llm-eval.yaml").read_text(encoding="utf-8")
    mistuned = config.replace("k1: 0.9", "k1: 3.0").replace("b: 0.4", "b: 1.0")
    assert mistuned != config
    project.commit("config/llm-eval.yaml", mistuned, "Tune BM25")
    return project.remote_sha(branch), config


def test_a_push_with_a_regression_is_refused(project: Project) -> None:
    before, _ = mistune(project, "tuning")
    pushed = project.push("tuning")
    assert pushed.returncode != 0
    sha = project.git("rev-parse", "tuning")[:12]
    assert f"pre-push: refs/heads/tuning changes config/, gold/; running the gate on {sha}." in (
        pushed.stdout
    )
    assert "✗ recall@5 (tier A) is 33.1%, below the floor 38.0%" in pushed.stdout
    assert "llm-eval pre-push: push refused (the gate exited 1 on refs/heads/tuning)." in (
        pushed.stdout
    )
    assert project.remote_sha("tuning") == before
    # The reports are where the gate's last line says, after the worktree is gone.
    said = next(line for line in pushed.stdout.splitlines() if line.startswith("Report: "))
    markdown = Path(said.removeprefix("Report: ").removesuffix(" (report.json beside it)"))
    assert markdown == project.root / ".llm-eval" / "pre-push" / "report.md"
    assert markdown.read_text(encoding="utf-8").startswith("## ❌ Retrieval quality")
    report = json.loads(markdown.with_name("report.json").read_text(encoding="utf-8"))
    assert report["verdict"] == "fail"
    # The push's output names the first queries that lost and gained their hit.
    changes = report["changes"]
    assert changes["hit_to_miss_count"] > 5 and changes["miss_to_hit_count"] > 5
    lost = ", ".join(c["query_id"] for c in changes["hit_to_miss"][:5])
    gained = ", ".join(c["query_id"] for c in changes["miss_to_hit"][:5])
    assert (
        f"  lost: {lost} and {changes['hit_to_miss_count'] - 5} more\n"
        f"  gained: {gained} and {changes['miss_to_hit_count'] - 5} more\n"
        "  See report.md for their questions and ranks before and after.\n"
    ) in pushed.stdout


def test_a_watched_change_without_regression_goes_through(project: Project) -> None:
    project.git("switch", "-q", "-c", "comment", "main")
    config = (project.root / "config" / "llm-eval.yaml").read_text(encoding="utf-8")
    project.commit("config/llm-eval.yaml", config + "# reviewed\n", "Note the review")
    pushed = project.push("comment")
    assert pushed.returncode == 0, pushed.stdout
    assert "llm-eval pre-push: refs/heads/comment changes config/, gold/; running the gate on" in (
        pushed.stdout
    )
    assert "llm-eval gate: PASS" in pushed.stdout
    assert project.remote_sha("comment") == project.git("rev-parse", "comment")


def test_a_gate_that_crashes_refuses_the_push(project: Project, tmp_path: Path) -> None:
    """Exit 5 (a bug) proves nothing about the change: the push must not go through."""
    crash = tmp_path / "crash"
    crash.mkdir()
    (crash / "sitecustomize.py").write_text(
        "import llm_eval.commands.gate as gate\n"
        "def run_gate(**options):\n"
        "    raise RuntimeError('a bug in the gate')\n"
        "gate.run_gate = run_gate\n",
        encoding="utf-8",
    )
    project.git("switch", "-q", "-c", "crashing", "main")
    config = (project.root / "config" / "llm-eval.yaml").read_text(encoding="utf-8")
    project.commit("config/llm-eval.yaml", config + "# crash\n", "Trigger the gate")
    before = project.remote_sha("crashing")
    pushed = subprocess.run(
        ["git", "push", "origin", "crashing"],
        cwd=project.root,
        env={**project.environ, "PYTHONPATH": str(crash)},
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
        check=False,
    )
    assert pushed.returncode != 0
    assert "RuntimeError: a bug in the gate" in pushed.stdout
    assert "llm-eval pre-push: push refused (the gate exited 5 on refs/heads/crashing)." in (
        pushed.stdout
    )
    assert project.remote_sha("crashing") == before


def test_a_broken_commit_is_refused_though_the_working_tree_is_fixed(project: Project) -> None:
    """The remote receives the commit, not the working tree: the gate checks the commit."""
    project.git("switch", "-q", "-c", "broken-corpus", "main")
    corpus = project.root / "gold" / "corpus.jsonl"
    good = corpus.read_text(encoding="utf-8")
    project.commit("gold/corpus.jsonl", good + "{not json\n", "Break the corpus")
    corpus.write_text(good, encoding="utf-8")  # fixed, but not committed
    before = project.remote_sha("broken-corpus")
    pushed = project.push("broken-corpus")
    assert pushed.returncode != 0, pushed.stdout
    assert "push refused (the gate exited 3 on refs/heads/broken-corpus)" in pushed.stdout
    assert project.remote_sha("broken-corpus") == before
    assert project.git("worktree", "list").count("\n") == 0  # the temporary one is gone


def test_a_gold_label_missing_from_the_corpus_refuses_the_push(project: Project) -> None:
    project.git("switch", "-q", "-c", "typo", "main")
    gold = project.root / "gold" / "python-docs-B.jsonl"
    lines = gold.read_text(encoding="utf-8").splitlines()
    first = json.loads(lines[0])
    first["relevant"] = {"dotenv.multiline-value#0": 1}
    project.commit(
        "gold/python-docs-B.jsonl", "\n".join([json.dumps(first), *lines[1:]]) + "\n", "Label"
    )
    before = project.remote_sha("typo")
    pushed = project.push("typo")
    assert pushed.returncode != 0, pushed.stdout
    assert (
        "llm-eval: error: gold/python-docs-B.jsonl:1: relevant.dotenv.multiline-value#0: "
        "document 'dotenv.multiline-value#0' is not in the corpus gold/corpus.jsonl (when the "
        "retriever's ids are not the corpus's, say so with `labels_in_corpus: off` in "
        "config/llm-eval.yaml)\n"
    ) in pushed.stdout
    assert "push refused (the gate exited 3 on refs/heads/typo)" in pushed.stdout
    assert project.remote_sha("typo") == before


def test_a_clean_commit_goes_through_though_the_working_tree_is_broken(
    project: Project,
) -> None:
    project.git("switch", "-q", "-c", "clean-commit", "main")
    config = project.root / "config" / "llm-eval.yaml"
    project.commit("config/llm-eval.yaml", config.read_text(encoding="utf-8") + "# a\n", "A")
    config.write_text("gold: [\n", encoding="utf-8")  # broken, and not committed
    pushed = project.push("clean-commit")
    assert pushed.returncode == 0, pushed.stdout
    assert "llm-eval gate: PASS" in pushed.stdout
    assert project.remote_sha("clean-commit") == project.git("rev-parse", "clean-commit")


def test_a_mistuned_commit_pushed_with_its_revert_is_caught_only_with_each_commit(
    project: Project,
) -> None:
    """By default the tip of each pushed branch is gated, so a mistake undone before the
    push is not seen; `--each-commit` gates every pushed commit touching a watched path,
    oldest first, and refuses the push at the mistuned one."""
    before, config = mistune(project, "tune-and-revert")
    project.commit("README", "notes\n", "Unrelated")
    project.commit("config/llm-eval.yaml", config, "Revert the tuning")

    tip_only = project.push("--dry-run", "tune-and-revert")
    assert tip_only.returncode == 0, tip_only.stdout
    assert "nothing under config/, gold/ changed; gate skipped." in tip_only.stdout

    said = install(project, "--force", "--each-commit")
    assert "on each pushed commit that changes config/, gold/" in said
    try:
        pushed = project.push("tune-and-revert")
    finally:
        install(project, "--force")
    assert pushed.returncode != 0, pushed.stdout
    mistuned_sha = project.git("rev-parse", "tune-and-revert~2")[:12]
    assert (
        "refs/heads/tune-and-revert changes config/, gold/ in 2 of 3 pushed commits; "
        f"running the gate on {mistuned_sha} (Tune BM25)." in pushed.stdout
    )
    assert "✗ recall@5 (tier A) is 33.1%, below the floor 38.0%" in pushed.stdout
    assert (
        f"push refused (the gate exited 1 on {mistuned_sha} of refs/heads/tune-and-revert)"
        in pushed.stdout
    )
    assert "(Revert the tuning)" not in pushed.stdout  # stopped at the first refusal
    assert project.remote_sha("tune-and-revert") == before


def test_each_commit_gates_every_touching_commit_and_lets_a_clean_series_through(
    project: Project,
) -> None:
    project.git("switch", "-q", "-c", "series", "main")
    project.commit("NOTES", "series\n", "Start")
    assert project.push("series").returncode == 0
    config = (project.root / "config" / "llm-eval.yaml").read_text(encoding="utf-8")
    project.commit("config/llm-eval.yaml", config + "# one\n", "One")
    project.commit("docs/x.md", "x\n", "Docs")
    project.commit("config/llm-eval.yaml", config + "# one\n# two\n", "Two")
    install(project, "--force", "--each-commit")
    try:
        pushed = project.push("series")
    finally:
        install(project, "--force")
    assert pushed.returncode == 0, pushed.stdout
    assert pushed.stdout.count("llm-eval gate: PASS") == 2
    assert "in 2 of 3 pushed commits; running the gate on" in pushed.stdout
    assert "(One)." in pushed.stdout and "(Two)." in pushed.stdout
    assert "(Docs)" not in pushed.stdout
    assert project.remote_sha("series") == project.git("rev-parse", "series")


def test_deleting_a_remote_branch_skips_the_gate(project: Project) -> None:
    project.git("switch", "-q", "-c", "short-lived", "main")
    project.commit("TODO", "x\n", "Todo")
    assert project.push("short-lived").returncode == 0
    pushed = project.push("--delete", "short-lived")
    assert pushed.returncode == 0, pushed.stdout
    assert "gate skipped" in pushed.stdout
    assert project.remote_sha("short-lived") == ""


# --- pre-commit -------------------------------------------------------------------


def test_the_pre_commit_hook_runs_the_gate_before_a_push_touching_config_or_gold() -> None:
    (hook,) = yaml.safe_load((REPO / ".pre-commit-hooks.yaml").read_text(encoding="utf-8"))
    assert hook["id"] == "llm-eval-gate"
    assert hook["entry"] == "llm-eval gate"
    assert hook["language"] == "python"
    assert hook["pass_filenames"] is False
    assert hook["stages"] == ["pre-push"]
    files = re.compile(hook["files"])
    assert files.search("config/llm-eval.yaml")
    assert files.search("gold/python-docs-A.jsonl")
    assert not files.search("README.md")
    assert not files.search("src/config/app.py")
