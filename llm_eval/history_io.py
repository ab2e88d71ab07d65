"""Reading the history: the baseline file at each commit of its git log, report.json
files kept one a line in a history file, and a baseline at a reference (a ref, a tag,
or a number of refreshes back) for the drift check.

Bad points do not stop the reading: a baseline that does not parse at some commit,
or a corrupt line of the history file, becomes a `Skipped` entry with its reason.
"""

from __future__ import annotations

import math
import re
import subprocess
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from llm_eval.baseline import Baseline, Reference
from llm_eval.baseline_io import parse_baseline
from llm_eval.criteria import Gate
from llm_eval.errors import InputError
from llm_eval.gitinfo import git
from llm_eval.history import Entry, Point, Skipped
from llm_eval.report_schema import validate_report
from llm_eval.textio import iter_lines, load_json

Values = Callable[[Baseline], Mapping[str, float | None]]
"""A baseline's value of each gate (the command knows the gates and their scopes)."""


@dataclass(frozen=True, slots=True)
class Revision:
    """One commit of the baseline file's log."""

    commit: str
    date: str
    subject: str
    path: str
    """The file's path at that commit, from the repository root (it may have moved)."""


def _run_git(*args: str) -> subprocess.CompletedProcess[str]:
    try:
        return git(*args, timeout=120)
    except (OSError, subprocess.TimeoutExpired) as exc:
        raise InputError(f"cannot run git: {exc}") from None


def baseline_log(path: str | Path, limit: int | None = None) -> tuple[Revision, ...]:
    """The commits that changed the baseline file, newest first (following renames);
    InputError outside a git checkout."""
    top = _run_git("rev-parse", "--show-toplevel")
    if top.returncode != 0:
        raise InputError("not in a git checkout: the history is read from git", path=str(path))
    args = ["log", "--follow", "--name-only", "--format=%x1e%H%x1f%cI%x1f%s"]
    if limit is not None:
        args.append(f"-n{limit}")
    done = _run_git(*args, "--", str(path))
    if done.returncode != 0:  # e.g. a repository without a commit yet
        return ()
    revisions = []
    for record in done.stdout.split("\x1e")[1:]:
        head, _, names = record.partition("\n")
        commit, date, subject = head.split("\x1f", 2)
        name = next((n for n in names.splitlines() if n.strip()), str(path))
        revisions.append(Revision(commit, date, subject, name))
    return tuple(revisions)


def is_shallow() -> bool:
    """Whether this clone is shallow (its log ends before the first commit)."""
    done = _run_git("rev-parse", "--is-shallow-repository")
    return done.returncode == 0 and done.stdout.strip() == "true"


def baseline_at(commit: str, repo_path: str) -> Baseline:
    """The baseline file as committed at `commit` (`repo_path` from the repository
    root); InputError when it is missing there or does not parse."""
    where = f"{repo_path} at {commit[:7]}"
    done = _run_git("show", f"{commit}:{repo_path}")
    if done.returncode != 0:
        reason = done.stderr.strip().splitlines()[-1] if done.stderr.strip() else "not there"
        raise InputError(f"cannot read it: {reason.removeprefix('fatal: ')}", path=where)
    return parse_baseline(load_json(done.stdout, where, strict=True), where)


def baseline_points(revisions: tuple[Revision, ...], values: Values) -> list[Entry]:
    """Each revision's baseline as a point, or skipped with the reason it cannot be read."""
    entries: list[Entry] = []
    for rev in reversed(revisions):
        try:
            baseline = baseline_at(rev.commit, rev.path)
        except InputError as exc:
            where = f"{rev.path} at {rev.commit[:7]}"
            entries.append(Skipped(rev.commit, rev.date, where, _why(exc)))
            continue
        gold = baseline.fingerprints.get("gold")
        aggregates = {
            key: {m: _finite(v) for m, v in row.items() if m != "n"}
            for key, row in baseline.aggregates.items()
        }
        entries.append(
            Point(rev.commit, rev.date, rev.subject, "baseline", gold, values(baseline), aggregates)
        )
    return entries


def report_points(path: Path, gates: Mapping[str, tuple[str, str]]) -> list[Entry]:
    """The reports kept in a history file, one report.json a line. `gates` maps each
    gate's name to its (metric, scope key): a report's gate counts only when both agree."""
    entries: list[Entry] = []
    for number, line in iter_lines(path):
        if not line.strip():
            continue
        where = f"{path}:{number}"
        try:
            report = validate_report(load_json(line, path, number), where)
            entries.append(_report_point(report, gates))
        except InputError as exc:
            entries.append(Skipped(None, None, where, _why(exc)))
        except _NoCommit:
            entries.append(Skipped(None, None, where, "the report names no commit"))
    return entries


def _why(exc: InputError) -> str:
    """The error without its file (the entry names where it is), with its key."""
    return f"{exc.key}: {exc.reason}" if exc.key else exc.reason


