"""The little the gate asks of git: the commit being evaluated."""

from __future__ import annotations

import subprocess


def head_commit() -> str | None:
    """The full sha of HEAD, or None outside a git checkout."""
    try:
        done = subprocess.run(
            ["git", "rev-parse", "HEAD"], capture_output=True, text=True, timeout=10, check=False
        )
    except (OSError, subprocess.TimeoutExpired):
        return None
    sha = done.stdout.strip()
    return sha if done.returncode == 0 and sha else None
