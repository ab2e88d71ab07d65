"""A local server that speaks the part of the GitHub REST API `llm-eval comment` uses.

It runs on 127.0.0.1 on a free port in a thread, keeps pull requests and issue
comments in memory, paginates with `Link` headers as GitHub does, and records every
request. Failures GitHub gives are switches: read-only tokens (fork pull requests),
App installation tokens (GET /user answers 403), the rate limit, and forced statuses.
"""

from __future__ import annotations

import json
import re
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any
from urllib.parse import parse_qs, urlencode, urlsplit

WEB = "https://github.example"


@dataclass
class Comment:
    id: int
    login: str
    body: str


@dataclass
class Pull:
    number: int
    head_sha: str
    state: str = "open"


@dataclass
class Request:
    method: str
    path: str
    """Path and query string."""
    body: dict[str, Any] | None = None


@dataclass
class FakeGitHub:
    """The state behind the server; tests set it up and read it afterwards."""

    repo: str = "octo/demo"
    users: dict[str, str] = field(default_factory=dict)
    """token → login."""
    app_tokens: dict[str, str] = field(default_factory=dict)
    """token → the bot login it writes as; GET /user answers 403 to these."""
    read_only: set[str] = field(default_factory=set)
    """Tokens that may read but not write (a fork's GITHUB_TOKEN)."""
    pulls: dict[int, Pull] = field(default_factory=dict)
    comments: dict[int, list[Comment]] = field(default_factory=dict)
    rate_limited: bool = False
    echo_authorization: bool = False
    """Error bodies quote the Authorization header, as a careless proxy might."""
    html: bool = False
    """Answer everything 200 with an HTML page, as a proxy's login page or a wrong URL does."""
    redirect: str = ""
    """Answer everything with a redirect to this base URL (another host or port)."""
    redirect_status: int = 302
    forced: dict[str, int] = field(default_factory=dict)
    """`"GET /repos/octo/demo/pulls/7"` → the status to answer with."""
    requests: list[Request] = field(default_factory=list)
    base_url: str = ""
    _next_id: int = 1000

    def add_pull(self, number: int, head_sha: str, state: str = "open") -> None:
        self.pulls[number] = Pull(number, head_sha, state)
        self.comments.setdefault(number, [])

    def add_comment(self, number: int, login: str, body: str) -> Comment:
        self._next_id += 1
        comment = Comment(self._next_id, login, body)
        self.comments.setdefault(number, []).append(comment)
        return comment

    def writes(self) -> list[Request]:
        return [r for r in self.requests if r.method in ("POST", "PATCH")]


class _Handler(BaseHTTPRequestHandler):
    server: _Server

    def log_message(self, format: str, *args: Any) -> None:  # keep test output clean
        pass

    def do_GET(self) -> None:
        self._handle("GET")

    def do_POST(self) -> None:
        self._handle("POST")

    def do_PATCH(self) -> None:
        self._handle("PATCH")

    def _handle(self, method: str) -> None:
        state = self.server.state
        length = int(self.headers.get("Content-Length") or 0)
        body = json.loads(self.rfile.read(length)) if length else None
        state.requests.append(Request(method, self.path, body))
        url = urlsplit(self.path)
        query = {k: v[0] for k, v in parse_qs(url.query).items()}
        token = (self.headers.get("Authorization") or "").removeprefix("token ").strip()
        token = token.removeprefix("Bearer ").strip()
        if state.html or state.redirect:
            self._answer_oddly(state)
            return
        status, payload, headers = _route(state, method, url.path, query, token, body)
        if status >= 400 and state.echo_authorization:
            payload["message"] += (
                f" (request had Authorization: {self.headers.get('Authorization')})"
            )
        data = json.dumps(payload).encode()
        self.send_response(status)
        self.send_header("Content-Type", "application/json; charset=utf-8")
        self.send_header("Content-Length", str(len(data)))
        for name, value in headers.items():
            self.send_header(name, value)
        self.end_headers()
        self.wfile.write(data)

    def _answer_oddly(self, state: FakeGitHub) -> None:
        """An HTML page, or a redirect elsewhere, whatever was asked."""
        data = b"<!DOCTYPE html><html><body>Sign in to continue</body></html>"
        self.send_response(state.redirect_status if state.redirect else 200)
        if state.redirect:
            self.send_header("Location", state.redirect + self.path)
        self.send_header("Content-Type", "text/html; charset=utf-8")
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)


class _Server(ThreadingHTTPServer):
    daemon_threads = True

    def __init__(self, state: FakeGitHub) -> None:
        super().__init__(("127.0.0.1", 0), _Handler)
        self.state = state


Response = tuple[int, Any, dict[str, str]]


def _error(status: int, message: str, headers: dict[str, str] | None = None) -> Response:
    return (
        status,
        {"message": message, "documentation_url": "https://docs.github.com/rest"},
        (headers or {}),
    )


