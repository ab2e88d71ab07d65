"""Where a plot's axes end and where its point labels go (pure: no matplotlib).

    low, high = nice_bounds(39.6, 44.2, floor=0.0, ceiling=100.0)   # (39.0, 45.0)
    boxes = place_labels(points, sizes, frame, radius)

`nice_bounds` fits an axis to the data: the values' range with a margin, widened to
round steps (1, 2, 2.5 or 5 times a power of ten), kept within what the quantity can
take. `place_labels` puts each label beside its point, trying positions around it
(right, left, above, below, the corners, then the same farther out) and keeping the
first that stays inside the frame and overlaps neither an earlier label nor any point;
when none does, the one that overlaps least. The same inputs give the same places.
Coordinates are pixels, y upwards.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass

STEPS = (1.0, 2.0, 2.5, 5.0, 10.0)
"""Round steps, times a power of ten."""


def nice_step(span: float, ticks: int = 5) -> float:
    """A round step that cuts `span` into about `ticks` parts."""
    if span <= 0 or not math.isfinite(span):
        raise ValueError(f"needs a positive span, got {span}")
    raw = span / ticks
    power = 10.0 ** math.floor(math.log10(raw))
    return next(s * power for s in STEPS if s * power >= raw * (1 - 1e-9))


def nice_bounds(
    low: float,
    high: float,
    *,
    margin: float = 0.1,
    floor: float | None = None,
    ceiling: float | None = None,
) -> tuple[float, float]:
    """Axis ends around [low, high]: a `margin` (share of the range) on both sides,
    rounded outwards to a nice step, and clipped to [floor, ceiling]. A single value
    gets a range of a tenth of its size (or 1) around it."""
    if low > high:
        low, high = high, low
    span = high - low
    if span <= 0:
        span = abs(high) * 0.1 or 1.0
        low, high = low - span / 2, high + span / 2
    padded_low, padded_high = low - span * margin, high + span * margin
    step = nice_step(padded_high - padded_low)
    start = math.floor(padded_low / step + 1e-9) * step
    end = math.ceil(padded_high / step - 1e-9) * step
    if floor is not None:
        start = max(start, floor)
    if ceiling is not None:
        end = min(end, ceiling)
    return float(_tidy(start)), float(_tidy(end))


def _tidy(number: float) -> float:
    """`0.30000000000000004` as 0.3: a multiple of a step, as printed."""
    return float(f"{number:.12g}")


def nice_log_bounds(low: float, high: float) -> tuple[float, float]:
    """Ends of a logarithmic axis around positive [low, high]: 1, 2 or 5 times a
    power of ten, below and above with a little room."""
    if low <= 0 or high <= 0:
        raise ValueError(f"needs positive values, got {low} and {high}")
    marks = [m * 10.0**e for e in range(-12, 13) for m in (1.0, 2.0, 5.0)]
    start = max((m for m in marks if m <= low / 1.15), default=marks[0])
    end = min((m for m in marks if m >= high * 1.15), default=marks[-1])
    return _tidy(start), _tidy(end)


@dataclass(frozen=True, slots=True)
class Box:
    """A rectangle in pixels, y upwards."""

    x0: float
    y0: float
    x1: float
    y1: float

    def overlap(self, other: Box) -> float:
        """The area both cover (0 when they only touch or are apart)."""
        width = min(self.x1, other.x1) - max(self.x0, other.x0)
        height = min(self.y1, other.y1) - max(self.y0, other.y0)
        return width * height if width > 0 and height > 0 else 0.0

    def outside(self, frame: Box) -> float:
        """The area of this box that lies outside `frame`."""
        return (self.x1 - self.x0) * (self.y1 - self.y0) - self.overlap(frame)


DIRECTIONS = (
    (1.0, 0.0),
    (-1.0, 0.0),
    (0.0, 1.0),
    (0.0, -1.0),
    (1.0, 1.0),
    (1.0, -1.0),
    (-1.0, 1.0),
    (-1.0, -1.0),
)
"""Right, left, above, below, then the corners."""
RINGS = (1.0, 2.5, 4.5, 7.0, 10.0)
"""Distances tried, as multiples of the gap."""


def candidates(x: float, y: float, width: float, height: float, gap: float) -> list[Box]:
    """Boxes of a label of this size around the point (x, y), nearest first."""
    out = []
    for ring in RINGS:
        distance = gap * ring
        for dx, dy in DIRECTIONS:
            x0 = _start(x, dx, distance, width)
            y0 = _start(y, dy, distance, height)
            out.append(Box(x0, y0, x0 + width, y0 + height))
    return out


def _start(centre: float, direction: float, distance: float, size: float) -> float:
    """Where a label `size` long starts on one axis: `distance` past the point in the
    `direction` (+1, -1), or centred on it (0)."""
    if direction > 0:
        return centre + distance
    if direction < 0:
        return centre - distance - size
    return centre - size / 2


def place_labels(
    points: Sequence[tuple[float, float]],
    sizes: Sequence[tuple[float, float]],
    frame: Box,
    radius: float,
    gap: float | None = None,
    obstacles: Sequence[Box] = (),
) -> list[Box]:
    """One box per label, beside its point (in the given order: earlier labels get the
    nearer places). A point is the square of side 2 × `radius` around it; `gap` (by
    default `radius` + 3 px) is the nearest a label comes to its point. `obstacles`
    (error bars, say) are avoided too, but less firmly than points and labels: a place
    that overlaps only them is kept when every other place overlaps more."""
    if len(points) != len(sizes):
        raise ValueError(f"{len(points)} points but {len(sizes)} label sizes")
    near = radius + 3.0 if gap is None else gap
    dots = [Box(x - radius, y - radius, x + radius, y + radius) for x, y in points]
    placed: list[Box] = []
    for (x, y), (width, height) in zip(points, sizes, strict=True):
        best, best_cost = None, (math.inf, math.inf)
        for box in candidates(x, y, width, height, near):
            hard = sum(box.overlap(b) for b in placed) + sum(box.overlap(d) for d in dots)
            hard += 10.0 * box.outside(frame)
            cost = (hard, sum(box.overlap(o) for o in obstacles))
            if cost == (0, 0):
                best = box
                break
            if cost < best_cost:
                best, best_cost = box, cost
        assert best is not None  # there is always a candidate
        placed.append(best)
    return placed
