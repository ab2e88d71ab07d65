"""The CI recipes of the how-to guides show the files as they are.

Each fenced YAML snippet in the pages below names its file in a comment on its first
line. A file of this repository must be shown whole and unchanged; a file that lives in
the user's repository (`.pre-commit-config.yaml`) is checked against what it refers to
here.
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

import pytest
import yaml

REPO = Path(__file__).resolve().parents[2]
PAGES = ("how-to/github-actions.md", "how-to/pre-push.md", "how-to/baseline-refresh.md")


def page(name: str) -> str:
    """The text of a documentation page under docs/."""
    return (REPO / "docs" / name).read_text(encoding="utf-8")


def yaml_snippets() -> list[tuple[str, str]]:
    """(file named on the first line, snippet text) for every YAML fence in the pages."""
    snippets = []
    for name in PAGES:
        for body in re.findall(r"^```yaml\n(.*?)^```$", page(name), re.M | re.S):
            first = body.splitlines()[0]
            assert first.startswith("# "), f"the snippet does not name its file: {first!r}"
            snippets.append((first[2:].strip(), body))
    return snippets


def test_the_pages_are_how_to_guides_of_the_site() -> None:
    nav = yaml.safe_load((REPO / "mkdocs.yml").read_text(encoding="utf-8"))["nav"]
    (guides,) = [section["How-to guides"] for section in nav if "How-to guides" in section]
    listed = [path for entry in guides for path in entry.values()]
    assert [name for name in listed if name in PAGES] == list(PAGES)


def test_the_recipes_show_every_workflow_of_a_pull_request_and_the_refresh() -> None:
    assert [name for name, _ in yaml_snippets()] == [
        ".github/workflows/retrieval-gate.yml",
        ".github/workflows/retrieval-gate-comment.yml",
        ".pre-commit-config.yaml",
        ".github/workflows/baseline-refresh.yml",
    ]


@pytest.mark.parametrize(
    ("name", "snippet"),
    [
        pytest.param(name, body, id=name)
        for name, body in yaml_snippets()
        if (REPO / name).is_file()
    ],
)
def test_a_snippet_is_the_file_it_names(name: str, snippet: str) -> None:
    assert snippet == (REPO / name).read_text(encoding="utf-8")


def test_the_pre_commit_snippet_uses_the_hook_this_repository_defines() -> None:
    (snippet,) = [body for name, body in yaml_snippets() if name == ".pre-commit-config.yaml"]
    config: dict[str, Any] = yaml.safe_load(snippet)
    (repo,) = config["repos"]
    manifest = yaml.safe_load((REPO / ".pre-commit-hooks.yaml").read_text(encoding="utf-8"))
    defined = {hook["id"]: hook for hook in manifest}
    for hook in repo["hooks"]:
        assert hook["id"] in defined
        assert hook["stages"] == defined[hook["id"]]["stages"] == ["pre-push"]
