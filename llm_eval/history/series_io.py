"""Reading the history: the baseline file at each commit of its git log, report.json
files kept one a line in a history file, and a baseline at a reference (a ref, a tag,
or a number of refreshes back) for the drift check.

Bad points do not stop the reading: a baseline that does not parse at some commit,
or a corrupt line of the history file, becomes a `Skipped` entry with its reason.

What a committed baseline gives as a point depends only on its bytes (its git object
id) and on the gates asked about, so points are kept in a cache under the output
folder (`cache/history/`), keyed by both: a warm gate reads no old baseline again,
and the dashboard's thousand points are parsed once.
"""

from __future__ import annotations

import contextlib
import json
import math
import re
import subprocess
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from llm_eval import __version__
from llm_eval.baseline import Baseline, Reference
from llm_eval.baseline_io import parse_baseline
from llm_eval.criteria import Gate
from llm_eval.digest import digest
from llm_eval.errors import InputError
from llm_eval.gitinfo import git, git_bytes
from llm_eval.history.series import (
    BuildRange,
    Entry,
    GateFigures,
    Point,
    Skipped,
    build_range,
)
from llm_eval.metrics import parse_metric
from llm_eval.report_schema import validate_report
from llm_eval.textio import decode_line, iter_raw_lines, load_json, read_text, write_atomic

Values = Callable[[Baseline], GateFigures]
"""A baseline's value of each gate, and of each of its builds (the command knows the
gates and their scopes)."""


@dataclass(frozen=True, slots=True)
class Revision:
    """One commit of the baseline file's log."""

    commit: str
    date: str
    subject: str
    path: str
    """The file's path at that commit, from the repository root (it may have moved)."""
    blob: str | None = None
    """The file's git object id at that commit; None when the log does not give it
    (a merge commit lists no files): the file is then read as `commit:path`."""

    @property
    def spec(self) -> str:
        """How git names the file's content at this commit."""
        return self.blob or f"{self.commit}:{self.path}"

    @property
    def where(self) -> str:
        """How a message names the file at this commit: `path at 1a2b3c4`."""
        return f"{self.path} at {self.commit[:7]}"


@dataclass(frozen=True, slots=True)
class PointCache:
    """Where the points read from committed baselines are kept, for one set of gates."""

    folder: Path
    gates: str
    """A digest of each gate's metric and scope members: what a point's values depend on."""

    @property
    def path(self) -> Path:
        return self.folder / f"points-{digest([_POINT_FORMAT, __version__, self.gates])}.json"


_POINT_FORMAT = 3
"""The layout of a cached point; a change makes older caches unseen (3: the builds'
range of each gate, which a point of format 2 could not tell apart from one build)."""
_POINTS_KEPT = 5000
"""Cached points per set of gates at most (the newest written kept)."""


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
    args = ["log", "--follow", "--raw", "--no-abbrev", "--format=%x1e%H%x1f%cI%x1f%s"]
    if limit is not None:
        args.append(f"-n{limit}")
    done = _run_git(*args, "--", str(path))
    if done.returncode != 0:  # e.g. a repository without a commit yet
        return ()
    revisions = []
    for record in done.stdout.split("\x1e")[1:]:
        head, _, changes = record.partition("\n")
        commit, date, subject = head.split("\x1f", 2)
        name, blob = str(path), None
        # `:100644 100644 <old id> <new id> M<TAB>path` (R100<TAB>old<TAB>new on a rename)
        for line in changes.splitlines():
            modes, tab, names = line.partition("\t")
            ids = modes.split()
            if line.startswith(":") and tab and len(ids) >= 4:
                name = names.split("\t")[-1]
                blob = ids[3] if ids[3].strip("0") else None  # all zeros: deleted here
                break
        revisions.append(Revision(commit, date, subject, name, blob))
    return tuple(revisions)


def is_shallow() -> bool:
    """Whether this clone is shallow (its log ends before the first commit)."""
    done = _run_git("rev-parse", "--is-shallow-repository")
    return done.returncode == 0 and done.stdout.strip() == "true"


