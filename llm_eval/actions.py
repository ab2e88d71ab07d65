"""GitHub Actions output of `llm-eval gate`: the job summary and annotations.

Annotations are workflow commands, lines on stdout such as
`::error file=gold/a.jsonl,line=38,title=…::message`. Their escaping follows GitHub's
toolkit (`@actions/core`, `command.ts`): in the message `%`, CR and LF are
percent-encoded; in a property also `:` and `,`. Escaped so, no text from the gold
set can end a command early or start a new one.
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from llm_eval.docs_address import Installed, docs_address
from llm_eval.errors import InputError
from llm_eval.formats._markup import NO_LINKS, Links
from llm_eval.installation_io import installed_source
from llm_eval.textio import read_json_file

ANNOTATIONS_MAX = 10
"""At most this many annotations: the worst hit→miss queries."""
QUERY_MAX_CHARS = 300

_DATA_ESCAPES = {"%": "%25", "\r": "%0D", "\n": "%0A"}
_PROPERTY_ESCAPES = {**_DATA_ESCAPES, ":": "%3A", ",": "%2C"}
_LEVEL = {"fail": "error", "warn": "warning", "inconclusive": "warning"}


def links_from_env(environ: Mapping[str, str], installed: Installed | None = None) -> Links:
    """The run, the report artifact, gold files at the PR's head commit, from the
    Actions environment; every link is None outside GitHub Actions but the
    documentation's, from `docs_address` (the environment, then where this copy was
    `installed` from).

    On `pull_request` runs `GITHUB_SHA` is a merge commit nobody pushed, so the head
    commit comes from the event payload (`pull_request.head.sha`)."""
    server = environ.get("GITHUB_SERVER_URL") or "https://github.com"
    repo, run_id = environ.get("GITHUB_REPOSITORY"), environ.get("GITHUB_RUN_ID")
    dashboard = environ.get("LLM_EVAL_DASHBOARD_URL") or None
    docs = docs_address(environ, installed)
    if not repo:
        return Links(dashboard=dashboard, docs=docs)
    run = f"{server}/{repo}/actions/runs/{run_id}" if run_id else None
    head = _event_head_sha(environ.get("GITHUB_EVENT_PATH")) or environ.get("GITHUB_SHA")
    return Links(
        run=run,
        artifact=environ.get("LLM_EVAL_ARTIFACT_URL") or run,
        blob=f"{server}/{repo}/blob/{head}/" if head else None,
        head_sha=head,
        dashboard=dashboard,
        docs=docs,
    )


def _event_head_sha(event_path: str | None) -> str | None:
    """`pull_request.head.sha` of the event payload; None for other events or no payload."""
    if not event_path:
        return None
    try:
        event = read_json_file(event_path)
    except InputError:
        return None  # links are a convenience; `llm-eval comment` reports a bad payload
    pull = event.get("pull_request") if isinstance(event, dict) else None
    head = pull.get("head") if isinstance(pull, dict) else None
    sha = head.get("sha") if isinstance(head, dict) else None
    return sha if isinstance(sha, str) and re.fullmatch("[0-9a-f]{40}", sha) else None


def publish(report: Mapping[str, Any], environ: Mapping[str, str], cwd: Path) -> list[str]:
    """Append the job summary when `GITHUB_STEP_SUMMARY` is set; return the workflow
    commands to print (annotations, only when `GITHUB_ACTIONS` is `true`)."""
    lines = []
    summary = environ.get("GITHUB_STEP_SUMMARY")
    if summary:
        lines += append_job_summary(
            report, Path(summary), links_from_env(environ, installed_source())
        )
    if environ.get("GITHUB_ACTIONS") == "true":
        workspace = environ.get("GITHUB_WORKSPACE")
        lines += regression_annotations(report, cwd, Path(workspace) if workspace else None)
    return lines


def append_job_summary(report: Mapping[str, Any], path: Path, links: Links = NO_LINKS) -> list[str]:
    """Append the Markdown report (under 1 MiB) to the job summary file.

    A summary that cannot be written must not change the gate's verdict, so the
    failure comes back as a warning command to print, not as an exception.
    """
    from llm_eval.formats.markdown import render_markdown

    try:
        with path.open("a", encoding="utf-8") as handle:
            handle.write(render_markdown(report, links))
    except OSError as exc:
        return [workflow_command("warning", f"llm-eval: could not append the job summary: {exc}")]
    return []


def regression_annotations(
    report: Mapping[str, Any], cwd: Path, root: Path | None = None
) -> list[str]:
    """Annotations for the worst hit→miss queries, at their line in the gold set: `::error`
    when a blocking gate covering the query failed, `::warning` when a covering gate
    did not pass, `::notice` when no gate that missed its limit covers it. None when
    every gate passes. Paths are relative to `root` (the repository), not to `cwd`."""
    if _LEVEL.get(report["verdict"]) is None:
        return []
    changes = report["changes"]
    return [
        _annotation(_level(report["gates"], change), change, changes["k"], cwd, root or cwd)
        for change in changes["hit_to_miss"][:ANNOTATIONS_MAX]
    ]


def _covers(scope_key: str, change: Mapping[str, Any]) -> bool:
    """Whether a gate's scope (`all`, `tier=A`, `tier=A;tags=x,y`) includes the query."""
    parts = dict(p.partition("=")[::2] for p in scope_key.split(";") if p != "all")
    if "tier" in parts and parts["tier"] != change.get("tier"):
        return False
    tags = [t for t in parts.get("tags", "").split(",") if t]
    return not tags or bool(set(tags) & set(change.get("tags") or ()))


