"""`llm-eval comment`: post or update the pull request's one comment from a `report.json`.

Where to comment comes from the options or from GitHub Actions' environment:
`GITHUB_REPOSITORY`, the `pull_request` event in `GITHUB_EVENT_PATH`, `GITHUB_TOKEN`
and `GITHUB_API_URL`. A comment that cannot be posted is a warning, not a failure:
the verdict is the gate's job. `--strict` makes it exit 4.

`--when` keeps a pull request quiet when a comment would say nothing new: `on_change`
(the default) posts no new comment for a pass in which no query's score moved,
`on_fail` posts one only when the check fails, `always` on every run. Whatever it
says, a comment already there is updated, so it never shows a stale state. What
counts as a pass or a change is read from the report (its verdict and each gate's
reason), never decided again here.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal

from llm_eval.actions import links_from_env
from llm_eval.errors import InputError
from llm_eval.formats._markup import NO_LINKS, Links
from llm_eval.formats.markdown import comment_marker, render_comment
from llm_eval.github import DEFAULT_API_URL, CommentNotPosted, upsert_comment
from llm_eval.installation_io import installed_source
from llm_eval.report import SCHEMA_VERSION
from llm_eval.report_schema import validate_report
from llm_eval.textio import read_json_file
from llm_eval.wording.gates import STATUS_WORDS

_REPO = re.compile(r"[A-Za-z0-9_.-]+/[A-Za-z0-9_.-]+")

When = Literal["always", "on_change", "on_fail"]
"""When a new comment is posted (`llm_eval.defaults.COMMENT_WHEN_CHOICES`)."""
FAILING_VERDICTS = ("fail", "gold_changed", "retriever_failed")
"""Verdicts whose check fails (exit 1, 3 or 4): a comment is posted under every `when`."""


@dataclass(frozen=True, slots=True)
class Target:
    """The repository and pull request to comment on (by number or by head commit)."""

    repo: str
    pr: int | None
    head_sha: str | None


@dataclass(frozen=True, slots=True)
class CommentOutcome:
    """What to print, and where; the exit code is 0 (failures under --strict raise)."""

    text: str
    to_stderr: bool = False


def comment(
    *,
    report_path: Path,
    environ: Mapping[str, str],
    repo: str | None = None,
    pr: int | None = None,
    head_sha: str | None = None,
    dry_run: bool = False,
    strict: bool = False,
    marker_id: str | None = None,
    when: When = "on_change",
) -> CommentOutcome:
    """Render the report as the PR comment and post it (or, with `dry_run`, print it);
    when `when` withholds a new comment, only update the one already there."""
    report = load_report(report_path)
    body = render_report(
        report, report_path, links_from_env(environ, installed_source()), marker_id
    )
    withheld = withheld_because(report, when)
    if dry_run:
        return CommentOutcome(body.rstrip("\n"))
    try:
        target = resolve_target(environ, repo, pr, head_sha)
        # A secret pasted with its line end is still the secret: the newline is not
        # part of it, and would otherwise be quoted in an invalid-header message.
        token = (environ.get("GITHUB_TOKEN") or "").strip()
        if not token:
            raise CommentNotPosted("GITHUB_TOKEN is not set")
        posted = upsert_comment(
            token=token,
            api_url=environ.get("GITHUB_API_URL") or DEFAULT_API_URL,
            repo=target.repo,
            body=body,
            marker=comment_marker(marker_id),
            pr=target.pr,
            head_sha=target.head_sha,
            create=withheld is None,
        )
    except CommentNotPosted as exc:
        if strict:
            raise
        return CommentOutcome(
            f"llm-eval comment: warning: no comment posted: {exc} (the gate's verdict stands; "
            "--strict makes this an error)",
            to_stderr=True,
        )
    if posted is None:
        return CommentOutcome(f"llm-eval comment: not posted: {withheld} (comment: {when})")
    done = {"created": "posted", "updated": "updated", "unchanged": "unchanged, not rewritten"}
    return CommentOutcome(f"llm-eval comment: {done[posted.action]}: {posted.url}")


def withheld_because(report: Mapping[str, Any], when: When) -> str | None:
    """Why `when` posts no new comment on this report, in words; None when it posts one.

    A failing check (a blocking gate, one that cannot tell with `on_inconclusive: fail`
    included, or a gold set changed without `--allow-gold-change`) is always posted.
    """
    verdict = str(report["verdict"])
    if when == "always" or verdict in FAILING_VERDICTS:
        return None
    if when == "on_fail":
        return f"the check passes ({STATUS_WORDS.get(verdict, verdict)})"
    # `reason` is optional in the schema: a report without it is not known to be unchanged.
    if verdict == "pass" and all(gate.get("reason") == "unchanged" for gate in report["gates"]):
        return "unchanged pass"
    return None


def load_report(path: Path) -> Mapping[str, Any]:
    """The report as written by `llm-eval gate`; an InputError when it is not one."""
    report = read_json_file(path)
    version = report.get("schema_version") if isinstance(report, dict) else None
    if isinstance(report, dict) and version != SCHEMA_VERSION:
        raise InputError(
            f"schema_version {version!r} is not supported (this llm-eval reads {SCHEMA_VERSION})",
            path=path,
        )
    return validate_report(report, path)


def render_report(
    report: Mapping[str, Any],
    path: Path,
    links: Links = NO_LINKS,
    marker_id: str | None = None,
) -> str:
    """The comment body; a report with missing or mistyped fields is an InputError."""
    try:
        return render_comment(report, links, marker_id)
    except (KeyError, TypeError, ValueError, AttributeError) as exc:
        raise InputError(
            f"cannot render the report: {type(exc).__name__}: {exc}", path=path
        ) from None


def resolve_target(
    environ: Mapping[str, str], repo: str | None, pr: int | None, head_sha: str | None
) -> Target:
    """Options first, then GitHub Actions' environment.

    The pull request number is taken from `--pr` or from a `pull_request` event; with
    `--head-sha` (a `workflow_run`) it is looked up among the open pull requests, never
    read from the run's artifacts, which the pull request itself could have written.
    """
    name = repo or environ.get("GITHUB_REPOSITORY") or ""
    if not name:
        raise CommentNotPosted("no repository: give --repo OWNER/NAME or set GITHUB_REPOSITORY")
    if not _REPO.fullmatch(name):
        raise InputError(f"expected OWNER/NAME, got {name!r}", key="--repo")
    if pr is not None or head_sha:
        return Target(name, pr, head_sha or None)
    number = _event_pull_number(environ.get("GITHUB_EVENT_PATH"))
    if number is None:
        raise CommentNotPosted(
            "no pull request: give --pr or --head-sha, or run on a pull_request event"
        )
    return Target(name, number, None)


def _event_pull_number(event_path: str | None) -> int | None:
    """`pull_request.number` of the event payload, if this is a pull request event."""
    if not event_path:
        return None
    event = read_json_file(event_path)
    pull = event.get("pull_request") if isinstance(event, dict) else None
    number = pull.get("number") if isinstance(pull, dict) else None
    return number if isinstance(number, int) and not isinstance(number, bool) else None