def _route(
    state: FakeGitHub,
    method: str,
    path: str,
    query: dict[str, str],
    token: str,
    body: dict[str, Any] | None,
) -> Response:
    if state.rate_limited:
        return _error(
            403,
            "API rate limit exceeded for installation ID 1.",
            {"X-RateLimit-Remaining": "0", "X-RateLimit-Reset": "4102444800"},
        )
    if f"{method} {path}" in state.forced:
        return _error(state.forced[f"{method} {path}"], "Forced failure")
    login = state.users.get(token) or state.app_tokens.get(token)
    if login is None:
        return _error(401, "Bad credentials")
    if method != "GET" and token in state.read_only:
        return _error(403, "Resource not accessible by integration")
    if path == "/user":
        if token in state.app_tokens:
            return _error(403, "Resource not accessible by integration")
        return 200, {"login": login, "id": 1, "type": "User"}, {}
    repo_path = f"/repos/{state.repo}"
    if not path.startswith(repo_path):
        return _error(404, "Not Found")
    rest = path[len(repo_path) :]
    for pattern, handler in _ROUTES:
        match = re.fullmatch(pattern, f"{method} {rest}")
        if match:
            return handler(state, login, query, body, *match.groups())
    return _error(404, "Not Found")


def _repository(state: FakeGitHub, *_: Any) -> Response:
    owner, name = state.repo.split("/")
    return (
        200,
        {
            "id": 1,
            "name": name,
            "full_name": state.repo,
            "owner": {"login": owner},
            "url": f"{state.base_url}/repos/{state.repo}",
            "html_url": f"{WEB}/{state.repo}",
        },
        {},
    )


def _pull_json(state: FakeGitHub, pull: Pull) -> dict[str, Any]:
    api = f"{state.base_url}/repos/{state.repo}"
    return {
        "number": pull.number,
        "state": pull.state,
        "url": f"{api}/pulls/{pull.number}",
        "issue_url": f"{api}/issues/{pull.number}",
        "html_url": f"{WEB}/{state.repo}/pull/{pull.number}",
        "head": {"sha": pull.head_sha, "ref": f"branch-{pull.number}"},
    }


def _pull(state: FakeGitHub, login: str, query: dict[str, str], body: Any, number: str) -> Response:
    pull = state.pulls.get(int(number))
    if pull is None:
        return _error(404, "Not Found")
    return 200, _pull_json(state, pull), {}


def _pulls(state: FakeGitHub, login: str, query: dict[str, str], body: Any) -> Response:
    wanted = query.get("state", "open")
    pulls = sorted(state.pulls.values(), key=lambda p: -p.number)  # newest first
    items = [_pull_json(state, p) for p in pulls if wanted in ("all", p.state)]
    return _page(state, f"/repos/{state.repo}/pulls", query, items)


def _comment_json(state: FakeGitHub, number: int, comment: Comment) -> dict[str, Any]:
    return {
        "id": comment.id,
        "body": comment.body,
        "user": {"login": comment.login, "id": 2, "type": "User"},
        "url": f"{state.base_url}/repos/{state.repo}/issues/comments/{comment.id}",
        "html_url": f"{WEB}/{state.repo}/pull/{number}#issuecomment-{comment.id}",
    }


def _comments(
    state: FakeGitHub, login: str, query: dict[str, str], body: Any, number: str
) -> Response:
    if int(number) not in state.comments:
        return _error(404, "Not Found")
    items = [_comment_json(state, int(number), c) for c in state.comments[int(number)]]
    return _page(state, f"/repos/{state.repo}/issues/{number}/comments", query, items)


def _create(
    state: FakeGitHub, login: str, query: dict[str, str], body: Any, number: str
) -> Response:
    if int(number) not in state.comments:
        return _error(404, "Not Found")
    comment = state.add_comment(int(number), login, body["body"])
    return 201, _comment_json(state, int(number), comment), {}


def _edit(state: FakeGitHub, login: str, query: dict[str, str], body: Any, ident: str) -> Response:
    for number, comments in state.comments.items():
        for comment in comments:
            if comment.id == int(ident):
                if comment.login != login:
                    return _error(403, "You do not have permission to edit this comment")
                comment.body = body["body"]
                return 200, _comment_json(state, number, comment), {}
    return _error(404, "Not Found")


def _page(state: FakeGitHub, path: str, query: dict[str, str], items: list[Any]) -> Response:
    """One page of `items` and GitHub's `Link` header (`per_page` up to 100, default 30)."""
    per_page = min(int(query.get("per_page", 30)), 100)
    page = int(query.get("page", 1))
    last = max(1, -(-len(items) // per_page))
    links = []
    base = {k: v for k, v in query.items() if k not in ("page", "per_page")}

    def link(number: int, rel: str) -> str:
        params = urlencode({**base, "per_page": per_page, "page": number})
        return f'<{state.base_url}{path}?{params}>; rel="{rel}"'

    if page < last:
        links += [link(page + 1, "next"), link(last, "last")]
    if page > 1:
        links += [link(1, "first"), link(page - 1, "prev")]
    headers = {"Link": ", ".join(links)} if links else {}
    return 200, items[(page - 1) * per_page : page * per_page], headers


_ROUTES = [
    (r"GET ", _repository),
    (r"GET /pulls", _pulls),
    (r"GET /pulls/(\d+)", _pull),
    (r"GET /issues/(\d+)/comments", _comments),
    (r"POST /issues/(\d+)/comments", _create),
    (r"PATCH /issues/comments/(\d+)", _edit),
]


@contextmanager
def serve(state: FakeGitHub) -> Iterator[FakeGitHub]:
    """Run the server for the duration of the block; `state.base_url` is its address."""
    server = _Server(state)
    state.base_url = f"http://127.0.0.1:{server.server_address[1]}"
    thread = threading.Thread(target=server.serve_forever, args=(0.01,), daemon=True)
    thread.start()
    try:
        yield state
    finally:
        server.shutdown()
        server.server_close()
        thread.join()