class _NoCommit(Exception):
    pass


def _report_point(report: Mapping[str, Any], gates: Mapping[str, tuple[str, str]]) -> Point:
    provenance = report["provenance"]
    commit = provenance.get("head_commit")
    if not isinstance(commit, str) or not commit:
        raise _NoCommit
    values: dict[str, float | None] = {}
    for entry in report["gates"]:
        wanted = gates.get(entry["name"])
        if wanted == (entry.get("metric"), entry.get("scope_key")):
            values[entry["name"]] = entry.get("value")
    gold = (provenance.get("fingerprints") or {}).get("gold")
    date = str(provenance.get("generated_at") or "")
    aggregates = {
        row["slice"]: {m: _finite(cell.get("value")) for m, cell in row["metrics"].items()}
        for row in report["slices"]
        if isinstance(row.get("metrics"), dict)
    }
    return Point(commit, date, "", "report", gold, values, aggregates)


def _finite(value: object) -> float | None:
    """A number that can be drawn, else None (NaN: the slice has no scored query)."""
    if isinstance(value, bool) or not isinstance(value, int | float) or not math.isfinite(value):
        return None
    return float(value)


def load_references(gates: Sequence[Gate], path: str | Path) -> dict[str, Reference]:
    """The reference baseline of each gate that sets `drift_max`, by gate name; an
    InputError at the gate's `since` when it cannot be read."""
    references = {}
    for gate in gates:
        if gate.drift is None:
            continue
        try:
            revision = resolve_since(gate.drift.since, path)
            baseline = baseline_at(revision.commit, revision.path)
        except InputError as exc:
            raise gate.drift.where.error(exc.render()) from None
        references[gate.name] = Reference(baseline, revision.commit)
    return references


def resolve_since(since: str | int, path: str | Path) -> Revision:
    """The baseline's revision a drift check measures from: `since` is a number of
    refreshes back (0 would be the committed baseline), or a git ref or tag.
    InputError when the clone cannot see it."""
    if isinstance(since, int):
        log = baseline_log(path, since + 1)
        if len(log) <= since:
            shallow = " (this clone is shallow: fetch it whole, e.g. fetch-depth: 0)"
            raise InputError(
                f"the baseline {since} refreshes back is not in the git history: "
                f"{len(log)} commits of it are{shallow if is_shallow() else ''}",
                path=str(path),
            )
        return log[since]
    done = _run_git("rev-parse", "--verify", "--quiet", f"{since}^{{commit}}")
    if done.returncode != 0:
        shallow = " (this clone is shallow; fetch tags and history, e.g. fetch-depth: 0)"
        raise InputError(
            f"git cannot find {since!r}{shallow if is_shallow() else ''}", path=str(path)
        )
    commit = done.stdout.strip()
    revision = _log_at(commit, path)
    if revision is None:
        raise InputError(f"the baseline did not exist at {since!r}", path=str(path))
    return revision


def _log_at(commit: str, path: str | Path) -> Revision | None:
    """The last change of the baseline file at or before `commit`, with its path there."""
    prefix = _run_git("rev-parse", "--show-prefix").stdout.strip()
    done = _run_git("log", "-n1", "--format=%H%x1f%cI%x1f%s", commit, "--", f"{prefix}{path}")
    if done.returncode != 0 or not done.stdout.strip():
        return None
    sha, date, subject = done.stdout.strip().split("\x1f", 2)
    return Revision(sha, date, subject, f"{prefix}{path}")


def newest_report_part(path: Path, key: str) -> Mapping[str, Any] | None:
    """`report[key]` of the newest line of a history file that is a valid report with
    that part set (None when no line has it); corrupt lines are skipped, as in
    `report_points`, which lists them."""
    found = None
    for number, line in iter_lines(path):
        if not line.strip():
            continue
        try:
            report = validate_report(load_json(line, path, number), f"{path}:{number}")
        except InputError:
            continue
        if isinstance(report.get(key), dict):
            found = report[key]
    return found


def commit_url(environ: Mapping[str, str]) -> str | None:
    """Where a commit is shown on GitHub, `https://github.com/OWNER/REPO/commit/`: from
    the Actions environment, else from the `origin` remote when it is on github.com."""
    repo = environ.get("GITHUB_REPOSITORY")
    if repo:
        server = environ.get("GITHUB_SERVER_URL") or "https://github.com"
        return f"{server}/{repo}/commit/"
    done = _run_git("remote", "get-url", "origin")
    match = re.fullmatch(
        r"(?:https://github\.com/|git@github\.com:|ssh://git@github\.com/)([\w.-]+/[\w.-]+?)(?:\.git)?/?",
        done.stdout.strip(),
    )
    return (
        f"https://github.com/{match.group(1)}/commit/" if match and done.returncode == 0 else None
    )
