"""POSTing JSON to a service that may fail: retries, backoff, Retry-After, a breaker.

Shared by the http retriever and the model clients (judge, embeddings). A connection
error, a timeout, 429 or a 5xx answer is retried up to `retries` times, after a wait
drawn uniformly from zero to `backoff_s * 2**attempt` ("full jitter"), or as long as
the server's `Retry-After` asks; both capped by `max_backoff_s`. Other answers are not
retried. A call that still fails raises `CallFailed` with what is recorded
(`timeout`, `http 503`, `connection refused`).
"""

from __future__ import annotations

import math
import random
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass
from datetime import UTC, datetime
from email.utils import parsedate_to_datetime
from typing import Any

import httpx

Answer = tuple[httpx.Response, float]
"""A successful response and its latency in milliseconds."""


class CallFailed(Exception):
    """A call that failed for good; the message is the error to record."""

    def __init__(self, message: str, detail: str = "") -> None:
        super().__init__(message)
        self.detail = detail
        """The start of the error answer's body (empty without an HTTP answer)."""


@dataclass(frozen=True, slots=True)
class RetryPolicy:
    """How often and how long to retry what may pass when asked again."""

    retries: int = 3
    backoff_s: float = 0.5
    max_backoff_s: float = 30.0


def retryable_status(status: int) -> bool:
    """429 (too many requests) and 5xx answers may succeed when asked again."""
    return status == 429 or status >= 500


def retry_after_seconds(value: str | None, now: datetime) -> float | None:
    """A Retry-After header as seconds from `now`: delay-seconds or an HTTP date."""
    if value is None:
        return None
    try:
        seconds = float(value)
    except ValueError:
        try:
            seconds = (parsedate_to_datetime(value) - now).total_seconds()
        except (TypeError, ValueError):
            return None
    return max(seconds, 0.0) if math.isfinite(seconds) else None


def backoff_seconds(
    attempt: int, base: float, cap: float, retry_after: float | None, draw: Callable[[], float]
) -> float:
    """The wait before retry number `attempt + 1`: the server's Retry-After when it gave
    one, else full jitter (uniform from 0 to base * 2**attempt); at most `cap`."""
    if retry_after is not None:
        return min(retry_after, cap)
    return min(cap, base * 2**attempt) * draw()


def transport_error(exc: httpx.TransportError) -> str:
    """What a failed exchange is recorded as."""
    if isinstance(exc, httpx.TimeoutException):
        return "timeout"
    if isinstance(exc, httpx.ConnectError):
        return "connection refused" if "refused" in str(exc).lower() else "connection failed"
    if isinstance(exc, httpx.RemoteProtocolError):
        return "connection dropped"
    if isinstance(exc, httpx.ReadError | httpx.WriteError):
        return "connection reset"
    return f"connection error: {type(exc).__name__}"


# --- the searcher (I/O) ---------------------------------------------------------------

UNREACHABLE = frozenset({"connection refused", "connection failed", "timeout"})
"""Failures that say the service cannot be reached at all (unlike an HTTP error)."""


class Breaker:
    """Stops retrying once the service looks unreachable.

    After `limit` queries in a row failed to reach the service even with their retries,
    later queries get a single attempt each: a service that is down then fails the run
    in seconds instead of minutes, and every query is still tried and recorded with its
    error. The first query that reaches the service closes the breaker again.
    """

    def __init__(self, limit: int) -> None:
        self.limit = limit
        self.streak = 0
        self.lock = threading.Lock()

    @property
    def open(self) -> bool:
        """Whether retries are skipped."""
        return self.streak >= self.limit

    def record(self, unreachable: bool) -> None:
        """Count a query that could not reach the service, or reset on one that did."""
        with self.lock:
            self.streak = self.streak + 1 if unreachable else 0


@dataclass(frozen=True, slots=True)
class Failure:
    """An attempt that got no results."""

    error: str
    retryable: bool
    retry_after: float | None = None
    """Seconds the server asked to wait (Retry-After)."""
    detail: str = ""
    """The start of the error answer's body."""


def post_json(
    client: httpx.Client,
    url: str,
    payload: Any,
    policy: RetryPolicy,
    breaker: Breaker,
    final: Callable[[httpx.Response], bool] | None = None,
    max_bytes: int | None = None,
) -> Answer:
    """The successful answer to POSTing `payload`, and its latency in ms (of the attempt
    that succeeded: waits between retries measure the policy, not the service);
    CallFailed when every allowed attempt failed. An error answer for which `final`
    says True is not retried (a server refusing a field says so with a 500 as well).
    With `max_bytes`, an answer longer than that fails (`answer over N bytes`, not
    retried) as soon as it is known to be, without reading the rest of it."""
    retries = 0 if breaker.open else policy.retries
    attempt = 0
    while isinstance(outcome := _attempt(client, url, payload, final, max_bytes), Failure):
        if not outcome.retryable or attempt == retries:
            breaker.record(outcome.error in UNREACHABLE)
            raise CallFailed(outcome.error, outcome.detail)
        wait = backoff_seconds(
            attempt, policy.backoff_s, policy.max_backoff_s, outcome.retry_after, random.random
        )
        time.sleep(wait)
        attempt += 1
    breaker.record(False)
    return outcome


class _TooLarge(Exception):
    """An answer longer than the cap; the message is the error to record."""


def _post_capped(client: httpx.Client, url: str, payload: Any, max_bytes: int) -> httpx.Response:
    """The answer read in chunks, up to `max_bytes` (decoded); _TooLarge past them."""
    with client.stream("POST", url, json=payload) as streamed:
        too_large = _TooLarge(f"answer over {max_bytes:,} bytes (max_answer_bytes)")
        declared = streamed.headers.get("Content-Length", "")
        if declared.isdigit() and int(declared) > max_bytes:
            raise too_large
        chunks, size = [], 0
        for chunk in streamed.iter_bytes():
            size += len(chunk)
            if size > max_bytes:
                raise too_large
            chunks.append(chunk)
    headers = [
        (k, v)
        for k, v in streamed.headers.multi_items()
        if k.lower() not in ("content-encoding", "content-length", "transfer-encoding")
    ]
    return httpx.Response(
        streamed.status_code, headers=headers, content=b"".join(chunks), request=streamed.request
    )


ERROR_DETAIL = 2000
"""Characters of an error answer's body kept for the caller to read."""


def _attempt(
    client: httpx.Client,
    url: str,
    payload: Any,
    final: Callable[[httpx.Response], bool] | None = None,
    max_bytes: int | None = None,
) -> tuple[httpx.Response, float] | Failure:
    started = time.perf_counter()
    try:
        if max_bytes is None:
            response = client.post(url, json=payload)
        else:
            response = _post_capped(client, url, payload, max_bytes)
    except httpx.TransportError as exc:
        return Failure(transport_error(exc), retryable=True)
    except _TooLarge as exc:
        return Failure(str(exc), retryable=False)
    latency_ms = (time.perf_counter() - started) * 1000
    status = response.status_code
    if not response.is_success:
        after = retry_after_seconds(response.headers.get("Retry-After"), datetime.now(UTC))
        retryable = retryable_status(status) and not (final is not None and final(response))
        detail = response.text[:ERROR_DETAIL]
        return Failure(f"http {status}", retryable, after, detail)
    return response, latency_ms
