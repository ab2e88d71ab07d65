"""The pull request's one llm-eval comment, through the GitHub REST API (PyGithub).

The comment is found by two things together: the hidden marker on its first line and
the login of the token that wrote it, so a comment by anyone else that quotes the
marker is never taken over. Every page of comments is searched. PyGithub is imported
on first use.

No message that leaves this module contains the token: failures are rebuilt from the
status and GitHub's message, then scrubbed.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Literal
from urllib.parse import urlsplit

from llm_eval.errors import ExternalError

if TYPE_CHECKING:
    from github.Github import Github
    from github.IssueComment import IssueComment
    from github.PullRequest import PullRequest
    from github.Repository import Repository

DEFAULT_API_URL = "https://api.github.com"
ACTIONS_BOT_LOGIN = "github-actions[bot]"
"""The author of every comment written with the workflow's own GITHUB_TOKEN."""
TIMEOUT_S = 10
PER_PAGE = 100
"""GitHub's largest page: the fewest requests to search a long thread."""


class CommentNotPosted(ExternalError):
    """GitHub refused or failed, or there is no pull request to comment on.

    The message is one line and safe to print.
    """


@dataclass(frozen=True, slots=True)
class Posted:
    """What `upsert_comment` did."""

    action: Literal["created", "updated", "unchanged"]
    url: str
    pr: int


def upsert_comment(
    *,
    token: str,
    api_url: str,
    repo: str,
    body: str,
    marker: str,
    pr: int | None = None,
    head_sha: str | None = None,
    create: bool = True,
) -> Posted | None:
    """Create the comment on the pull request, or update the one this token wrote.

    The pull request is `pr`, or the open one whose head commit is `head_sha`. An
    unchanged body is not written again. With `create` false an existing comment is
    still updated (it must not show a stale state), but none is created: the answer
    is then None.
    """
    _check_token(token)
    _check_api_url(api_url)
    client = _client(token, api_url)
    try:
        with _failures(token, f"reading the repository {repo}"):
            repository = client.get_repo(repo)
        number = pr if pr is not None else _open_pull_for(repository, head_sha or "", token)
        with _failures(token, f"reading pull request #{number} of {repo}"):
            pull = repository.get_pull(number)
        login = _own_login(client, token)
        with _failures(token, f"reading the comments of pull request #{number}"):
            existing = _own_comment(pull, login, marker)
        with _failures(token, f"writing the comment on pull request #{number}"):
            if existing is None and not create:
                return None
            return _write(pull, existing, body, number)
    except (AssertionError, RuntimeError):
        # PyGithub refuses, with `assert`, a URL off its base URL: what a 302 to another
        # host or port leads to, or an HTML page in place of JSON (its objects then have
        # no URL at all); a 301 to another scheme, host or port it refuses with a
        # RuntimeError.
        raise CommentNotPosted(
            f"{_scrub(api_url, token)} does not answer as the GitHub API (an HTML page, or a "
            "redirect to another host or port); check GITHUB_API_URL"
        ) from None
    finally:
        client.close()


def _check_token(token: str) -> None:
    """A token is one word of visible ASCII; anything else would end up in a header error."""
    if not token.isascii() or not token.isprintable() or any(c.isspace() for c in token):
        raise CommentNotPosted(
            "GITHUB_TOKEN holds white space, control or non-ASCII characters (not shown)"
        )


def _check_api_url(api_url: str) -> None:
    parts = urlsplit(api_url)
    if parts.scheme not in ("http", "https") or not parts.hostname:
        shown = api_url if len(api_url) <= 80 else api_url[:77] + "..."
        raise CommentNotPosted(f"GITHUB_API_URL must be an http(s) URL, got {shown!r}")


def _client(token: str, api_url: str) -> Github:
    from github import Auth, Github
    from urllib3.util.retry import Retry

    # Retry only what is safe and brief: GETs after a gateway error. PyGithub's default
    # retry would also sleep until a rate limit resets (up to an hour); here a rate
    # limit is reported at once, since the comment is not worth holding up CI for.
    retry = Retry(
        total=2,
        backoff_factor=0.5,
        status_forcelist=(502, 503, 504),
        allowed_methods=frozenset({"GET"}),
        respect_retry_after_header=False,
        raise_on_status=False,
    )
    # A handful of sequential requests: no pacing between them is needed.
    return Github(
        auth=Auth.Token(token),
        base_url=api_url.rstrip("/"),
        timeout=TIMEOUT_S,
        per_page=PER_PAGE,
        retry=retry,
        seconds_between_requests=None,
        seconds_between_writes=None,
    )


