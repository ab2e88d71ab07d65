"""Where the report's links to the documentation go: `LLM_EVAL_DOCS_URL`, the action's
repository and ref, the repository and commit of a `git+` install (PEP 610's
`direct_url.json`, written here by a real pip install), or nowhere."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from llm_eval.docs_address import Docs, Installed, docs_address, github_repository
from llm_eval.installation_io import installed_source, parse_direct_url

SHA = "0123456789abcdef0123456789abcdef01234567"
FROM_GITHUB = Installed("https://github.com/acme/llm-eval.git", SHA, "v0.1.0")
SOURCES = f"https://github.com/acme/llm-eval/blob/{SHA}/docs/"


@pytest.mark.parametrize(
    ("environ", "installed", "docs"),
    [
        ({}, None, None),
        ({}, FROM_GITHUB, Docs(SOURCES, sources=True)),
        ({}, Installed("file:///tmp/llm-eval", SHA), None),
        ({}, Installed("https://gitlab.com/acme/llm-eval", SHA), None),
        (
            {"LLM_EVAL_DOCS_URL": "https://docs.example.org/x"},
            FROM_GITHUB,
            Docs("https://docs.example.org/x/"),
        ),
        ({"LLM_EVAL_DOCS_URL": " "}, FROM_GITHUB, None),
        (
            {"GITHUB_ACTION_REPOSITORY": "team/llm-eval", "GITHUB_ACTION_REF": "v2"},
            FROM_GITHUB,
            Docs("https://github.com/team/llm-eval/blob/v2/docs/", sources=True),
        ),
        (
            {
                "GITHUB_SERVER_URL": "https://ghe.example.com",
                "GITHUB_ACTION_REPOSITORY": "team/llm-eval",
                "GITHUB_ACTION_REF": SHA,
            },
            None,
            Docs(f"https://ghe.example.com/team/llm-eval/blob/{SHA}/docs/", sources=True),
        ),
        (
            {
                "GITHUB_ACTION_REPOSITORY": "",
                "GITHUB_ACTION_PATH": "/home/runner/work/_actions/team/llm-eval/" + SHA,
            },
            None,
            Docs(f"https://github.com/team/llm-eval/blob/{SHA}/docs/", sources=True),
        ),
        ({"GITHUB_ACTION_PATH": "/home/runner/work/rag/rag"}, None, None),  # uses: ./
    ],
)
def test_the_docs_address_comes_from_what_is_known_or_is_none(
    environ: dict[str, str], installed: Installed | None, docs: Docs | None
) -> None:
    assert docs_address(environ, installed) == docs


def test_a_page_of_a_site_has_its_anchor_and_a_source_page_is_the_markdown_file() -> None:
    site = Docs("https://docs.example.org/")
    assert (
        site.page("reference/metrics", "mrr") == "https://docs.example.org/reference/metrics/#mrr"
    )
    assert Docs(SOURCES, True).page("reference/metrics", "mrr") == SOURCES + "reference/metrics.md"


@pytest.mark.parametrize(
    ("url", "repository"),
    [
        ("https://github.com/acme/llm-eval", "acme/llm-eval"),
        ("https://github.com/acme/llm-eval.git", "acme/llm-eval"),
        ("git+https://github.com/acme/llm-eval.git", "acme/llm-eval"),
        ("https://github.com/acme/llm-eval/", "acme/llm-eval"),
        ("https://github.com/acme", None),
        ("https://github.com.evil.example/acme/llm-eval", None),
        ("ssh://git@github.com/acme/llm-eval.git", None),
        ("file:///srv/acme/llm-eval", None),
    ],
)
def test_github_repository(url: str, repository: str | None) -> None:
    assert github_repository(url) == repository


@pytest.mark.parametrize(
    ("record", "installed"),
    [
        (
            {"url": "https://github.com/a/b", "vcs_info": {"vcs": "git", "commit_id": SHA}},
            Installed("https://github.com/a/b", SHA),
        ),
        ({"url": "file:///work/llm-eval", "dir_info": {"editable": True}}, None),
        ({"url": "https://example.org/x.whl", "archive_info": {}}, None),
        ({"url": "https://hg.example/x", "vcs_info": {"vcs": "hg", "commit_id": SHA}}, None),
        ({"url": "https://github.com/a/b", "vcs_info": {"vcs": "git"}}, None),
        ([], None),
    ],
)
def test_parse_direct_url(record: object, installed: Installed | None) -> None:
    assert parse_direct_url(record) == installed


@pytest.fixture(scope="module")
def git_installed(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, str, Path]:
    """A tiny distribution in a git repository with a tag, installed by a real pip from
    `git+file://…@v1` into a folder: (the repository, its commit, the folder)."""
    root = tmp_path_factory.mktemp("installed")
    repo = root / "repo"
    (repo / "tiny").mkdir(parents=True)
    (repo / "tiny" / "__init__.py").write_text("")
    (repo / "pyproject.toml").write_text(
        '[build-system]\nrequires = ["setuptools"]\nbuild-backend = "setuptools.build_meta"\n'
        '[project]\nname = "tiny-dist"\nversion = "1.0"\n'
        '[tool.setuptools]\npackages = ["tiny"]\n'
    )
    ident = ["-c", "user.name=t", "-c", "user.email=t@example.org"]
    for args in (["init", "-q"], ["add", "-A"], [*ident, "commit", "-qm", "tiny"], ["tag", "v1"]):
        subprocess.run(["git", *args], cwd=repo, check=True)
    commit = subprocess.run(
        ["git", "rev-parse", "HEAD"], cwd=repo, check=True, capture_output=True, text=True
    ).stdout.strip()
    target = root / "site"
    subprocess.run(
        [
            sys.executable,
            "-m",
            "pip",
            "install",
            "--quiet",
            "--disable-pip-version-check",
            "--no-deps",
            "--target",
            str(target),
            f"git+{repo.as_uri()}@v1",
        ],
        check=True,
        capture_output=True,
    )
    return repo, commit, target


def test_a_git_install_records_its_repository_and_commit_and_a_local_one_links_nowhere(
    git_installed: tuple[Path, str, Path], monkeypatch: pytest.MonkeyPatch
) -> None:
    repo, commit, target = git_installed
    monkeypatch.syspath_prepend(str(target))
    installed = installed_source("tiny-dist")
    assert installed == Installed(repo.as_uri(), commit, "v1")
    # a file:// repository has no page a reader of a pull request could open
    assert docs_address({}, installed) is None
    assert installed_source("no-such-distribution") is None
