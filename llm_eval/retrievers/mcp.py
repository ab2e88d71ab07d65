"""A search tool of a Model Context Protocol server, called through the official SDK.

    retriever:
      kind: mcp
      command: [python, -m, my_rag.mcp_server]     # a server over stdio, or:
      # url: http://127.0.0.1:8000/mcp             # a streamable HTTP server
      tool: search
      arguments: {query: "${query}", limit: "${top_k}"}
      results_path: hits                           # as for http
      fields: {doc_id: id, score: score, text: text}

Production RAG systems often reach their retriever through MCP; this kind tests that
path. One session is opened for the whole run (the stdio server is started once) and
`concurrency` tool calls are in flight at once. The tool's answer is its structured
content when it has some, else its first text block read as JSON; the hits are found
with `results_path` and `fields` exactly as the http kind finds them. A tool error, a
timeout or an answer without the hits fails that query (`tool error: …`, `timeout`,
`malformed response: …`), never an empty result. A server that cannot be started or
reached stops the run (exit 4), and so does one that sends what is not MCP (a line on
stdout that is not JSON-RPC, which MCP's stdio transport forbids, or an HTML page),
in one line quoting what it sent. Needs `pip install 'llm-eval-ci[mcp]'`.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import contextlib
import datetime
import importlib.util
import json
import logging
import os
import shlex
import threading
import time
from collections.abc import AsyncIterator, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from llm_eval.errors import ExternalError, InputError
from llm_eval.retrievers import RetrieverContext, RetrieverKind
from llm_eval.retrievers.http import (
    DEFAULT_BODY,
    check_body,
    check_fields,
    check_headers,
    check_results_path,
    check_timeout,
    check_url,
    hit_getter,
    hit_list,
    render_body,
    resolve_headers,
)
from llm_eval.retrievers.pool import (
    CACHE_KEY,
    Hits,
    PooledRetriever,
    QueryFailed,
    Search,
    check_concurrency,
    ranked_result,
    resolved_cache_key,
)
from llm_eval.settings import Setting

INSTALL = "the mcp retriever needs the MCP SDK: pip install 'llm-eval-ci[mcp]'"


def check_command(value: Any) -> str | None:
    """None, or a non-empty list of strings (the program and its arguments). A list's
    items are not shown: an argument may be a secret read from the environment."""
    if value is None:
        return None
    if not isinstance(value, list) or not value:
        return f"must be a list like [python, server.py], got {value!r}"
    if not all(isinstance(v, str) for v in value):
        return "must be a list like [python, server.py]: every item a string"
    return None


def check_optional_url(value: Any) -> str | None:
    """None, or an http(s) URL."""
    return None if value is None else check_url(value)


def check_tool(value: Any) -> str | None:
    """A non-empty string."""
    if not isinstance(value, str) or not value.strip():
        return f"must be the name of a tool of the server, got {value!r}"
    return None


def check_cwd(value: Any) -> str | None:
    """None or a folder path."""
    if value is None or (isinstance(value, str) and value.strip()):
        return None
    return f"must be a folder, got {value!r}"


SETTINGS: Mapping[str, Setting] = {
    "command": Setting(None, check_command, "A stdio server: the program and its arguments."),
    "cwd": Setting(None, check_cwd, "The stdio server's working folder (default: this one)."),
    "url": Setting(None, check_optional_url, "A streamable HTTP server's URL (…/mcp)."),
    "headers": Setting(
        {},
        check_headers,
        "HTTP headers; values may hold ${ENV_VAR} (read at run time).",
        environ=False,
    ),
    "tool": Setting("search", check_tool, "The search tool's name."),
    "arguments": Setting(
        dict(DEFAULT_BODY),
        check_body,
        "The tool's arguments; strings may hold ${query} and ${top_k}.",
        environ=False,
    ),
    "results_path": Setting(
        None,
        check_results_path,
        "Dot path to the list of hits in the tool's answer; default: the answer itself "
        "when it is a list, else its `results`.",
    ),
    "fields": Setting(
        {},
        check_fields,
        "Where doc_id, score, text, document and page are in a hit (default: those keys).",
    ),
    "concurrency": Setting(4, check_concurrency, "Tool calls in flight at once."),
    "timeout_s": Setting(30.0, check_timeout, "Seconds to start the server, and per call."),
    "cache_key": CACHE_KEY,
}


@dataclass(frozen=True, slots=True)
class McpSettings:
    """The checked settings of the mcp kind (`SETTINGS` says what each one means)."""

    command: tuple[str, ...] | None
    cwd: str | None
    url: str | None
    headers: Mapping[str, str] = field(repr=False)
    """Header values as written: their `${ENV_VAR}` are read when the retriever is built."""
    tool: str
    arguments: Mapping[str, object]
    """The tool's arguments, their `${query}` and `${top_k}` not filled in yet."""
    results_path: str | None
    fields: Mapping[str, str]
    concurrency: int
    timeout_s: float
    cache_key: str | None
    """As written: its `${ENV_VAR}` are read when the cache's key is made."""

    @classmethod
    def from_checked(cls, values: Mapping[str, Any]) -> McpSettings:
        """The record of checked settings (`RetrieverKind.checked`: every one present)."""
        command = values["command"]
        return cls(
            command=tuple(command) if command is not None else None,
            cwd=values["cwd"],
            url=values["url"],
            headers=values["headers"],
            tool=values["tool"],
            arguments=values["arguments"],
            results_path=values["results_path"],
            fields=values["fields"],
            concurrency=values["concurrency"],
            timeout_s=float(values["timeout_s"]),
            cache_key=values["cache_key"],
        )