def baseline_at(commit: str, repo_path: str) -> Baseline:
    """The baseline file as committed at `commit` (`repo_path` from the repository
    root); InputError when it is missing there or does not parse."""
    where = f"{repo_path} at {commit[:7]}"
    spec = f"{commit}:{repo_path}"
    text = _read_objects([spec])[spec]
    if isinstance(text, InputError):
        raise InputError(text.reason, path=where)
    return parse_baseline(load_json(text, where, strict=True), where)


def baseline_points(
    revisions: tuple[Revision, ...], values: Values, cache: PointCache | None = None
) -> list[Entry]:
    """Each revision's baseline as a point, or skipped with the reason it cannot be read.
    The baselines not in `cache` are read from git in one call, and kept there."""
    kept = _read_points(cache)
    wanted = [rev for rev in revisions if rev.blob is None or rev.blob not in kept]
    specs = [rev.spec for rev in wanted]
    try:
        texts = _read_objects(specs) if specs else {}
    except InputError as exc:  # each point is skipped with the reason, as one read alone
        texts = dict.fromkeys(specs, exc)
    found: dict[str, _Found] = {}
    for rev in wanted:
        found[rev.spec] = _point_of(texts[rev.spec], rev, values)
    if cache is not None:
        new = {rev.blob: found[rev.spec] for rev in wanted if rev.blob is not None}
        _write_points(cache, kept, {b: f for b, f in new.items() if f.cacheable})
    entries: list[Entry] = []
    for rev in reversed(revisions):
        point = found.get(rev.spec) or kept[rev.spec]
        if point.skipped is not None:
            entries.append(Skipped(rev.commit, rev.date, rev.where, point.skipped))
        else:
            entries.append(
                Point(
                    rev.commit,
                    rev.date,
                    rev.subject,
                    "baseline",
                    point.gold,
                    point.values,
                    point.aggregates,
                    builds=point.builds,
                )
            )
    return entries


@dataclass(frozen=True, slots=True)
class _Found:
    """What one committed baseline gives: a point's figures, or why it gives none."""

    gold: str | None = None
    values: Mapping[str, float | None] = field(default_factory=dict)
    aggregates: Mapping[str, Mapping[str, float | None]] = field(default_factory=dict)
    builds: Mapping[str, BuildRange] = field(default_factory=dict)
    skipped: str | None = None
    cacheable: bool = True
    """False when git could not give the file: another clone (or a deeper fetch) may."""

    def to_json(self) -> dict[str, Any]:
        if self.skipped is not None:
            return {"skipped": self.skipped}
        builds = {name: [b.builds, b.low, b.high] for name, b in self.builds.items()}
        return {
            "gold": self.gold,
            "values": self.values,
            "aggregates": self.aggregates,
            "builds": builds,
        }


def _point_of(text: str | InputError, rev: Revision, values: Values) -> _Found:
    if isinstance(text, InputError):
        return _Found(skipped=_why(text), cacheable=False)
    try:
        baseline = parse_baseline(load_json(text, rev.where, strict=True), rev.where)
    except InputError as exc:
        return _Found(skipped=_why(exc))
    aggregates = {
        key: {m: _finite(v) for m, v in row.items()} for key, row in baseline.aggregates.items()
    }
    figures = values(baseline)
    gold = baseline.fingerprints.get("gold")
    return _Found(gold, dict(figures.values), aggregates, dict(figures.builds))


