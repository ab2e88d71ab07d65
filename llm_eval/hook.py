"""The git pre-push check: run the gate when a push changes the watched paths.

`llm-eval hook install` writes a small shell script into the hooks folder that runs
`python -m llm_eval.hook` with the interpreter that installed it, so it works inside
a virtualenv. Git passes the remote's name and URL as arguments and one line per
pushed ref on stdin, `<local ref> <local sha> <remote ref> <remote sha>`, with a sha
of zeros for a ref that does not exist on that side. What changed is the difference
between the trees of the remote's commit and the one pushed, limited to the watched
paths (git pathspecs); for a ref new on the remote, between the pushed commit and
the commits it builds on that the remote already has. Nothing changed there: the
gate is skipped. Otherwise the gate runs on the commit at the tip of each pushed ref
or, with `--each-commit`, on every pushed commit that itself changes a watched path
(oldest first, stopping at the first refusal), each checked out into a temporary
`git worktree` (removed afterwards), never on the working tree, whose uncommitted
edits are not what the remote receives. Its reports are
written to `.llm-eval/pre-push/` in the working tree, where the gate's last line says
they are, and stay there after the worktree is gone. This module only starts
`git` and the gate; it imports nothing heavy, so a skipped check costs one
interpreter start and a git call or two.
"""

from __future__ import annotations

import argparse
import shlex
import subprocess
import sys
import tempfile
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

from llm_eval.errors import ExitCode
from llm_eval.gitinfo import git as _git
from llm_eval.wording.english import plural

MARKER = "# llm-eval pre-push check, written by `llm-eval hook install`"
"""The line by which install and uninstall recognise a hook llm-eval wrote."""

ZERO_SHA = frozenset({"0" * 40, "0" * 64})
BLOCKING_EXIT_CODES = frozenset({ExitCode.GATE_FAILED, ExitCode.BAD_INPUT, ExitCode.INTERNAL})
"""The gate's exit codes that refuse the push: a blocking gate failed, bad config or data,
or a bug in the gate (a crash proves nothing about the change: it must not pass)."""

PREFIX = "llm-eval pre-push:"


@dataclass(frozen=True, slots=True)
class PushedRef:
    """One line of the pre-push hook's stdin."""

    local_ref: str
    local_sha: str
    remote_ref: str
    remote_sha: str

    @property
    def deletes(self) -> bool:
        """The push deletes the remote ref: nothing to check."""
        return self.local_sha in ZERO_SHA

    @property
    def creates(self) -> bool:
        """The remote ref does not exist yet."""
        return self.remote_sha in ZERO_SHA


def parse_push_lines(text: str) -> tuple[PushedRef, ...]:
    """The pushed refs, one per non-blank line of four fields."""
    refs = []
    for line in text.splitlines():
        fields = line.split()
        if len(fields) == 4:
            refs.append(PushedRef(*fields))
    return tuple(refs)


def split_rev_list(output: str) -> tuple[tuple[str, ...], tuple[str, ...]]:
    """`git rev-list --boundary` output as (new commits, boundary commits)."""
    lines = [line.strip() for line in output.splitlines() if line.strip()]
    commits = tuple(line for line in lines if not line.startswith("-"))
    boundaries = tuple(line[1:] for line in lines if line.startswith("-"))
    return commits, boundaries


def render_script(
    python: str,
    watch: Sequence[str],
    gate_options: Sequence[tuple[str, str]],
    *,
    each_commit: bool = False,
) -> str:
    """The hook file: a POSIX shell script calling `python -m llm_eval.hook`."""
    command = [f'{shlex.quote(python)} -m llm_eval.hook "$@"']
    command += [f"--watch {shlex.quote(path)}" for path in watch]
    command += ["--each-commit"] if each_commit else []
    command += [f"{option} {shlex.quote(value)}" for option, value in gate_options]
    python_quoted = shlex.quote(python)
    # The hook is llm-eval's own, so installing again replaces it: no --force, which
    # is for replacing a hook llm-eval did not write.
    gone = f"{PREFIX} {python} is gone; run `llm-eval hook install` again"
    return "\n".join(
        [
            "#!/bin/sh",
            MARKER,
            "# Runs `llm-eval gate` before a push that changes a watched path, and refuses",
            "# the push when a blocking gate fails (exit 1) or the config or data are bad",
            "# (exit 3) or the gate crashes (exit 5). `git push --no-verify` skips it once;",
            "# `llm-eval hook uninstall` removes it.",
            f"if [ ! -x {python_quoted} ]; then",
            f"    echo {shlex.quote(gone)} >&2",
            "    exit 1",
            "fi",
            "exec " + " \\\n    ".join(command),
            "",
        ]
    )


