"""The exception hierarchy and the one table that maps it to exit codes.

Every failure a user can cause or meet is one of these classes; the command line
turns them into one readable line and the exit code below, so CI can tell
"the tool broke" (5) from "below the bar" (1) from "bad input" (3).
"""

from __future__ import annotations

from enum import IntEnum
from pathlib import Path
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from llm_eval.failures import FailureSummary


class ExitCode(IntEnum):
    """Process exit codes, the contract of DESIGN.md."""

    PASS = 0  # all error gates pass (warnings allowed)
    GATE_FAILED = 1  # an error-severity gate failed
    USAGE = 2  # bad command line (click's own code)
    BAD_INPUT = 3  # bad config or data, or no trustworthy comparison
    EXTERNAL = 4  # retriever or external service failed
    INTERNAL = 5  # a bug in llm-eval


class LlmEvalError(Exception):
    """Base class: a failure with a one-line message and an exit code."""

    exit_code: ExitCode = ExitCode.INTERNAL


class InputError(LlmEvalError):
    """Bad data or config: names the file, the line and the key when known."""

    exit_code = ExitCode.BAD_INPUT

    def __init__(
        self,
        reason: str,
        *,
        path: str | Path | None = None,
        line: int | None = None,
        key: str | None = None,
    ) -> None:
        self.reason = reason
        self.path = str(path) if path is not None else None
        self.line = line
        self.key = key
        super().__init__(self.render())

    def render(self) -> str:
        """`file:line: key: reason`, leaving out the parts that are unknown."""
        where = self.path or ""
        if self.path is not None and self.line is not None:
            where = f"{where}:{self.line}"
        parts = [p for p in (where, self.key) if p]
        return ": ".join([*parts, self.reason])


class PluginError(LlmEvalError):
    """An installed metric plugin failed to load: names its entry point and distribution.

    Not an InputError, which callers may catch to try another reading of a name: a
    broken plugin must stop the run, whatever metric was being parsed."""

    exit_code = ExitCode.BAD_INPUT


class ComparisonError(LlmEvalError):
    """The inputs are valid but cannot be compared honestly (e.g. another gold set)."""

    exit_code = ExitCode.BAD_INPUT


class ExternalError(LlmEvalError):
    """The retriever or an external service (GitHub, an HTTP endpoint) failed."""

    exit_code = ExitCode.EXTERNAL


class RetrieverFailed(ExternalError):
    """More of a run's queries failed than the retriever's `max_error_rate` allows; the
    summary is what the gate's report keeps of them."""

    def __init__(self, message: str, summary: FailureSummary) -> None:
        self.summary = summary
        super().__init__(message)