def _open_pull_for(repository: Repository, head_sha: str, token: str) -> int:
    """The open pull request whose head commit is `head_sha` (the newest, if several)."""
    with _failures(token, f"listing the open pull requests of {repository.full_name}"):
        for pull in repository.get_pulls(state="open"):
            if pull.head.sha.lower() == head_sha.lower():
                return int(pull.number)
    raise CommentNotPosted(f"no open pull request of {repository.full_name} has head {head_sha}")


def _own_login(client: Github, token: str) -> str:
    """The login the token writes comments as."""
    from github import GithubException

    try:
        return str(client.get_user().login)
    except GithubException as exc:
        if exc.status != 403:
            raise CommentNotPosted(
                _scrub(f"reading the token's user: {_reason(exc)}", token)
            ) from None
    # GET /user answers 403 to GitHub App installation tokens, and the workflow's
    # GITHUB_TOKEN is one: its comments are written by github-actions[bot]. (A token of
    # another GitHub App writes as `<app-slug>[bot]`, which GitHub does not tell the
    # token itself; such a token would post a new comment each run.)
    return ACTIONS_BOT_LOGIN


def _own_comment(pull: PullRequest, login: str, marker: str) -> IssueComment | None:
    """The first comment by `login` that starts with the marker, over all pages."""
    for comment in pull.get_issue_comments():
        author = comment.user.login if comment.user is not None else ""
        if author.lower() == login.lower() and (comment.body or "").startswith(marker):
            return comment
    return None


def _write(pull: PullRequest, existing: IssueComment | None, body: str, number: int) -> Posted:
    if existing is None:
        created = pull.create_issue_comment(body)
        return Posted("created", created.html_url, number)
    if _same(existing.body or "", body):
        return Posted("unchanged", existing.html_url, number)
    existing.edit(body)
    return Posted("updated", existing.html_url, number)


def _same(stored: str, body: str) -> bool:
    """Equal up to line ends and trailing white space, which GitHub may normalise."""
    return stored.replace("\r\n", "\n").rstrip() == body.replace("\r\n", "\n").rstrip()


@contextmanager
def _failures(token: str, doing: str) -> Iterator[None]:
    """Turn PyGithub's and requests' exceptions into one scrubbed `CommentNotPosted` line."""
    import requests
    from github import GithubException

    try:
        yield
    except GithubException as exc:
        raise CommentNotPosted(_scrub(f"{doing}: {_reason(exc)}", token)) from None
    except requests.RequestException as exc:
        raise CommentNotPosted(_scrub(f"{doing}: {type(exc).__name__}: {exc}", token)) from None


def _reason(exc: Any) -> str:
    """`GitHub answered 403 (…message…): what that means`, from the status and body only.

    PyGithub keeps the response headers in the exception; they are never printed.
    """
    data = exc.data if isinstance(exc.data, dict) else {}
    message = " ".join(str(data.get("message") or "").split())
    text = f"GitHub answered {exc.status}" + (f" ({message})" if message else "")
    hint = _hint(exc.status, message.lower(), exc.headers or {})
    return f"{text}: {hint}" if hint else text


def _hint(status: int, message: str, headers: dict[str, str]) -> str:
    remaining = {k.lower(): v for k, v in headers.items()}.get("x-ratelimit-remaining")
    if status == 429 or (status == 403 and (remaining == "0" or "rate limit" in message)):
        return "rate limit exceeded"
    if status == 403 and "not accessible by integration" in message:
        return "the token is read-only (pull requests from forks get a read-only GITHUB_TOKEN)"
    if status == 401:
        return "the token is not valid"
    if status == 403:
        return "the token may not do this"
    if status == 404:
        return "not found, or not visible to the token"
    return ""


def _scrub(text: str, token: str) -> str:
    """The text without the token, in any form a message may quote it (raw, as a repr)."""
    for form in sorted({token, token.strip(), repr(token)[1:-1]} - {""}, key=len, reverse=True):
        text = text.replace(form, "***")
    return text