def _level(gates: Sequence[Mapping[str, Any]], change: Mapping[str, Any]) -> str:
    covering = [g for g in gates if _covers(str(g.get("scope_key", "all")), change)]
    if any(g["status"] == "fail" and g.get("blocking", g["severity"] == "error") for g in covering):
        return "error"
    return "warning" if any(g["status"] != "pass" for g in covering) else "notice"


def _annotation(level: str, change: Mapping[str, Any], k: int, cwd: Path, root: Path) -> str:
    from llm_eval.formats._markdown_tables import rank_words
    from llm_eval.formats._markup import clip

    message = (
        f"{clip(str(change['query']), QUERY_MAX_CHARS)}\n"
        f"First relevant document, rank before → after: {rank_words(change['rank_before'])} → "
        f"{rank_words(change['rank_after'])}. Relevant: {', '.join(map(str, change['relevant']))}"
    )
    return workflow_command(
        level,
        message,
        file=relative_path(change.get("file"), cwd, root),
        line=change.get("line"),
        title=f"{change['query_id']} dropped out of the top {k}",
    )


def workflow_command(name: str, message: str, **properties: object) -> str:
    """`::name key=value,…::message`, escaped; properties that are None are left out."""
    given = ",".join(
        f"{key}={escape_property(str(value))}"
        for key, value in properties.items()
        if value is not None
    )
    return f"::{name}{' ' if given else ''}{given}::{escape_data(message)}"


def escape_data(text: str) -> str:
    """A workflow command's message: `%`, CR and LF percent-encoded."""
    return "".join(_DATA_ESCAPES.get(char, char) for char in text)


def escape_property(text: str) -> str:
    """A workflow command's property value: also `:` and `,` percent-encoded."""
    return "".join(_PROPERTY_ESCAPES.get(char, char) for char in text)


def relative_path(path: str | None, cwd: Path, root: Path | None = None) -> str | None:
    """The path relative to the repository `root` (GitHub resolves annotation paths from
    there, even when the gate ran in a subfolder), `/`-separated."""
    if not path:
        return None
    file = Path(path)
    base = root or cwd
    absolute = file if file.is_absolute() else cwd / file
    if absolute.is_relative_to(base):
        return absolute.relative_to(base).as_posix()
    return file.as_posix()
