"""The little the gate asks of git: the commit being evaluated, and where it runs."""

from __future__ import annotations

import subprocess


def _git_output(*args: str) -> str | None:
    """git's stdout, stripped; None outside a git checkout or when git fails."""
    try:
        done = subprocess.run(
            ["git", *args], capture_output=True, text=True, timeout=10, check=False
        )
    except (OSError, subprocess.TimeoutExpired):
        return None
    return done.stdout.strip() if done.returncode == 0 else None


def head_commit() -> str | None:
    """The full sha of HEAD, or None outside a git checkout."""
    return _git_output("rev-parse", "HEAD") or None


def folder_in_repository() -> str | None:
    """The working directory relative to the repository root, `/`-terminated (`""` at
    the root), so that paths in a report can be linked from the repository's root;
    None outside a git checkout."""
    return _git_output("rev-parse", "--show-prefix")
