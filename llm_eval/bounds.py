"""One column's paired test, as the gate asks it: the p-values of both one-sided nulls
at any worsening, and its confidence bounds found by bisection on them.

The tests themselves are `exact_test.py` (0/1 scores) and `betting.py` (graded
scores); `stats.column_test` picks one. Bounds are bracketed at the limit first, so a
bound lies beyond the limit exactly when that side's test rejects. A bound can reach
the end of the possible range (the data say nothing on that side); it is then marked
open, and it is always a finite number.
"""

from __future__ import annotations

import math
from collections.abc import Callable

import numpy as np
import numpy.typing as npt

FloatArray = npt.NDArray[np.float64]
IntArray = npt.NDArray[np.int64]

BISECTION_STEPS = 22
"""Halvings of the range when a bound is searched: 2 / 2^22 < 5e-7, far below any shown
digit (0.1 pp is 1e-3); the bound returned is the rejected end of the last bracket, so
stopping earlier only widens it by that much."""
EDGE = 1e-9
"""How close to the end of the range a tested value may come."""


class ColumnTest:
    """One column's test: p-values of both one-sided nulls at any worsening delta."""

    span: float
    """Width of the range the worsening lies in, halved: it lies in [-span, span]."""

    @property
    def queries(self) -> ColumnTest:
        """The test of the queries' part: this one, unless it is joined with the
        variance between builds (`llm_eval.builds.WithBuilds`)."""
        return self

    def p_beyond(self, delta: float) -> float:
        """p-value against "the mean worsening is at most delta"."""
        raise NotImplementedError

    def p_within(self, delta: float) -> float:
        """p-value against "the mean worsening is at least delta"."""
        raise NotImplementedError

    def evidence(self, side: float) -> Callable[[float], float] | None:
        """log(1 / p) of `p_beyond` (side +1) or `p_within` (side -1) as a smooth
        function of the worsening, before the p-value clips it at 1; None when the test
        has none. It only steers the search for a bound (`bisect`): every decision
        there is still the p-value's."""
        return None

    def bounds(self, margin: float, level: float) -> tuple[float, float, bool, bool]:
        """One-sided `level` bounds (low, high, low_open, high_open), bracketed at the
        margin so that low > margin exactly when p_beyond(margin) <= level, and high <
        margin exactly when p_within(margin) <= level."""
        edge = self.span * (1.0 - EDGE)
        margin = min(max(margin, -edge), edge)
        low, low_open = _bound(self.p_beyond, margin, level, -edge, self.evidence(+1.0))
        high, high_open = _bound(self.p_within, margin, level, edge, self.evidence(-1.0))
        return low, high, low_open, high_open


def _bound(
    p_value: Callable[[float], float],
    margin: float,
    level: float,
    end: float,
    evidence: Callable[[float], float] | None = None,
) -> tuple[float, bool]:
    """The bound where `p_value` crosses `level`, found by bisection between the margin
    and whichever end of the range lies on the other side of the crossing (steered by
    the test's `evidence` when it has one). Returns the rejected side of the final
    bracket, and whether the bound is the range's end."""
    rejected_at_margin = p_value(margin) <= level
    far = -end if rejected_at_margin else end
    if rejected_at_margin and p_value(far) <= level:
        return far, False  # rejected everywhere up to the end: the bound is the end itself
    if not rejected_at_margin and p_value(far) > level:
        return far, True  # nothing rejected: the data cannot bound this side
    inside, outside = (margin, far) if rejected_at_margin else (far, margin)
    steer = None
    if evidence is not None:
        needed = math.log(1.0 / level)
        steer = lambda delta: evidence(delta) - needed  # noqa: E731
    return bisect(lambda delta: p_value(delta) <= level, inside, outside, steer=steer), False


def bisect(
    holds: Callable[[float], bool],
    inside: float,
    outside: float,
    steps: int = BISECTION_STEPS,
    steer: Callable[[float], float] | None = None,
) -> float:
    """Halve [inside, outside], where `holds` is true at `inside` and false at `outside`
    and changes once between them; returns the end of the last bracket where it holds.

    With `steer` (a smooth function, positive about where `holds` is true and negative
    where it is false), the crossing is first narrowed by regula falsi (`_narrowed`) to
    a bracket far inside the last halving's; the halving then asks `holds` only of the
    middles within that bracket, and reads the others from the side they lie on. It
    returns the same bound as the plain halving, in about half the calls to `holds`
    for a test whose every call is a pass over the queries."""
    if steer is None:
        for _ in range(steps):
            middle = (inside + outside) / 2.0
            if holds(middle):
                inside = middle
            else:
                outside = middle
        return inside
    width = abs(outside - inside) * 2.0 ** -(steps + 2)
    known_in, known_out = _narrowed(holds, steer, inside, outside, width)
    toward = 1.0 if outside > inside else -1.0  # the search runs from inside to outside
    for _ in range(steps):
        middle = (inside + outside) / 2.0
        if (middle - known_in) * toward <= 0.0:
            inside = middle  # no further out than a point where it holds
        elif (middle - known_out) * toward >= 0.0:
            outside = middle  # no nearer than a point where it does not
        elif holds(middle):
            inside = known_in = middle
        else:
            outside = known_out = middle
    return inside


_STEERED_STEPS = 60
"""At most this many points of regula falsi in `_narrowed`; it stops far sooner on any
smooth steer (a handful of points to a millionth of the range)."""


def _narrowed(
    holds: Callable[[float], bool],
    steer: Callable[[float], float],
    inside: float,
    outside: float,
    width: float,
) -> tuple[float, float]:
    """A bracket (where `holds` is true, where it is false) of its crossing between
    `inside` and `outside`, at most `width` wide: regula falsi on `steer` with the
    Illinois halving, each point decided by `holds` itself; a point the interpolation
    cannot place strictly inside the bracket (an infinite or flat steer) is its middle."""
    steer_in, steer_out = steer(inside), steer(outside)
    moved = 0  # the end the last point moved: +1 `inside`, -1 `outside`
    for _ in range(_STEERED_STEPS):
        if abs(outside - inside) <= width:
            break
        point = (inside + outside) / 2.0
        fall = steer_in - steer_out
        if math.isfinite(fall) and fall > 0.0:
            guess = inside + (outside - inside) * (steer_in / fall)
            if min(inside, outside) < guess < max(inside, outside):
                point = guess
        if holds(point):
            inside, steer_in = point, steer(point)
            if moved > 0:
                steer_out /= 2.0
            moved = 1
        else:
            outside, steer_out = point, steer(point)
            if moved < 0:
                steer_in /= 2.0
            moved = -1
    return inside, outside
