"""Around the gate in CI and git: `hook install|uninstall`, `comment`, `cache-key`."""

from __future__ import annotations

import os
from pathlib import Path
from typing import cast

import click

from llm_eval import defaults
from llm_eval.cli.root import (
    CONFIG_OPTION,
    cli,
    config_options,
    echo,
)


@cli.group()
def hook() -> None:
    """Install or remove the git pre-push check."""


@hook.command("install")
@config_options
@click.option(
    "--watch",
    metavar="PATH",
    multiple=True,
    help="Run the gate only when a push changes this path (repeatable; a git pathspec "
    "from the repository root). Default: config/, gold/ and the files the config names.",
)
@click.option(
    "--each-commit",
    is_flag=True,
    help="Gate every pushed commit that changes a watched path (oldest first), not only "
    "the tip of each pushed branch.",
)
@click.option("--force", is_flag=True, help="Replace a pre-push hook llm-eval did not write.")
def hook_install(
    config_path: Path,
    criteria_path: Path,
    baseline_path: Path | None,
    watch: tuple[str, ...],
    each_commit: bool,
    force: bool,
) -> None:
    """Install the pre-push hook that runs the gate (honours core.hooksPath)."""
    from llm_eval.commands.hook import install

    outcome = install(
        config_path=config_path,
        criteria_path=criteria_path,
        baseline_path=baseline_path,
        watch=watch,
        force=force,
        each_commit=each_commit,
    )
    echo(outcome.text)


@hook.command("uninstall")
def hook_uninstall() -> None:
    """Remove the pre-push hook, if llm-eval wrote it."""
    from llm_eval.commands.hook import uninstall

    echo(uninstall().text)


@cli.command("comment", short_help="Post or update the pull request's llm-eval comment.")
@click.option(
    "--report",
    "report_path",
    type=click.Path(path_type=Path),
    default=".llm-eval/report.json",
    show_default=True,
    help="The report of `llm-eval gate` to post.",
)
@click.option("--repo", help="OWNER/NAME (default: $GITHUB_REPOSITORY).")
@click.option(
    "--pr",
    type=click.IntRange(min=1),
    help="Pull request number (default: the pull_request event in $GITHUB_EVENT_PATH).",
)
@click.option(
    "--head-sha",
    help="Comment on the open pull request whose head is this commit (for workflow_run).",
)
@click.option("--dry-run", is_flag=True, help="Print the comment instead; touch nothing.")
@click.option(
    "--strict",
    is_flag=True,
    help="Exit 4 when the comment cannot be posted (default: a warning, exit 0).",
)
@click.option(
    "--id",
    "marker_id",
    help="Keep a comment of its own for this gate (letters, digits, . _ -), e.g. the "
    "config's name when several gates run on one pull request.",
)
@click.option(
    "--when",
    type=click.Choice(defaults.COMMENT_WHEN_CHOICES),
    default=defaults.COMMENT_WHEN,
    show_default=True,
    help="When to post a new comment: every run; unless the gate passed and no query's "
    "score moved; only when the check fails. A comment already there is always updated.",
)
def comment_command(
    report_path: Path,
    repo: str | None,
    pr: int | None,
    head_sha: str | None,
    dry_run: bool,
    strict: bool,
    marker_id: str | None,
    when: str,
) -> None:
    """Post or update the pull request's one llm-eval comment (token: $GITHUB_TOKEN)."""
    from llm_eval.commands.comment import When, comment
    from llm_eval.formats.markdown import MARKER_ID

    if pr is not None and head_sha:
        raise click.UsageError("give --pr or --head-sha, not both")
    if marker_id is not None and not MARKER_ID.fullmatch(marker_id):
        raise click.UsageError(f"--id {marker_id!r}: use letters, digits, . _ - (at most 64)")
    outcome = comment(
        marker_id=marker_id,
        report_path=report_path,
        environ=os.environ,
        repo=repo,
        pr=pr,
        head_sha=head_sha,
        dry_run=dry_run,
        strict=strict,
        when=cast("When", when),
    )
    echo(outcome.text, err=outcome.to_stderr)


@cli.command("cache-key", short_help="Print the key under which CI keeps the cache.")
@CONFIG_OPTION
def cache_key_command(config_path: Path) -> None:
    """Print key=, restore-key= and path= of the output folder's cache for GitHub's cache
    action (append them to $GITHUB_OUTPUT): the key is made of the operating system,
    the retriever (model files or endpoint, settings) and the corpus file; restore-key,
    without the corpus, finds the last cache of the same retriever. Nothing is printed
    when the retriever reads a run file or there is none: nothing to cache."""
    from llm_eval.commands.cache_key import cache_key

    found = cache_key(config_path)
    if found is not None:
        echo(found.outputs())
