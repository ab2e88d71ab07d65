"""Small pieces of English shared by every sentence the tool writes: counts with the
right noun, and lists that say how many were left out."""

from __future__ import annotations

from collections.abc import Sequence


def listed(items: Sequence[str], shown: int = 10, total: int | None = None) -> str:
    """`a, b, c and 5 more`: the first `shown` items, then how many are left out of
    `total` (default: all the items; more when `items` is itself the start of a list)."""
    text = ", ".join(items[:shown])
    left = (len(items) if total is None else total) - len(items[:shown])
    return text + (f" and {left} more" if left > 0 else "")


def plural(count: int, singular: str, many: str) -> str:
    """`1 query`, `2 queries`."""
    return f"{count} {singular if count == 1 else many}"