def hits_in(structured: Any, texts: list[str], results_path: str | None) -> list[Any]:
    """The hits of a tool answer: from its structured content, else its text as JSON."""
    if structured is not None:
        with contextlib.suppress(QueryFailed):
            return hit_list(structured, results_path)
        # FastMCP-style servers wrap a returned list as {"result": [...]}.
        if results_path is None and isinstance(structured, dict) and "result" in structured:
            with contextlib.suppress(QueryFailed):
                return hit_list(structured["result"], None)
    if texts:
        try:
            payload = json.loads(texts[0])
        except ValueError:
            raise QueryFailed("malformed response: the tool's text is not JSON") from None
        return hit_list(payload, results_path)
    raise QueryFailed("malformed response: the tool answered with no content")


@dataclass(frozen=True, slots=True)
class McpSearcher:
    """Calls the search tool of one MCP session."""

    command: tuple[str, ...] | None
    cwd: str | None
    url: str | None
    headers: Mapping[str, str] = field(repr=False)
    tool: str = "search"
    arguments: Mapping[str, object] = field(default_factory=dict)
    results_path: str | None = None
    fields: Mapping[str, str] = field(default_factory=dict)
    timeout_s: float = 30.0

    @contextlib.contextmanager
    def session(self) -> Iterator[Search]:
        """A session on an event loop in a background thread, for the pool's threads.

        What the server sends that is not MCP (a line on stdout that is not JSON-RPC,
        an HTML page) fails the calls waiting and then the run, in one line that says
        what it sent; the SDK's own log of it (a traceback a line) is not printed."""
        loop = asyncio.new_event_loop()
        thread = threading.Thread(target=loop.run_forever, name="llm-eval-mcp", daemon=True)
        thread.start()
        stray = _Stray()
        ready: concurrent.futures.Future[tuple[Any, asyncio.Event]] = concurrent.futures.Future()
        held = asyncio.run_coroutine_threadsafe(self._hold(ready, stray), loop)
        try:
            try:
                client, _ = ready.result(timeout=self.timeout_s + 5)
            except concurrent.futures.TimeoutError:
                raise ExternalError(f"mcp: {self._where()} did not answer in time") from None
            except Exception as exc:  # the SDK's errors are many; name what failed
                # What the server sent that is not MCP is the cause of what followed.
                reason = str(stray) if stray.sent else _reason(exc)
                raise ExternalError(f"mcp: cannot open {self._where()}: {reason}") from None
            yield lambda query, top_k: self.search(loop, client, stray, query, top_k)
            if stray.sent:
                raise ExternalError(f"mcp: {self._where()}: {stray}")
        finally:
            if ready.done() and ready.exception() is None:
                loop.call_soon_threadsafe(ready.result()[1].set)
                with contextlib.suppress(Exception):
                    held.result(timeout=10)
            else:
                held.cancel()
            loop.call_soon_threadsafe(loop.stop)
            thread.join(timeout=10)
            if not thread.is_alive():
                loop.close()

    def _where(self) -> str:
        return self.url if self.url is not None else f"the server `{shown(self.command or ())}`"

    async def _hold(
        self, ready: concurrent.futures.Future[tuple[Any, asyncio.Event]], stray: _Stray
    ) -> None:
        """Open the session, hand it over, keep it open until told to stop (the SDK's
        contexts must be left by the task that entered them)."""
        from mcp import ClientSession

        stray.arrived = asyncio.Event()
        try:
            async with (
                self._streams() as (read, write),
                ClientSession(read, write, message_handler=stray.note) as client,
            ):
                await asyncio.wait_for(stray.unless_stray(client.initialize()), self.timeout_s)
                stop = asyncio.Event()
                ready.set_result((client, stop))
                await stop.wait()
        except BaseException as exc:
            if not ready.done():
                ready.set_exception(exc if isinstance(exc, Exception) else RuntimeError(str(exc)))
            else:
                raise

    @contextlib.asynccontextmanager
    async def _transport(self) -> AsyncIterator[tuple[Any, Any]]:
        if self.url is not None:
            import httpx
            from mcp.client.streamable_http import streamable_http_client

            # Reads wait on a server-sent event stream: long, as the SDK's own default.
            timeout = httpx.Timeout(self.timeout_s, read=max(300.0, self.timeout_s))
            async with (
                httpx.AsyncClient(
                    headers=dict(self.headers), timeout=timeout, follow_redirects=True
                ) as http,
                streamable_http_client(self.url, http_client=http) as (read, write, _),
            ):
                yield read, write
        else:
            from mcp import StdioServerParameters
            from mcp.client.stdio import stdio_client

            assert self.command is not None
            parameters = StdioServerParameters(
                command=self.command[0],
                args=list(self.command[1:]),
                cwd=self.cwd,
                env=dict(os.environ),
            )
            with Path(os.devnull).open("w") as quiet:  # the server's log is not ours to print
                async with stdio_client(parameters, errlog=quiet) as (read, write):
                    yield read, write

    @contextlib.asynccontextmanager
    async def _streams(self) -> AsyncIterator[tuple[Any, Any]]:
        """The transport's streams, with the SDK's log of messages it cannot read (a
        traceback each) held back: `_Stray` reports them."""
        with _sdk_log_held():
            async with self._transport() as streams:
                yield streams

    def search(
        self,
        loop: asyncio.AbstractEventLoop,
        client: Any,
        stray: _Stray,
        query: str,
        top_k: int,
    ) -> Hits:
        """One tool call; QueryFailed with what went wrong."""
        arguments = render_body(self.arguments, query, top_k)
        started = time.perf_counter()
        call = client.call_tool(
            self.tool, arguments, read_timeout_seconds=datetime.timedelta(seconds=self.timeout_s)
        )
        future = asyncio.run_coroutine_threadsafe(stray.unless_stray(call), loop)
        try:
            result = future.result(timeout=self.timeout_s + 5)
        except (concurrent.futures.TimeoutError, TimeoutError):
            future.cancel()
            raise QueryFailed("timeout") from None
        except _NotMcp:
            raise QueryFailed(f"mcp error: {stray}") from None
        except Exception as exc:
            reason = _reason(exc)
            kind = "timeout" if "timed out" in reason.lower() else "mcp error"
            raise QueryFailed(f"{kind}: {reason}") from None
        latency_ms = (time.perf_counter() - started) * 1000
        texts = [c.text for c in result.content if getattr(c, "type", None) == "text"]
        if result.isError:
            message = " ".join(texts).strip() or "no message"
            raise QueryFailed(f"tool error: {message[:200]}")
        hits = hits_in(result.structuredContent, texts, self.results_path)
        results = []
        for index, hit in enumerate(hits):
            if not isinstance(hit, dict):
                raise QueryFailed(f"malformed result: hits[{index}] is not an object")
            getter = hit_getter(hit, self.fields)
            results.append(ranked_result(getter, f"hits[{index}]", list(hit)))
        return Hits(tuple(results), latency_ms)


