"""A run refused for its failed queries, summarised: how many failed of how many, by
reason, and their distinct causes, most frequent first.

The error line of `llm-eval gate` and the report written beside it both come from
one `FailureSummary`, so the two never tell different stories.
"""

from __future__ import annotations

import re
from collections import Counter
from collections.abc import Iterable
from dataclasses import dataclass

CAUSES_SHOWN = 3
"""Distinct causes a failure summary shows in full, the most frequent first."""
_POSITION = re.compile(r"\[\d+\]")


def error_kinds(errors: Iterable[str]) -> tuple[tuple[str, int], ...]:
    """`(("timeout", 9), ("http 503", 3))`: failures by kind (the text before ': '),
    most first, ties by name."""
    kinds = Counter(error.split(": ", 1)[0] for error in errors)
    return tuple(sorted(kinds.items(), key=lambda item: (-item[1], item[0])))


def distinct_causes(errors: Iterable[str]) -> tuple[tuple[str, int], ...]:
    """The distinct errors that say more than their kind, counted, most first (ties in
    the order met). A hit's position is left out (`hits[]`), so that one cause met at
    another rank in each query is counted once. Empty when no error says more than
    its kind (`timeout`)."""
    causes = Counter(_POSITION.sub("[]", error) for error in errors if ": " in error)
    return tuple(sorted(causes.items(), key=lambda item: -item[1]))


@dataclass(frozen=True, slots=True)
class FailureSummary:
    """The failed queries of a run that more queries failed on than `max_error_rate`
    allows."""

    queries: int
    """The gold queries the run was to answer."""
    max_error_rate: float
    failed: tuple[tuple[str, str], ...]
    """(query id, the retriever's error) for each failed query, in gold order."""
    where: str | None = None
    """Which run: a run file's path, `build 2 of 3`, or None for the one live run."""

    @property
    def share(self) -> float:
        """The failed queries' share of the run's."""
        return len(self.failed) / self.queries if self.queries else 0.0

    @property
    def by_kind(self) -> tuple[tuple[str, int], ...]:
        """`error_kinds` of the failures."""
        return error_kinds(error for _, error in self.failed)

    @property
    def causes(self) -> tuple[tuple[str, int], ...]:
        """`distinct_causes` of the failures."""
        return distinct_causes(error for _, error in self.failed)
