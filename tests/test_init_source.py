"""Where `llm-eval init` points the workflows: the commit this llm-eval was installed
from, or `--source` with a tag or branch resolved to its commit by `git ls-remote`, or
refused with the reason. github.com is a bare repository here: git's own
`url.<base>.insteadOf` sends `https://github.com/` to a folder, as a mirror would."""

from __future__ import annotations

import subprocess
from pathlib import Path

import pytest
from conftest import Cli

from llm_eval.commands.init import DEFAULT_SOURCE, default_source
from llm_eval.docs_address import Installed

SHA = "0123456789abcdef0123456789abcdef01234567"


@pytest.mark.parametrize(
    ("installed", "source"),
    [
        (Installed("https://github.com/acme/llm-eval.git", SHA, "v0.1.0"), f"acme/llm-eval@{SHA}"),
        (Installed("https://github.com/acme/llm-eval", SHA), f"acme/llm-eval@{SHA}"),
        (Installed("file:///srv/llm-eval", SHA), DEFAULT_SOURCE),
        (Installed("https://github.com/acme/llm-eval", "v0.1.0"), DEFAULT_SOURCE),
        (None, DEFAULT_SOURCE),
    ],
)
def test_the_default_source_is_the_github_commit_installed_from(
    installed: Installed | None, source: str
) -> None:
    assert default_source(installed) == source


def git(cwd: Path, *args: str) -> str:
    done = subprocess.run(
        ["git", "-c", "user.name=t", "-c", "user.email=t@example.org", *args],
        cwd=cwd,
        capture_output=True,
        text=True,
        check=True,
    )
    return done.stdout.strip()


@pytest.fixture(scope="module")
def github(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, dict[str, str]]:
    """`acme/llm-eval` as a bare repository under a folder standing in for github.com:
    a lightweight tag v0.1.0 on the first commit, an annotated tag v0.2.0 and the branch
    main on the second. Returns the folder and {ref: commit}."""
    root = tmp_path_factory.mktemp("github")
    work = root / "work"
    work.mkdir()
    git(work, "init", "-q", "-b", "main")
    (work / "README").write_text("one\n")
    git(work, "add", "-A")
    git(work, "commit", "-qm", "one")
    first = git(work, "rev-parse", "HEAD")
    git(work, "tag", "v0.1.0")
    (work / "README").write_text("two\n")
    git(work, "commit", "-qam", "two")
    second = git(work, "rev-parse", "HEAD")
    git(work, "tag", "-a", "v0.2.0", "-m", "v0.2.0")
    (root / "acme").mkdir()
    git(root, "clone", "-q", "--bare", str(work), str(root / "acme" / "llm-eval"))
    return root, {"v0.1.0": first, "v0.2.0": second, "main": second}


@pytest.fixture
def project(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, github: tuple[Path, dict[str, str]]
) -> Path:
    """An empty git repository, the working directory, with github.com sent to `github`."""
    monkeypatch.setenv("GIT_CONFIG_COUNT", "1")
    monkeypatch.setenv("GIT_CONFIG_KEY_0", f"url.{github[0].as_uri()}/.insteadOf")
    monkeypatch.setenv("GIT_CONFIG_VALUE_0", "https://github.com/")
    git(tmp_path, "init", "-q")
    monkeypatch.chdir(tmp_path)
    return tmp_path


@pytest.mark.parametrize(
    ("ref", "kind"), [("v0.2.0", "tag"), ("v0.1.0", "tag"), ("main", "branch")]
)
def test_a_tag_or_branch_is_resolved_to_the_commit_the_workflows_pin(
    project: Path, cli: Cli, github: tuple[Path, dict[str, str]], ref: str, kind: str
) -> None:
    commit = github[1][ref]
    code, out, err = cli("init", "--source", f"acme/llm-eval@{ref}")
    assert code == 0, err
    said = " ".join(out.split())
    assert (
        f"--source acme/llm-eval@{ref}: {kind} {ref} is commit {commit}; the workflows pin it."
        in said
    )
    gate = (project / ".github" / "workflows" / "retrieval-gate.yml").read_text()
    assert f"uses: acme/llm-eval@{commit}\n" in gate
    comment = (project / ".github" / "workflows" / "retrieval-gate-comment.yml").read_text()
    assert f'"llm-eval-ci @ git+https://github.com/acme/llm-eval.git@{commit}"' in comment
    assert f"@{ref}" not in gate + comment


def test_a_ref_github_does_not_have_is_refused_and_nothing_is_written(
    project: Path, cli: Cli
) -> None:
    code, out, err = cli("init", "--source", "acme/llm-eval@v9")
    assert (code, out) == (3, "")
    assert err == (
        "llm-eval: error: --source acme/llm-eval@v9: the workflows pin a full commit sha, and "
        "'v9' is not one, nor a tag or branch of https://github.com/acme/llm-eval: give "
        "--source acme/llm-eval@<full commit sha>\n"
    )
    assert sorted(p.name for p in project.iterdir()) == [".git"]


def test_a_ref_that_cannot_be_looked_up_is_refused_with_gits_reason(
    project: Path, cli: Cli, github: tuple[Path, dict[str, str]]
) -> None:
    code, _, err = cli("init", "--source", "nobody/nothing@v0.1.0")
    assert code == 3
    where = github[0] / "nobody" / "nothing"
    assert err == (
        "llm-eval: error: --source nobody/nothing@v0.1.0: the workflows pin a full commit "
        "sha, and 'v0.1.0' is not one; it could not be resolved (git ls-remote "
        f"https://github.com/nobody/nothing: fatal: '{where}' does not appear to be a git "
        "repository): give --source nobody/nothing@<full commit sha>\n"
    )
    assert sorted(p.name for p in project.iterdir()) == [".git"]


def test_a_full_commit_is_taken_as_given_without_asking_github(project: Path, cli: Cli) -> None:
    code, out, err = cli("init", "--source", f"nobody/nothing@{SHA}")
    assert code == 0, err
    gate = (project / ".github" / "workflows" / "retrieval-gate.yml").read_text()
    assert f"uses: nobody/nothing@{SHA}\n" in gate
    assert "is commit" not in out
