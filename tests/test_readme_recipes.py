"""The README's CI recipes show the files as they are.

Each fenced YAML snippet in the sections below names its file in a comment on its
first line. A file of this repository must be shown whole and unchanged; a file that
lives in the user's repository (`.pre-commit-config.yaml`) is checked against what it
refers to here.
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

import pytest
import yaml

REPO = Path(__file__).resolve().parents[1]
SECTIONS = ("Use in GitHub Actions", "Pre-push", "Refreshing the baseline")
NEXT_SECTION = "Data in this repository"


def section(title: str) -> str:
    """The text of a `## title` section, up to the next `## ` heading."""
    readme = (REPO / "README.md").read_text(encoding="utf-8")
    match = re.search(rf"^## {re.escape(title)}\n(.*?)(?=^## )", readme, re.M | re.S)
    assert match, f"README.md has no section '## {title}'"
    return match.group(1)


def yaml_snippets() -> list[tuple[str, str]]:
    """(file named on the first line, snippet text) for every YAML fence in the sections."""
    snippets = []
    for title in SECTIONS:
        for body in re.findall(r"^```yaml\n(.*?)^```$", section(title), re.M | re.S):
            first = body.splitlines()[0]
            assert first.startswith("# "), f"the snippet does not name its file: {first!r}"
            snippets.append((first[2:].strip(), body))
    return snippets


def test_the_sections_come_in_order_before_the_data_section() -> None:
    readme = (REPO / "README.md").read_text(encoding="utf-8")
    headings = re.findall(r"^## (.+)$", readme, re.M)
    at = headings.index(NEXT_SECTION)
    assert headings[at - len(SECTIONS) : at] == list(SECTIONS)


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