def _read_objects(specs: Sequence[str]) -> dict[str, str | InputError]:
    """Each git object's text by its name (an object id, or `commit:path`), all through
    one `git cat-file --batch`; an InputError for one that git cannot give or that is not
    UTF-8 text."""
    try:
        names = "".join(f"{spec}\n" for spec in specs).encode("utf-8")
        done = git_bytes("cat-file", "--batch", stdin=names, timeout=120)
    except (OSError, subprocess.TimeoutExpired) as exc:
        raise InputError(f"cannot run git: {exc}") from None
    if done.returncode != 0:
        reason = done.stderr.decode("utf-8", "replace").strip() or f"exit {done.returncode}"
        raise InputError(f"cannot run git cat-file: {reason.splitlines()[-1]}")
    out, at, texts = done.stdout, 0, {}  # type: bytes, int, dict[str, str | InputError]
    for spec in specs:
        end = out.find(b"\n", at)
        if end < 0:  # an answer cut short: what is left is not there
            end = len(out)
        header = out[at:end].decode("utf-8", "replace").split()
        at = end + 1
        if len(header) != 3 or not header[2].isdigit():
            # `<name> missing` (or ambiguous); an answer cut short reads the same
            texts[spec] = InputError("cannot read it: not there")
            continue
        size = int(header[2])
        content, at = out[at : at + size], at + size + 1
        if len(content) != size:
            texts[spec] = InputError("cannot read it: git's answer was cut short")
            continue
        try:
            texts[spec] = (
                content.decode("utf-8") if header[1] == "blob" else InputError("not a file")
            )
        except UnicodeDecodeError:
            texts[spec] = InputError("corrupt baseline: not UTF-8 text")
    return texts


def _read_points(cache: PointCache | None) -> dict[str, _Found]:
    """The points kept for these gates, by object id; none when the cache is missing or
    does not read as it was written (it is then written again)."""
    if cache is None:
        return {}
    try:
        data = load_json(read_text(cache.path), cache.path, strict=True)
        return {blob: _found_of(entry) for blob, entry in data["points"].items()}
    except (OSError, InputError, LookupError, TypeError, ValueError, AttributeError):
        return {}


def _found_of(entry: Mapping[str, Any]) -> _Found:
    """A kept point as it was written; ValueError for anything else."""
    if set(entry) == {"skipped"} and isinstance(entry["skipped"], str):
        return _Found(skipped=entry["skipped"])
    gold, values, aggregates = entry["gold"], entry["values"], entry["aggregates"]
    rows = [values, *aggregates.values()]
    if not (gold is None or isinstance(gold, str)) or not all(
        all(v is None or type(v) is float for v in row.values()) for row in rows
    ):
        raise ValueError("not a kept point")
    builds = {name: _kept_range(kept) for name, kept in entry["builds"].items()}
    return _Found(gold, values, aggregates, builds)


def _kept_range(kept: Any) -> BuildRange:
    """A builds' range as a cached point keeps it, `[builds, low, high]`; ValueError
    for anything else."""
    count, low, high = kept
    if type(count) is not int or count < 2 or type(low) is not float or type(high) is not float:
        raise ValueError("not a kept range")
    return BuildRange(count, low, high)


def _write_points(cache: PointCache, kept: dict[str, _Found], new: dict[str, _Found]) -> None:
    """Add the new points to the cache file (the newest `_POINTS_KEPT` stay); a folder
    that cannot be written is no error: the cache only saves time."""
    if not new:
        return
    points = {**{b: f for b, f in kept.items() if b not in new}, **new}
    newest = list(points.items())[-_POINTS_KEPT:]
    text = json.dumps({"points": {b: f.to_json() for b, f in newest}})
    with contextlib.suppress(OSError):
        cache.folder.mkdir(parents=True, exist_ok=True)
        write_atomic(cache.path, text)


def report_points(path: Path, gates: Mapping[str, tuple[str, str]]) -> list[Entry]:
    """The reports kept in a history file, one report.json a line. `gates` maps each
    gate's name to its (metric, scope key): a report's gate counts only when both agree.
    Every non-blank line is an entry: a point, or a gap with its line and reason."""
    entries: list[Entry] = []
    for where, report in kept_reports(path):
        if isinstance(report, InputError):
            entries.append(Skipped(None, None, where, _why(report)))
        else:
            entries.append(_report_point(report, gates))
    return entries


def kept_reports(path: Path) -> Iterator[tuple[str, Mapping[str, Any] | InputError]]:
    """Each non-blank line of a history file as `(file:line, report)`, or with the
    reason it is no report a point can be made of: bytes that are not UTF-8, text that
    is not JSON, JSON that is not a report, a report whose commit is not a commit id.
    The file is read as bytes a line at a time, so one bad line is one gap; a report
    whose slices name a metric llm-eval does not know (its plugin not installed, or the
    name corrupt) is one too: its figures could be neither labelled nor drawn."""
    known: set[str] = set()
    for number, raw in iter_raw_lines(path):
        where = f"{path}:{number}"
        try:
            report = validate_report(load_json(decode_line(raw, path, number), path, number), where)
            report_commit(report, where)
            _check_metrics(report, where, known)
        except InputError as exc:
            yield where, exc
        else:
            yield where, report


