"""The one way llm-eval runs git, and the little the gate asks of it: the commit being
evaluated, and where it runs."""

from __future__ import annotations

import os
import subprocess


def git(*args: str, timeout: float | None = None) -> subprocess.CompletedProcess[str]:
    """Run git with these arguments, capturing its output as text; OSError when git
    cannot be run (not installed), TimeoutExpired past `timeout` seconds."""
    return subprocess.run(
        ["git", *args], capture_output=True, text=True, timeout=timeout, check=False
    )


def git_bytes(*args: str, stdin: bytes, timeout: float) -> subprocess.CompletedProcess[bytes]:
    """Run git with these arguments and `stdin`, capturing its output as bytes (object
    contents have sizes in bytes); OSError or TimeoutExpired as `git`."""
    return subprocess.run(
        ["git", *args], input=stdin, capture_output=True, timeout=timeout, check=False
    )


def _git_output(*args: str) -> str | None:
    """git's stdout, stripped; None outside a git checkout or when git fails."""
    try:
        done = git(*args, timeout=10)
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


def remote_refs(url: str, ref: str, timeout: float = 60) -> dict[str, str]:
    """`{ref name: commit}` of the refs whose name ends in `ref` at `url` (`git
    ls-remote`), and of an annotated tag's commit, as `refs/tags/REF^{}`.
    Git never prompts for credentials here. RemoteError says why git could not tell."""
    try:
        done = subprocess.run(
            ["git", "ls-remote", url, ref, ref + "^{}"],
            capture_output=True,
            text=True,
            timeout=timeout,
            check=False,
            env={**os.environ, "GIT_TERMINAL_PROMPT": "0"},
        )
    except (OSError, subprocess.TimeoutExpired) as exc:
        raise RemoteError(str(exc) or type(exc).__name__) from None
    if done.returncode != 0:
        said = [line.strip() for line in done.stderr.splitlines() if line.strip()]
        fatal = [line for line in said if line.startswith("fatal:")] or said  # git's first
        raise RemoteError(fatal[0] if fatal else f"git ls-remote exited {done.returncode}")
    pairs = (line.split("\t", 1) for line in done.stdout.splitlines() if "\t" in line)
    return {name: sha for sha, name in pairs}


class RemoteError(Exception):
    """git could not list a remote's refs: unreachable, not a repository, no access."""
