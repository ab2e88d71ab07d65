"""`llm-eval hook install` and `llm-eval hook uninstall`: the git pre-push check.

The hook goes where git looks for hooks (`core.hooksPath` when set, else
`.git/hooks`). A pre-push hook llm-eval did not write is never replaced without
`--force`, and never removed. Paths are relative to the repository root, where git
runs hooks and where the gate then runs.
"""

from __future__ import annotations

import sys
from dataclasses import dataclass
from pathlib import Path

from llm_eval.config import RetrieverConfig
from llm_eval.config_io import load_config
from llm_eval.errors import InputError
from llm_eval.gitinfo import git
from llm_eval.hook import is_ours, render_script
from llm_eval.retrievers import retriever_kind
from llm_eval.textio import write_atomic

WATCHED_FOLDERS = ("config/", "gold/")


@dataclass(frozen=True, slots=True)
class HookOutcome:
    """What the command prints."""

    text: str


def install(
    *,
    config_path: Path,
    criteria_path: Path,
    baseline_path: Path | None = None,
    watch: tuple[str, ...] = (),
    force: bool = False,
    each_commit: bool = False,
    python: str = sys.executable,
) -> HookOutcome:
    """Write the pre-push hook; refuse to replace one llm-eval did not write."""
    hook = _hook_path()
    root = Path(_git("rev-parse", "--show-toplevel"))
    if hook.exists() and not is_ours(_read(hook)) and not force:
        raise InputError(
            "a pre-push hook that llm-eval did not write is installed; pass --force to replace it",
            path=hook,
        )
    paths = watch or default_watch(root, config_path, criteria_path, baseline_path)
    options = [("--config", config_path.as_posix()), ("--criteria", criteria_path.as_posix())]
    if baseline_path is not None:
        options.append(("--baseline", baseline_path.as_posix()))
    script = render_script(Path(python).as_posix(), paths, options, each_commit=each_commit)
    write_atomic(hook, script)
    hook.chmod(hook.stat().st_mode | 0o111)
    what = (
        "on each pushed commit that changes"
        if each_commit
        else "on the tip of each pushed branch when the push changes"
    )
    return HookOutcome(
        f"Installed {hook}: runs `llm-eval gate` {what} "
        f"{', '.join(paths)}; `git push --no-verify` skips it once."
    )


def uninstall() -> HookOutcome:
    """Remove the pre-push hook if llm-eval wrote it."""
    hook = _hook_path()
    if not hook.exists():
        return HookOutcome(f"No pre-push hook at {hook}.")
    if not is_ours(_read(hook)):
        raise InputError("not written by llm-eval; leaving it in place", path=hook)
    hook.unlink()
    return HookOutcome(f"Removed {hook}.")


def default_watch(
    root: Path, config_path: Path, criteria_path: Path, baseline_path: Path | None
) -> tuple[str, ...]:
    """`config/`, `gold/`, and every file the gate reads that lies outside them,
    including the code of a `python` retriever and the file of a `run` retriever."""
    config = load_config(root / config_path)
    files = [
        config_path,
        criteria_path,
        *(Path(source.path) for source in config.gold),
        *(Path(source.qrels) for source in config.gold if source.qrels is not None),
        *([config.corpus] if config.corpus is not None else []),
        *([config.versions] if config.versions is not None else []),
        baseline_path or config.baseline,
        *(_retriever_files(config.retriever, root) if config.retriever is not None else ()),
    ]
    paths = list(WATCHED_FOLDERS)
    for file in files:
        name = file.as_posix()
        if name not in paths and not name.startswith(WATCHED_FOLDERS):
            paths.append(name)
    return tuple(paths)


def _retriever_files(retriever: RetrieverConfig, root: Path) -> list[Path]:
    """The files in the repository the retriever's answers depend on."""
    kind = retriever_kind(retriever.kind)
    return kind.depends_on(kind.record(retriever.settings), root)


def _hook_path() -> Path:
    """Where git runs the pre-push hook from (honours core.hooksPath)."""
    if _git("rev-parse", "--is-inside-work-tree") != "true":
        raise InputError("not inside a git working tree")
    return Path(_git("rev-parse", "--git-path", "hooks")) / "pre-push"


def _read(path: Path) -> str:
    return path.read_text(encoding="utf-8", errors="replace")


def _git(*args: str) -> str:
    """git's stdout, stripped; InputError with git's reason when it fails."""
    try:
        done = git(*args)
    except OSError as exc:
        raise InputError(f"cannot run git: {exc}") from None
    if done.returncode != 0:
        reason = done.stderr.strip().removeprefix("fatal: ") or f"git {args[0]} failed"
        raise InputError(reason)
    return done.stdout.strip()