class _NotMcp(Exception):
    """The server sent something that is not MCP; `_Stray` says what."""


@dataclass
class _Stray:
    """What a server sent that the SDK could not read as MCP, in the order it came."""

    sent: list[str] = field(default_factory=list)
    arrived: asyncio.Event | None = None
    """Set at the first (made on the session's loop)."""

    async def note(self, message: Any) -> None:
        """The session's message handler: the SDK hands it what it could not read as an
        exception (and requests and notifications, which need no answer here)."""
        if isinstance(message, Exception):
            self.sent.append(_what_was_sent(message))
            if self.arrived is not None:
                self.arrived.set()

    async def unless_stray(self, work: Any) -> Any:
        """`work`'s result; _NotMcp as soon as the server sends something that is not
        MCP (the answer waited for may have been that)."""
        assert self.arrived is not None
        task, stray = asyncio.ensure_future(work), asyncio.ensure_future(self.arrived.wait())
        try:
            await asyncio.wait({task, stray}, return_when=asyncio.FIRST_COMPLETED)
        finally:
            stray.cancel()
        if task.done():
            return task.result()
        task.cancel()
        raise _NotMcp

    def __str__(self) -> str:
        first = self.sent[0] if self.sent else "nothing"
        more = f" (and {len(self.sent) - 1} more)" if len(self.sent) > 1 else ""
        return f"it sent {first}{more}"