def is_ours(text: str) -> bool:
    """Whether a hook file was written by `llm-eval hook install`."""
    return MARKER in text.splitlines()


def change_to_check(ref: PushedRef, remote: str, watch: Sequence[str]) -> str | None:
    """Why the gate must run for this pushed ref, or None when the watched paths are
    unchanged."""
    if ref.creates:
        listed = _git("rev-list", "--boundary", *_pushed_range(ref, remote))
        if listed.returncode != 0:
            return f"cannot tell what {ref.local_ref} changes"
        commits, bases = split_rev_list(listed.stdout)
        if not commits:
            return None
        if not bases:
            return f"{ref.local_ref} shares no commit with {remote}"
    else:
        bases = (ref.remote_sha,)
    for base in bases:
        diff = _git("diff", "--quiet", base, ref.local_sha, "--", *watch)
        if diff.returncode == 1:
            return f"{ref.local_ref} changes {', '.join(watch)}"
        if diff.returncode != 0:
            return f"cannot compare {ref.local_ref} with {remote} (fetch, then push again?)"
    return None


def pushed_commits(ref: PushedRef, remote: str) -> tuple[str, ...] | None:
    """The commits this push sends for `ref`, oldest first; None when git cannot list
    them (the remote's commit is not here: fetch first) or when the remote has none of
    the ref's history (every commit would be new: only the tip is worth gating)."""
    listed = _git(
        "rev-list", "--boundary", "--reverse", "--topo-order", *_pushed_range(ref, remote)
    )
    if listed.returncode != 0:
        return None
    commits, bases = split_rev_list(listed.stdout)
    return commits if bases else None


def _pushed_range(ref: PushedRef, remote: str) -> tuple[str, ...]:
    """`git rev-list` arguments naming what the push sends for `ref`: what the remote's
    branches lack for a new ref, else what lies between the remote's commit and ours."""
    if ref.creates:
        return (ref.local_sha, "--not", f"--remotes={remote}")
    return (f"{ref.remote_sha}..{ref.local_sha}",)


def changes_watched(sha: str, watch: Sequence[str]) -> bool:
    """Whether `sha` itself changes a watched path: against its first parent; True
    when git cannot tell."""
    parents = _git("rev-list", "--parents", "-n", "1", sha).stdout.split()[1:]
    if not parents:
        return True
    return _git("diff", "--quiet", parents[0], sha, "--", *watch).returncode != 0


def plan_checks(
    ref: PushedRef, remote: str, watch: Sequence[str], each_commit: bool
) -> tuple[str, tuple[str, ...]] | None:
    """Why and on which commits the gate runs for a pushed ref, or None when it need
    not: the tip when the push changes a watched path or, with `each_commit`, every
    pushed commit that itself changes one, oldest first (so a mistuned commit pushed
    with its revert is still caught). Where the pushed commits cannot be listed, the
    tip."""
    commits = pushed_commits(ref, remote) if each_commit else None
    if commits is None:
        why = change_to_check(ref, remote, watch)
        return (why, (ref.local_sha,)) if why else None
    touching = tuple(sha for sha in commits if changes_watched(sha, watch))
    if not touching:
        return None
    of = plural(len(commits), "pushed commit", "pushed commits")
    return f"{ref.local_ref} changes {', '.join(watch)} in {len(touching)} of {of}", touching


