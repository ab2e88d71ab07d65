"""The Pareto picture's axes and labels: fitted bounds, and names that overlap neither
each other nor any point (computed from the label boxes, nothing looked at by eye)."""

from __future__ import annotations

import itertools

import numpy as np
import pytest
from conftest import gold_query

from llm_eval.experiment.variants import Measured, compare_variants
from llm_eval.formats._plot_layout import (
    Box,
    candidates,
    nice_bounds,
    nice_log_bounds,
    nice_step,
    place_labels,
)
from llm_eval.gold import GoldSet
from llm_eval.runs import QueryResults, RankedResult, Run
from llm_eval.scoring import score_run


def test_round_steps_and_bounds_with_a_margin() -> None:
    assert nice_step(5.52) == 2.0
    assert nice_step(0.4) == pytest.approx(0.1)
    assert nice_step(12.0) == 2.5
    assert nice_bounds(39.6, 44.2) == (38.0, 46.0)
    assert nice_bounds(0.18, 0.5, floor=0.0) == (0.1, 0.6)
    # Clipped to what the quantity can take: never below a latency of zero.
    assert nice_bounds(0.01, 0.5, floor=0.0) == (0.0, 0.6)
    assert nice_bounds(99.0, 99.9, ceiling=100.0)[1] == 100.0
    # One value: a range around it.
    low, high = nice_bounds(2.0, 2.0)
    assert low < 2.0 < high
    assert nice_log_bounds(0.2, 33.0) == (0.1, 50.0)
    with pytest.raises(ValueError):
        nice_log_bounds(0.0, 1.0)


def _clear(boxes: list[Box], dots: list[Box], frame: Box) -> None:
    for a, b in itertools.combinations(boxes, 2):
        assert a.overlap(b) == 0, (a, b)
    for box in boxes:
        assert all(box.overlap(d) == 0 for d in dots), box
        assert box.outside(frame) == pytest.approx(0.0)


def test_labels_of_crowded_points_overlap_nothing() -> None:
    # Nine points within 30 px of each other, the demo's kind of cluster.
    rng = np.random.default_rng(2)
    points = [(400 + float(x), 300 + float(y)) for x, y in rng.uniform(-15, 15, (9, 2))]
    sizes = [(70.0 + 5 * i, 12.0) for i in range(9)]
    frame = Box(0, 0, 800, 600)
    boxes = place_labels(points, sizes, frame, 4.0)
    dots = [Box(x - 4, y - 4, x + 4, y + 4) for x, y in points]
    _clear(boxes, dots, frame)
    widths = [w for b in boxes for w in (b.x1 - b.x0, b.y1 - b.y0)]
    assert widths == pytest.approx([w for size in sizes for w in size])
    assert place_labels(points, sizes, frame, 4.0) == boxes  # the same every time


def test_a_free_point_gets_its_label_right_beside_it() -> None:
    boxes = place_labels([(100.0, 100.0)], [(50.0, 10.0)], Box(0, 0, 800, 600), 4.0)
    assert boxes == [Box(107.0, 95.0, 157.0, 105.0)]
    # At the right edge the label goes to the left instead.
    boxes = place_labels([(790.0, 100.0)], [(50.0, 10.0)], Box(0, 0, 800, 600), 4.0)
    assert boxes == [Box(733.0, 95.0, 783.0, 105.0)]
    assert candidates(100, 100, 50, 10, 7)[0] == Box(107.0, 95.0, 157.0, 105.0)


def test_obstacles_are_avoided_when_there_is_room() -> None:
    bar = Box(80.0, 98.0, 300.0, 102.0)  # an interval through the point, to the right
    boxes = place_labels(
        [(100.0, 100.0)], [(50.0, 10.0)], Box(0, 0, 800, 600), 4.0, obstacles=[bar]
    )
    assert boxes[0].overlap(bar) == 0
    assert boxes[0].overlap(Box(96, 96, 104, 104)) == 0


def _measured(name: str, gold: GoldSet, hits: int, latency: float) -> Measured:
    jitter = np.linspace(0.9, 1.1, len(gold.queries))
    run = Run(
        {
            q.query_id: QueryResults(
                q.query_id,
                tuple(RankedResult(d) for d in ((f"d{i}", "x") if i < hits else ("x", f"d{i}"))),
                float(latency * jitter[i]),
            )
            for i, q in enumerate(gold.queries)
        }
    )
    return Measured(name, score_run(gold, run, ["mrr"], 1), 2)


@pytest.mark.parametrize("slowest", [0.5, 33.0])
def test_the_drawn_names_overlap_no_name_and_no_point(slowest: float) -> None:
    pytest.importorskip("matplotlib")
    import matplotlib.pyplot as plt

    from llm_eval.experiment.variants_view import pareto_figure

    gold = GoldSet(tuple(gold_query(f"q{i:03}", ((f"d{i}", 1),)) for i in range(200)))
    # Six variants close together in both quality and latency, one far slower (on a
    # logarithmic axis when it is 33 ms beside 0.2 ms).
    variants = [_measured(f"variant number {i}", gold, 100 + i, 0.20 + 0.01 * i) for i in range(6)]
    variants.append(_measured("fusion", gold, 104, slowest))
    result = compare_variants(gold, variants, ["mrr"], "variant number 0", "mrr")
    drawn = pareto_figure(result)
    assert drawn is not None
    figure, axes, labels = drawn
    try:
        figure.canvas.draw()
        renderer = figure.canvas.get_renderer()
        boxes = [t.get_window_extent(renderer) for t in labels]
        assert len(boxes) == 7
        as_boxes = [Box(b.x0, b.y0, b.x1, b.y1) for b in boxes]
        centres = [
            axes.transData.transform((r.values["latency_p95"], r.values["mrr"]))
            for r in result.rows
        ]
        dots = [Box(x - 4, y - 4, x + 4, y + 4) for x, y in centres]
        frame = axes.get_window_extent(renderer)
        # A pixel of slack: matplotlib rounds text extents differently once drawn.
        shrunk = [Box(b.x0 + 1, b.y0 + 1, b.x1 - 1, b.y1 - 1) for b in as_boxes]
        _clear(shrunk, dots, Box(frame.x0, frame.y0, frame.x1, frame.y1))
        # Fitted, not 0 to 1: the scores span 0.75 to 0.76.
        scores = [r.values["mrr"] for r in result.rows]
        low, high = axes.get_ylim()
        assert low < min(scores) and max(scores) < high
        assert high - low < 0.05
        assert axes.get_xscale() == ("log" if slowest > 10 else "linear")
    finally:
        plt.close(figure)
