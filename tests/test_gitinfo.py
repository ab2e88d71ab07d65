"""What the gate asks of git, in a real repository in tmp_path."""

from __future__ import annotations

import subprocess
from pathlib import Path

import pytest

from llm_eval.gitinfo import folder_in_repository, head_commit


def test_the_folder_of_the_gate_is_given_from_the_repository_root(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(tmp_path)
    assert folder_in_repository() is None  # not a checkout
    assert head_commit() is None
    subprocess.run(["git", "init", "-q", str(tmp_path)], check=True)
    assert folder_in_repository() == ""
    sub = tmp_path / "services" / "search"
    sub.mkdir(parents=True)
    monkeypatch.chdir(sub)
    assert folder_in_repository() == "services/search/"