def pre_push(
    remote: str,
    stdin: str,
    watch: Sequence[str],
    gate_options: Sequence[str],
    *,
    each_commit: bool = False,
) -> int:
    """Skip, or run the gate on the pushed commits that must be checked (see
    `plan_checks`) and return 1 when the push must be refused."""
    refs = [ref for ref in parse_push_lines(stdin) if not ref.deletes]
    plans = [(ref, plan) for ref in refs if (plan := plan_checks(ref, remote, watch, each_commit))]
    if not plans:
        print(f"{PREFIX} nothing under {', '.join(watch)} changed; gate skipped.")
        return 0
    gated: set[str] = set()
    for ref, (reason, commits) in plans:
        fresh = [sha for sha in commits if sha not in gated]
        for sha in fresh:
            gated.add(sha)
            subject = f" ({_subject(sha)})" if len(commits) > 1 else ""
            print(f"{PREFIX} {reason}; running the gate on {sha[:12]}{subject}.")
            sys.stdout.flush()
            code = gate_on_commit(sha, gate_options)
            if code in BLOCKING_EXIT_CODES:
                where = f"{sha[:12]} of {ref.local_ref}" if len(commits) > 1 else ref.local_ref
                print(
                    f"{PREFIX} push refused (the gate exited {code} on {where}). Fix it, "
                    "or push once without the check: git push --no-verify"
                )
                return 1
            if code != ExitCode.PASS:
                print(f"{PREFIX} the gate could not run (exit {code}); pushing anyway.")
    return 0


def _subject(sha: str) -> str:
    """A commit's subject line, for the hook's progress lines."""
    return _git("log", "-1", "--format=%s", sha).stdout.strip()


REPORTS = Path(".llm-eval") / "pre-push"
"""Where the hook's gate writes its reports, relative to the working tree's top."""


def gate_on_commit(sha: str, gate_options: Sequence[str]) -> int:
    """The gate's exit code on `sha`, checked out into a temporary worktree, its reports
    written to `REPORTS` in the working tree; INTERNAL (5) when the worktree cannot be
    made (the push is then refused: nothing was checked)."""
    top = _git("rev-parse", "--show-toplevel").stdout.strip()
    reports = (Path(top) if top else Path.cwd()) / REPORTS
    with tempfile.TemporaryDirectory(prefix="llm-eval-pre-push-") as parent:
        tree = Path(parent) / "tree"
        added = _git("worktree", "add", "--detach", "--quiet", str(tree), sha)
        if added.returncode != 0:
            print(f"{PREFIX} cannot check out {sha[:12]}: {added.stderr.strip()}")
            return ExitCode.INTERNAL
        try:
            gate = [
                sys.executable, "-m", "llm_eval.cli", "gate", *gate_options, "--out", str(reports)
            ]  # fmt: skip
            done = subprocess.run(gate, cwd=tree, stdin=subprocess.DEVNULL, check=False)
            return done.returncode
        finally:
            _git("worktree", "remove", "--force", str(tree))
            _git("worktree", "prune")


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="python -m llm_eval.hook", description=__doc__)
    parser.add_argument("remote", help="The remote's name (or URL), from git.")
    parser.add_argument("url", nargs="?", help="The remote's URL, from git.")
    parser.add_argument("--watch", action="append", required=True, help="A git pathspec.")
    parser.add_argument(
        "--each-commit",
        action="store_true",
        help="Gate every pushed commit that changes a watched path, not only each tip.",
    )
    for option in ("--config", "--criteria", "--baseline"):
        parser.add_argument(option, help=f"Passed to `llm-eval gate {option}`.")
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    """The hook's entry point: arguments from the hook file, refs on stdin."""
    args = _parser().parse_args(argv)
    options: list[str] = []
    for name in ("config", "criteria", "baseline"):
        value = getattr(args, name)
        if value is not None:
            options += [f"--{name}", value]
    return pre_push(
        args.remote, sys.stdin.read(), args.watch, options, each_commit=args.each_commit
    )


if __name__ == "__main__":
    sys.exit(main())