def _what_was_sent(exc: Exception) -> str:
    """What the SDK could not read: the line or answer pydantic was given, else the
    SDK's complaint (an unexpected content type)."""
    errors = getattr(exc, "errors", None)
    with contextlib.suppress(Exception):  # pydantic's ValidationError keeps its input
        sent = errors()[0]["input"] if callable(errors) else None
        if isinstance(sent, bytes):
            sent = sent.decode("utf-8", "replace")
        if sent is not None:
            text = sent if isinstance(sent, str) else json.dumps(sent, default=str)
            shown = text if len(text) <= 80 else text[:77] + "..."
            return f"{shown!r}, which is not JSON-RPC"
    return f"what is not MCP ({_reason(exc)})"


@contextlib.contextmanager
def _sdk_log_held() -> Iterator[None]:
    """The SDK's log (a traceback for each message it cannot read, warnings about the
    server) kept off stderr while a session is open: what matters is reported once. So
    is asyncio's warning that a stdio server which died was reaped before its watcher
    looked (`Unknown child process pid …`): the server's end is the query's error."""
    logger, held = logging.getLogger("mcp"), logging.NullHandler()
    propagate = logger.propagate
    logger.addHandler(held)
    logger.propagate = False
    reaped = _ReapedElsewhere()
    logging.getLogger("asyncio").addFilter(reaped)
    try:
        yield
    finally:
        logger.propagate = propagate
        logger.removeHandler(held)
        logging.getLogger("asyncio").removeFilter(reaped)


class _ReapedElsewhere(logging.Filter):
    """Drops asyncio's `Unknown child process pid %d, will report returncode 255`."""

    def filter(self, record: logging.LogRecord) -> bool:
        return not str(record.msg).startswith("Unknown child process pid")


def shown(command: Sequence[str]) -> str:
    """The command as a shell reads it, on one line whatever it holds: an argument with a
    line break or another character that cannot be shown as it is, in Python's quotes,
    which escape it (`'no\\nline'`), so that an error naming it stays one line."""
    return " ".join(shlex.quote(p) if p.isprintable() else repr(p) for p in command)


def _reason(exc: BaseException) -> str:
    """One line: the innermost message of an exception group, or the exception's."""
    while isinstance(exc, BaseExceptionGroup) and exc.exceptions:
        exc = exc.exceptions[0]
    text = str(exc).strip().splitlines()
    return text[0] if text else type(exc).__name__


def build(settings: McpSettings, context: RetrieverContext) -> PooledRetriever:
    """The retriever for these settings; exactly one of `command` and `url`."""
    if (settings.command is None) == (settings.url is None):
        raise InputError("give either `command` (a stdio server) or `url` (HTTP), not both")
    if importlib.util.find_spec("mcp") is None:
        raise InputError(INSTALL)
    searcher = McpSearcher(
        command=settings.command,
        cwd=settings.cwd,
        url=settings.url,
        headers=resolve_headers(settings.headers, os.environ),
        tool=settings.tool,
        arguments=settings.arguments,
        results_path=settings.results_path,
        fields=settings.fields,
        timeout_s=settings.timeout_s,
    )
    identity = {
        "kind": "mcp",
        "server": list(settings.command) if settings.command is not None else settings.url,
        "tool": settings.tool,
        "arguments": settings.arguments,
        "results_path": settings.results_path,
        "fields": settings.fields,
        "cache_key": resolved_cache_key(settings.cache_key, os.environ),
    }
    return PooledRetriever(searcher, settings.concurrency, identity)


def depends_on(settings: McpSettings, root: Path) -> list[Path]:
    """A stdio server's script, when its command names a file in the repository."""
    base = Path(settings.cwd or ".")
    return [base / part for part in (settings.command or ())[1:] if part.endswith(".py")]


KIND = RetrieverKind(
    name="mcp",
    description="A search tool of an MCP server (stdio command or streamable HTTP URL).",
    record=McpSettings.from_checked,
    build=build,
    settings=SETTINGS,
    depends_on=depends_on,
)
