"""Judged values corrected by the human labels: the prediction-powered arithmetic by hand,
the floor decided on the corrected interval, and a judged gate end to end against the
local OpenAI-compatible stub."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest
from conftest import Cli, script
from test_gate import make_gate
from test_judge import gate as run_gate
from test_judge import report, write_project

from llm_eval.gate import decide
from llm_eval.judged.correction import Bounds, Corrected, correct, mean_bounds, prediction_powered
from llm_eval.wording.gates import sentence

stub = script("stub_openai")


def test_the_estimate_is_the_predictions_mean_plus_the_rectifier() -> None:
    labels, judged = [1.0, 0.0, 0.5, 0.25], [1.0, 1.0, 0.5, 0.75]
    others = [0.8, 0.6, 1.0]
    got = prediction_powered(labels, judged, others, alpha=0.05)
    # mean of the others (0.8) + mean of (label − judge) over the labelled (−1.5 / 4)
    assert got.mean == pytest.approx(0.8 - 0.375, abs=1e-12)
    assert 0.0 <= got.low <= got.mean <= got.high <= 1.0


def test_with_every_query_labelled_it_is_the_labels_mean_and_bounds() -> None:
    labels, judged = [0.2, 0.9, 0.4, 0.7, 0.1], [1.0, 1.0, 1.0, 1.0, 1.0]
    assert prediction_powered(labels, judged, [], alpha=0.05) == mean_bounds(labels, 0.05)
    assert mean_bounds(labels, 0.05).mean == pytest.approx(0.46)


def test_a_correction_needs_a_labelled_judged_query() -> None:
    assert correct("m", {"a": 0.5}, {"b": 1.0}, 0.05) is None
    fixed = correct("m", {"a": 0.5, "b": 0.9}, {"b": 0.1}, 0.05)
    assert fixed is not None
    assert (fixed.labelled, fixed.unlabelled) == (1, 1)
    assert fixed.corrected.mean == pytest.approx(0.5 + (0.1 - 0.9))
    assert fixed.raw.mean == pytest.approx(0.7)
    with pytest.raises(ValueError, match="paired labels and predictions"):
        prediction_powered([], [], [0.5], 0.05)


def test_the_interval_holds_a_judge_that_leans_one_way() -> None:
    """A judge that calls everything 0.3 higher: its own interval misses the labels' mean,
    the corrected one holds it (the full simulation is scripts/bench_judge_correction.py)."""
    rng = np.random.default_rng(3)
    truth = rng.beta(1, 3, size=300)
    judge = np.clip(truth + 0.3, 0, 1)
    fixed = correct(
        "m",
        {str(i): float(v) for i, v in enumerate(judge)},
        {str(i): float(truth[i]) for i in range(100)},
        0.05,
    )
    assert fixed is not None
    theta = 0.25  # the mean of Beta(1, 3)
    assert not fixed.raw.low <= theta <= fixed.raw.high
    assert fixed.corrected.low <= theta <= fixed.corrected.high


def corrected(low: float, high: float, mean: float) -> Corrected:
    return Corrected(
        "context_precision@5", Bounds(0.9, 0.85, 0.95), Bounds(mean, low, high), 40, 0, 0.05
    )


@pytest.mark.parametrize(
    ("low", "high", "status", "reason", "floor_ok"),
    [
        (0.62, 0.70, "pass", "within", True),  # wholly above the floor 0.6
        (0.60, 0.70, "pass", "within", True),  # on it counts as meeting it
        (0.40, 0.55, "fail", "floor", False),  # wholly below
        (0.50, 0.70, "inconclusive", "cannot_tell", None),  # straddles: cannot tell
    ],
)
def test_the_floor_is_decided_on_the_corrected_interval(
    low: float, high: float, status: str, reason: str, floor_ok: bool | None
) -> None:
    gate = make_gate(threshold=0.6, regression_max=None, metric="context_precision@5")
    # The judge's own value (0.9) is far above the floor: only the correction decides.
    result = decide(gate, 0.9, 40, None, corrected=corrected(low, high, (low + high) / 2))
    assert (result.status, result.reason, result.floor_ok) == (status, reason, floor_ok)


def test_the_sentence_gives_the_corrected_value_and_its_interval() -> None:
    gate = make_gate(threshold=0.6, regression_max=None, metric="context_precision@5")
    missed = decide(gate, 0.9, 40, None, corrected=corrected(0.40, 0.55, 0.47))
    assert sentence(missed) == (
        "context precision@5 corrected by your labels is 0.470 (90% CI 0.400 to 0.550; the "
        "judge alone says 0.900), below the floor 0.600"
    )
    unsure = decide(gate, 0.9, 40, None, corrected=corrected(0.50, 0.70, 0.6))
    assert sentence(unsure) == (
        "context precision@5 corrected by your labels is 0.600 (90% CI 0.500 to 0.700; the "
        "judge alone says 0.900); whether it is below the floor 0.600 cannot be told "
        "(reported, not blocking)"
    )


JUDGED_GATE = (
    "gates:\n  - name: cp\n    metric: context_precision@2\n    threshold: 0.5\n    judged: true\n"
)


def test_a_judged_gate_is_decided_on_the_corrected_value_end_to_end(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, cli: Cli
) -> None:
    with stub.serve() as server:
        root = write_project(tmp_path, server.url, gates=JUDGED_GATE)
        code, printed, _ = run_gate(cli, root, monkeypatch)
        assert code == 0
    out = " ".join(printed.split())
    written = report(root)
    (entry,) = written["gates"]
    # q1 and q2 are labelled: context precision@2 from their labels is 0.5 and 1.0, as the
    # judge says; two queries cannot put the interval above the floor 0.5.
    fixed = entry["corrected"]
    assert (fixed["value"], fixed["judge"]) == (pytest.approx(0.75), pytest.approx(0.75))
    assert (fixed["labelled"], fixed["unlabelled"], fixed["confidence"]) == (2, 0, 0.9)
    assert fixed["ci_low"] < 0.5 < fixed["ci_high"]
    assert (entry["status"], entry["reason"], entry["floor_ok"]) == (
        "inconclusive",
        "cannot_tell",
        None,
    )
    assert "whether it is below the floor 0.500 cannot be told" in out
    (overall,) = written["judge"]["corrected"]
    assert overall["metric"] == "context_precision@2"
    assert written["judge"]["uncorrected"] == ["context_recall", "context_sufficiency"]
    assert "Corrected by your labels (2 labelled queries): context precision@2 0.750" in out


def test_an_unreviewed_query_is_judged_but_not_a_label(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, cli: Cli
) -> None:
    with stub.serve() as server:
        root = write_project(tmp_path, server.url, gates=JUDGED_GATE + "    scope: {tier: A}\n")
        lines = [json.loads(line) for line in (root / "gold.jsonl").read_text().splitlines()]
        lines[1].update(source="synthetic", reviewed=False, tier="B")
        (root / "gold.jsonl").write_text("".join(json.dumps(q) + "\n" for q in lines))
        assert run_gate(cli, root, monkeypatch)[0] == 0
    (overall,) = report(root)["judge"]["corrected"]
    assert (overall["labelled"], overall["unlabelled"]) == (1, 1)
