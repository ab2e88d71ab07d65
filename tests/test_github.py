"""`llm-eval comment`: the real CLI and the real PyGithub against a local GitHub API."""

from __future__ import annotations

import json
from collections import Counter
from collections.abc import Iterator
from pathlib import Path
from typing import get_args

import pytest
from conftest import Cli
from fake_github import FakeGitHub, serve

from llm_eval import defaults
from llm_eval.commands.comment import Target, When, resolve_target, withheld_because
from llm_eval.errors import InputError
from llm_eval.formats.markdown import COMMENT_MARKER, render_comment
from llm_eval.github import CommentNotPosted

REPORTS = Path(__file__).parent / "gold" / "reports"
TOKEN = "ghp_s3cret-token-0123456789abcdefghijklmnopqrstu"
APP_TOKEN = "ghs_installation-token-0123456789abcdefghijklmno"
READ_ONLY = "ghs_fork-read-only-token-0123456789abcdefghijklm"
HEAD = "9f" * 20


@pytest.fixture
def github(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> Iterator[FakeGitHub]:
    """A fake GitHub with PR #7 of octo/demo; the environment of a pull_request job."""
    state = FakeGitHub(
        users={TOKEN: "llm-eval-bot", READ_ONLY: "github-actions[bot]"},
        app_tokens={APP_TOKEN: "github-actions[bot]"},
        read_only={READ_ONLY},
    )
    state.add_pull(7, HEAD)
    event = tmp_path / "event.json"
    event.write_text(json.dumps({"action": "synchronize", "pull_request": {"number": 7}}))
    with serve(state):
        monkeypatch.setenv("GITHUB_API_URL", state.base_url)
        monkeypatch.setenv("GITHUB_REPOSITORY", "octo/demo")
        monkeypatch.setenv("GITHUB_EVENT_PATH", str(event))
        monkeypatch.setenv("GITHUB_TOKEN", TOKEN)
        yield state


def comment(cli: Cli, *args: str, report: str = "failure") -> tuple[int, str, str]:
    """`llm-eval comment --report REPORT ARGS` on one of the sample reports."""
    return cli("comment", "--report", REPORTS / f"{report}.json", *args)


def body(report: str) -> str:
    return render_comment(json.loads((REPORTS / f"{report}.json").read_text(encoding="utf-8")))


def test_create_then_update_in_place_then_leave_alone(github: FakeGitHub, cli: Cli) -> None:
    assert comment(cli, report="failure")[0] == 0
    (created,) = github.comments[7]
    assert (created.login, created.body) == ("llm-eval-bot", body("failure"))
    assert [r.method for r in github.writes()] == ["POST"]

    assert comment(cli, report="pass")[0] == 0
    assert github.comments[7] == [created]
    assert created.body == body("pass")
    assert [r.method for r in github.writes()] == ["POST", "PATCH"]
    assert github.writes()[1].path == f"/repos/octo/demo/issues/comments/{created.id}"

    assert comment(cli, report="pass")[0] == 0
    assert [r.method for r in github.writes()] == ["POST", "PATCH"]  # nothing written


def test_the_own_comment_is_found_on_the_last_page_among_150_others(
    github: FakeGitHub, cli: Cli
) -> None:
    for i in range(150):
        quoting = i % 7 == 0  # others may quote the marker; their comments are not ours
        github.add_comment(7, f"user{i % 5}", f"{COMMENT_MARKER}\nfake" if quoting else f"c{i}")
    own = github.add_comment(7, "llm-eval-bot", f"{COMMENT_MARKER}\nold")
    code, out, _ = comment(cli)
    assert code == 0
    assert own.body == body("failure")
    assert len(github.comments[7]) == 151
    pages = [r.path for r in github.requests if r.path.startswith("/repos/octo/demo/issues/7/")]
    assert len(pages) == 2  # 100 a page: both pages were read
    assert "page=2" in pages[1]
    assert out == (
        f"llm-eval comment: updated: https://github.example/octo/demo/pull/7#issuecomment-{own.id}\n"
    )


def test_a_marker_in_a_comment_by_someone_else_is_never_taken_over(
    github: FakeGitHub, cli: Cli
) -> None:
    theirs = github.add_comment(7, "mallory", f"{COMMENT_MARKER}\nplease overwrite me")
    assert comment(cli)[0] == 0
    assert theirs.body == f"{COMMENT_MARKER}\nplease overwrite me"
    assert [c.login for c in github.comments[7]] == ["mallory", "llm-eval-bot"]


def test_head_sha_finds_the_open_pull_request_across_pages(
    github: FakeGitHub, monkeypatch: pytest.MonkeyPatch, cli: Cli
) -> None:
    monkeypatch.delenv("GITHUB_EVENT_PATH")  # a workflow_run: no pull_request in the event
    for number in range(100, 230):
        github.add_pull(number, f"{number:040x}")
    github.add_pull(42, "ab" * 20)
    github.add_pull(300, "ab" * 20, state="closed")  # the same commit, closed: not this one
    assert comment(cli, "--head-sha", "AB" * 20)[0] == 0
    assert [c.login for c in github.comments[42]] == ["llm-eval-bot"]
    assert github.comments[300] == []
    listed = [r.path for r in github.requests if r.path.startswith("/repos/octo/demo/pulls?")]
    assert all("state=open" in path for path in listed) and len(listed) == 2


def test_no_open_pull_request_for_the_head_sha_is_a_warning(github: FakeGitHub, cli: Cli) -> None:
    code, _, err = comment(cli, "--head-sha", "cd" * 20)
    assert code == 0
    assert err == (
        f"llm-eval comment: warning: no comment posted: no open pull request of octo/demo has "
        f"head {'cd' * 20} (the gate's verdict stands; --strict makes this an error)\n"
    )
    assert github.writes() == []


def test_an_installation_token_falls_back_to_the_actions_bot_login(
    github: FakeGitHub, monkeypatch: pytest.MonkeyPatch, cli: Cli
) -> None:
    monkeypatch.setenv("GITHUB_TOKEN", APP_TOKEN)
    github.add_comment(7, "llm-eval-bot", f"{COMMENT_MARKER}\nanother bot's")
    own = github.add_comment(7, "github-actions[bot]", f"{COMMENT_MARKER}\nold")
    assert comment(cli)[0] == 0
    assert own.body == body("failure")
    assert [r.method for r in github.writes()] == ["PATCH"]
    assert any(r.path == "/user" for r in github.requests)  # asked, got 403, fell back


def test_a_read_only_token_warns_and_exits_0_or_4_with_strict(
    github: FakeGitHub, monkeypatch: pytest.MonkeyPatch, cli: Cli
) -> None:
    monkeypatch.setenv("GITHUB_TOKEN", READ_ONLY)
    code, _, err = comment(cli)
    assert code == 0
    assert err == (
        "llm-eval comment: warning: no comment posted: writing the comment on pull request #7: "
        "GitHub answered 403 (Resource not accessible by integration): the token is read-only "
        "(pull requests from forks get a read-only GITHUB_TOKEN) (the gate's verdict stands; "
        "--strict makes this an error)\n"
    )
    code, _, err = comment(cli, "--strict")
    assert code == 4
    assert err.startswith(
        "llm-eval: error: writing the comment on pull request #7: GitHub answered 403"
    )
    assert github.comments[7] == []


@pytest.mark.parametrize(
    ("setup", "message"),
    [
        (
            lambda gh: gh.forced.update({"GET /repos/octo/demo/pulls/7": 404}),
            "reading pull request #7 of octo/demo: GitHub answered 404 (Forced failure): "
            "not found, or not visible to the token",
        ),
        (
            lambda gh: setattr(gh, "repo", "octo/other"),
            "reading the repository octo/demo: GitHub answered 404 (Not Found): "
            "not found, or not visible to the token",
        ),
        (
            lambda gh: setattr(gh, "rate_limited", True),
            "reading the repository octo/demo: GitHub answered 403 (API rate limit exceeded for "
            "installation ID 1.): rate limit exceeded",
        ),
        (
            lambda gh: gh.forced.update({"GET /repos/octo/demo/issues/7/comments": 500}),
            "reading the comments of pull request #7: GitHub answered 500 (Forced failure)",
        ),
    ],
)
def test_github_failures_warn_and_exit_0_or_4_with_strict_without_retrying(
    github: FakeGitHub,
    cli: Cli,
    setup: object,
    message: str,
) -> None:
    setup(github)  # type: ignore[operator]
    code, _, warned = comment(cli)
    assert code == 0
    asked_once = Counter((r.method, r.path) for r in github.requests)
    code, _, failed = comment(cli, "--strict")
    assert code == 4
    # No retry (and so no waiting for a rate limit to reset): each run asks each thing once.
    assert max(asked_once.values()) == 1
    assert Counter((r.method, r.path) for r in github.requests) == asked_once + asked_once
    assert warned == (
        f"llm-eval comment: warning: no comment posted: {message} (the gate's verdict stands; "
        "--strict makes this an error)\n"
    )
    assert failed == f"llm-eval: error: {message}\n"
    assert github.writes() == []


def test_the_token_never_appears_in_the_output(
    github: FakeGitHub, monkeypatch: pytest.MonkeyPatch, cli: Cli
) -> None:
    github.echo_authorization = True  # error bodies quote the request's Authorization header
    github.forced["POST /repos/octo/demo/issues/7/comments"] = 422
    printed = [comment(cli, *args)[1:] for args in ([], ["--strict"])]
    monkeypatch.setenv("GITHUB_TOKEN", READ_ONLY)
    printed.append(comment(cli, "--strict")[1:])
    output = "".join(out + err for out, err in printed)
    assert "request had Authorization: token ***" in output  # the echo arrived, scrubbed
    for secret in (TOKEN, READ_ONLY, TOKEN[4:20]):
        assert secret not in output


@pytest.mark.parametrize("answer", ["html", "redirect"])
def test_an_api_that_is_not_github_warns_and_exits_0_or_4_with_strict(
    github: FakeGitHub, cli: Cli, answer: str
) -> None:
    elsewhere = FakeGitHub(users={TOKEN: "llm-eval-bot"})
    elsewhere.add_pull(7, HEAD)
    with serve(elsewhere):
        if answer == "html":
            github.html = True
        else:
            github.redirect = elsewhere.base_url
        code, _, warned = comment(cli)
        assert code == 0
        code, _, failed = comment(cli, "--strict")
        assert code == 4
    message = (
        f"{github.base_url} does not answer as the GitHub API (an HTML page, or a redirect to "
        "another host or port); check GITHUB_API_URL"
    )
    assert warned == (
        f"llm-eval comment: warning: no comment posted: {message} (the gate's verdict stands; "
        "--strict makes this an error)\n"
    )
    assert failed == f"llm-eval: error: {message}\n"
    assert elsewhere.writes() == []


@pytest.mark.parametrize("url", ["ftp://127.0.0.1/api", "api.github.com", "file:///etc/passwd"])
def test_an_api_url_that_is_not_http_is_refused_before_any_request(
    github: FakeGitHub,
    monkeypatch: pytest.MonkeyPatch,
    cli: Cli,
    url: str,
) -> None:
    monkeypatch.setenv("GITHUB_API_URL", url)
    code, _, err = comment(cli, "--strict")
    assert code == 4
    assert err == (f"llm-eval: error: GITHUB_API_URL must be an http(s) URL, got {url!r}\n")
    assert github.requests == []


def test_a_token_with_a_line_end_is_stripped(
    github: FakeGitHub, monkeypatch: pytest.MonkeyPatch, cli: Cli
) -> None:
    monkeypatch.setenv("GITHUB_TOKEN", f"  {TOKEN}\r\n")
    assert comment(cli, "--strict")[0] == 0
    assert [c.login for c in github.comments[7]] == ["llm-eval-bot"]


@pytest.mark.parametrize("token", [f"{TOKEN}\nmore", f"{TOKEN}\x07", f"{TOKEN}é", f"a {TOKEN}"])
def test_a_token_that_cannot_be_one_is_never_shown(
    github: FakeGitHub,
    monkeypatch: pytest.MonkeyPatch,
    cli: Cli,
    token: str,
) -> None:
    monkeypatch.setenv("GITHUB_TOKEN", token)
    code, _, err = comment(cli, "--strict")
    assert code == 4
    assert err == (
        "llm-eval: error: GITHUB_TOKEN holds white space, control or non-ASCII characters "
        "(not shown)\n"
    )
    assert github.requests == []


def test_dry_run_prints_the_body_and_touches_nothing(github: FakeGitHub, cli: Cli) -> None:
    assert comment(cli, "--dry-run")[:2] == (0, body("failure"))
    assert github.requests == []


def test_outside_a_pull_request_there_is_nothing_to_comment_on(
    github: FakeGitHub,
    monkeypatch: pytest.MonkeyPatch,
    tmp_path: Path,
    cli: Cli,
) -> None:
    push = tmp_path / "push.json"
    push.write_text(json.dumps({"ref": "refs/heads/main"}))
    monkeypatch.setenv("GITHUB_EVENT_PATH", str(push))
    code, _, err = comment(cli)
    assert code == 0
    assert "no pull request: give --pr or --head-sha" in err
    monkeypatch.delenv("GITHUB_TOKEN")
    assert comment(cli, "--pr", "7", "--strict")[::2] == (
        4,
        "llm-eval: error: GITHUB_TOKEN is not set\n",
    )
    assert github.requests == []


def test_a_report_that_is_not_one_exits_3(github: FakeGitHub, tmp_path: Path, cli: Cli) -> None:
    bad = tmp_path / "report.json"
    bad.write_text(json.dumps({"schema_version": 1, "gates": "nope"}))
    assert cli("comment", "--report", bad)[::2] == (
        3,
        f"llm-eval: error: {bad}: changes: missing required key\n",
    )
    bad.write_text(json.dumps({"schema_version": 99}))
    code, _, err = cli("comment", "--report", bad)
    assert code == 3
    assert "schema_version 99 is not supported (this llm-eval reads 1)" in err


def test_pr_and_head_sha_together_are_a_usage_error(github: FakeGitHub, cli: Cli) -> None:
    assert comment(cli, "--pr", "7", "--head-sha", HEAD)[0] == 2


@pytest.mark.parametrize(
    ("env", "options", "target"),
    [
        ({"GITHUB_REPOSITORY": "o/r"}, ("x/y", 3, None), Target("x/y", 3, None)),
        ({"GITHUB_REPOSITORY": "o/r"}, (None, None, "abc"), Target("o/r", None, "abc")),
        (
            {"GITHUB_REPOSITORY": "o/r", "GITHUB_EVENT_PATH": "{pr_event}"},
            (None, None, None),
            Target("o/r", 12, None),
        ),
        (
            {"GITHUB_REPOSITORY": "o/r", "GITHUB_EVENT_PATH": "{pr_event}"},
            (None, 5, None),
            Target("o/r", 5, None),
        ),
    ],
)
def test_resolve_target(
    tmp_path: Path,
    env: dict[str, str],
    options: tuple[str | None, int | None, str | None],
    target: Target,
) -> None:
    event = tmp_path / "event.json"
    event.write_text(json.dumps({"pull_request": {"number": 12}}))
    environ = {k: v.format(pr_event=event) for k, v in env.items()}
    assert resolve_target(environ, *options) == target


def test_resolve_target_failures(tmp_path: Path) -> None:
    with pytest.raises(CommentNotPosted, match="no repository"):
        resolve_target({}, None, 1, None)
    with pytest.raises(InputError, match="--repo: expected OWNER/NAME, got 'nope'"):
        resolve_target({}, "nope", 1, None)
    broken = tmp_path / "event.json"
    broken.write_text("{")
    with pytest.raises(InputError, match=r"event\.json:1: invalid JSON: Expecting property name"):
        resolve_target({"GITHUB_EVENT_PATH": str(broken)}, "o/r", None, None)


# --- when a new comment is posted (--when) -------------------------------------------


def test_an_unchanged_pass_posts_no_new_comment(github: FakeGitHub, cli: Cli) -> None:
    code, out, _ = comment(cli, report="pass")
    assert code == 0
    assert github.comments[7] == []
    assert github.writes() == []
    assert out == ("llm-eval comment: not posted: unchanged pass (comment: on_change)\n")


def test_an_unchanged_pass_updates_the_comment_already_there(github: FakeGitHub, cli: Cli) -> None:
    own = github.add_comment(7, "llm-eval-bot", f"{COMMENT_MARKER}\nthe failure of a run before")
    code, out, _ = comment(cli, report="pass")
    assert code == 0
    assert github.comments[7] == [own]
    assert own.body == body("pass")
    assert [r.method for r in github.writes()] == ["PATCH"]
    assert out == (
        f"llm-eval comment: updated: https://github.example/octo/demo/pull/7#issuecomment-{own.id}\n"
    )


@pytest.mark.parametrize(
    ("when", "report", "posted"),
    [
        ("on_change", "failure", True),
        ("on_change", "warning", True),
        ("on_change", "inconclusive", True),
        ("on_change", "no_baseline", True),  # nothing to tell a change by: not "unchanged"
        ("on_change", "gold_changed", True),
        ("on_change", "pass", False),
        ("on_fail", "failure", True),
        ("on_fail", "gold_changed", True),
        ("on_fail", "warning", False),
        ("on_fail", "inconclusive", False),
        ("on_fail", "pass", False),
        ("always", "pass", True),
        ("always", "warning", True),
    ],
)
def test_when_a_new_comment_is_posted(
    github: FakeGitHub,
    cli: Cli,
    when: str,
    report: str,
    posted: bool,
) -> None:
    code, out, _ = comment(cli, "--when", when, report=report)
    assert code == 0
    if posted:
        (created,) = github.comments[7]
        assert created.body == body(report)
        assert out == (
            "llm-eval comment: posted: "
            f"https://github.example/octo/demo/pull/7#issuecomment-{created.id}\n"
        )
    else:
        assert github.writes() == []
        assert out.startswith("llm-eval comment: not posted: ")
        assert out.endswith(f" (comment: {when})\n")


def test_on_fail_updates_the_comment_already_there_to_the_pass(
    github: FakeGitHub, cli: Cli
) -> None:
    assert comment(cli, "--when", "on_fail", report="failure")[0] == 0
    (created,) = github.comments[7]
    assert comment(cli, "--when", "on_fail", report="warning")[0] == 0
    assert github.comments[7] == [created]
    assert created.body == body("warning")


@pytest.mark.parametrize(
    ("when", "report", "withheld"),
    [
        ("on_change", "pass", "unchanged pass"),
        ("on_fail", "pass", "the check passes (pass)"),
        ("on_fail", "warning", "the check passes (warning)"),
        ("on_fail", "inconclusive", "the check passes (cannot tell)"),
        ("on_change", "inconclusive", None),
        ("on_fail", "failure", None),
        ("always", "pass", None),
    ],
)
def test_withheld_because(when: When, report: str, withheld: str | None) -> None:
    data = json.loads((REPORTS / f"{report}.json").read_text(encoding="utf-8"))
    assert withheld_because(data, when) == withheld


def test_a_pass_in_which_one_gate_moved_or_says_no_reason_is_a_change() -> None:
    data = json.loads((REPORTS / "pass.json").read_text(encoding="utf-8"))
    data["gates"][1]["reason"] = "within"
    assert withheld_because(data, "on_change") is None
    del data["gates"][1]["reason"]  # optional in the schema: not known to be unchanged
    assert withheld_because(data, "on_change") is None


def test_the_when_choices_are_the_commands() -> None:
    assert get_args(When) == defaults.COMMENT_WHEN_CHOICES
    assert defaults.COMMENT_WHEN in defaults.COMMENT_WHEN_CHOICES


def test_an_unknown_when_is_a_usage_error(github: FakeGitHub, cli: Cli) -> None:
    code, _, err = comment(cli, "--when", "sometimes")
    assert code == 2
    assert "'sometimes' is not one of 'always', 'on_change', 'on_fail'" in err
    assert github.requests == []
