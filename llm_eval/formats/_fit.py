"""Fitting a rendering under a size limit (GitHub's comment and job-summary limits):
the drill-down is shortened first, then the tag table, then whole lines are cut."""

from __future__ import annotations

from collections.abc import Callable


def fitted(
    attempt: Callable[[int, int], str],
    changes: int,
    tags: int,
    fits: Callable[[str], bool],
) -> str:
    """`attempt(changes_shown, tags_shown)` with the most drill-down rows, then the most
    tag rows, for which the text `fits`; whole lines cut as the last resort."""
    text = attempt(changes, tags)
    if fits(text):
        return text
    shown = largest(lambda n: fits(attempt(n, tags)), changes - 1)
    if shown is not None:
        return attempt(shown, tags)
    tag_rows = largest(lambda n: fits(attempt(0, n)), tags - 1)
    if tag_rows is not None:
        return attempt(0, tag_rows)
    return cut(attempt(0, 0), fits)


def largest(fits: Callable[[int], bool], high: int) -> int | None:
    """The largest n in [0, high] for which `fits(n)` holds (it holds up to some n)."""
    low, best = 0, None
    while low <= high:
        middle = (low + high) // 2
        if fits(middle):
            best, low = middle, middle + 1
        else:
            high = middle - 1
    return best


CUT_NOTE = "_…cut here to stay under GitHub's size limit; `report.json` has everything._"


def cut(text: str, fits: Callable[[str], bool]) -> str:
    """The last resort, when even the gates alone are too long: whole lines, then a note."""
    lines = text.splitlines()

    def head(n: int) -> str:
        return "\n".join([*lines[:n], "", CUT_NOTE]) + "\n"

    return head(largest(lambda n: fits(head(n)), len(lines)) or 0)