def _check_metrics(report: Mapping[str, Any], where: str, known: set[str]) -> None:
    """InputError at the first metric of a slice that does not parse; `known` holds the
    names already parsed (a history file names the same few on every line)."""
    for index, row in enumerate(report["slices"]):
        for name in row.get("metrics") or {}:
            if name in known:
                continue
            try:
                parse_metric(name)
            except InputError:
                raise InputError(
                    f"{name!r} is not a metric llm-eval knows",
                    path=where,
                    key=f"slices[{index}].metrics",
                ) from None
            known.add(name)


_COMMIT_ID = re.compile(r"[0-9a-fA-F]{7,64}")
"""A git commit id, abbreviated or whole (SHA-1 or SHA-256)."""


def report_commit(report: Mapping[str, Any], path: str | Path) -> str:
    """The commit a report was made at (`provenance.head_commit`), which a history
    point needs and links to; InputError when it names none, or something that is not
    a commit id (7 to 64 hex digits: the value is not shown, it may be any text)."""
    commit = report["provenance"].get("head_commit")
    if not isinstance(commit, str) or not commit:
        raise InputError(
            "the report names no commit: it was not made in a git checkout, and a "
            "history point needs one",
            path=path,
            key="provenance.head_commit",
        )
    if not _COMMIT_ID.fullmatch(commit):
        raise InputError(
            "not a commit id (7 to 64 hex digits)", path=path, key="provenance.head_commit"
        )
    return commit


def _why(exc: InputError) -> str:
    """The error without its file (the entry names where it is), with its key."""
    return f"{exc.key}: {exc.reason}" if exc.key else exc.reason


def _report_point(report: Mapping[str, Any], gates: Mapping[str, tuple[str, str]]) -> Point:
    provenance = report["provenance"]
    values: dict[str, float | None] = {}
    intervals: dict[str, tuple[float, float]] = {}
    builds: dict[str, BuildRange] = {}
    for entry in report["gates"]:
        wanted = gates.get(entry["name"])
        if wanted == (entry.get("metric"), entry.get("scope_key")):
            values[entry["name"]] = entry.get("value")
            if (interval := _interval(entry)) is not None:
                intervals[entry["name"]] = interval
            if (spread := _builds(entry)) is not None:
                builds[entry["name"]] = spread
    gold = (provenance.get("fingerprints") or {}).get("gold")
    date = str(provenance.get("generated_at") or "")
    aggregates = {
        row["slice"]: {
            **{m: _finite(cell.get("value")) for m, cell in row["metrics"].items()},
            "n": _finite(row.get("n")),
        }
        for row in report["slices"]
        if isinstance(row.get("metrics"), dict)
    }
    return Point(
        provenance["head_commit"], date, "", "report", gold, values, aggregates, intervals, builds
    )


def _interval(gate: Mapping[str, Any]) -> tuple[float, float] | None:
    """The gate's value as an interval: its baseline plus the paired interval of the
    change; None when the report bounds no change (unchanged, or no baseline)."""
    stats = gate.get("stats") or {}
    ends = (
        _finite(gate.get("baseline")),
        _finite(stats.get("ci_low")),
        _finite(stats.get("ci_high")),
    )
    base, low, high = ends
    if base is None or low is None or high is None:
        return None
    return base + low, base + high


def _builds(gate: Mapping[str, Any]) -> BuildRange | None:
    """The range of the run's builds' values of the gate (`stats.builds.values`); None
    for one build, or a report written before it kept them."""
    kept = ((gate.get("stats") or {}).get("builds") or {}).get("values") or []
    return build_range([v for v in map(_finite, kept) if v is not None])


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
    that part set (None when no line has it); the lines `report_points` draws as gaps
    are skipped."""
    found = None
    for _, report in kept_reports(path):
        if not isinstance(report, InputError) and isinstance(report.get(key), dict):
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
