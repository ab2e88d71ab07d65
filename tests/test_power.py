"""The one power model: its figures at awkward sizes, and the same figures on every
surface that prints them (`llm-eval gate`, its Markdown report, `gold stats`, `gold
plan`)."""

from __future__ import annotations

import json
import math
import re
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from llm_eval import betting, detection, exact_power
from llm_eval.authoring.plan import scope_power_before_run, scored_ids
from llm_eval.baseline_io import load_baseline
from llm_eval.criteria import Gate, Location, Scope, Statistics
from llm_eval.detection import detectable_worsening
from llm_eval.gate import Power
from llm_eval.pipeline import load_inputs
from llm_eval.power import NO_BASELINE, baseline_power, gate_power
from llm_eval.stats import column_test
from llm_eval.wording.gates import drop_size

SEED = 1
"""Of the reference simulation in `resampled_rate`."""
HERE = Location("config/ship-criteria.yaml", 1, "gates[0]")
LLM_EVAL = Path(sys.executable).parent / "llm-eval"


def make_gate(metric: str = "recall@5", resamples: int = 100, **statistics: object) -> Gate:
    settings = Statistics(resamples=resamples, **statistics)  # type: ignore[arg-type]
    return Gate("g", metric, None, 0.03, "error", Scope(tier="A"), HERE, HERE, settings)


def assert_sound(power: Power | None) -> Power:
    """Every figure finite or explicitly open (None), never NaN; a drop caught is beyond
    the limit, a size is a whole number of at least 2."""
    assert power is not None
    drop, needed = power.detectable_drop, power.queries_needed
    assert drop is None or (math.isfinite(drop) and drop > 0.03)
    assert needed is None or needed >= 2
    assert math.isfinite(power.target) and power.target > 0.03
    assert power.assumption.startswith("assuming ")
    return power


def skewed(n: int, seed: int) -> np.ndarray:
    """Graded scores, most of them near 0."""
    return np.random.default_rng(seed).random(n) ** 6


@pytest.mark.parametrize(
    ("before", "after"),
    [
        (np.ones(2), np.ones(2)),  # two 0/1 queries, no churn
        (np.array([0.5, 0.2]), np.array([0.5, 0.1])),  # two graded queries
        (np.ones(1), np.ones(1)),  # one query
        (np.zeros(40), np.zeros(40)),  # nothing to lose: no drop can show
        (np.r_[np.ones(3), np.zeros(97)], np.r_[np.ones(3), np.zeros(97)]),  # skewed 0/1
        (skewed(60, 1), skewed(60, 1)),  # skewed graded, no churn
        (skewed(60, 1), skewed(60, 2)),  # skewed graded, every query churns
        (np.ones(50), np.r_[np.zeros(25), np.ones(25)]),  # half the 0/1 queries lost
    ],
    ids=[
        "n2-binary",
        "n2-graded",
        "n1",
        "all-zero",
        "skewed-binary",
        "skewed-graded",
        "skewed-churn",
        "half-lost",
    ],
)
def test_the_figures_are_finite_or_open(before: np.ndarray, after: np.ndarray) -> None:
    assert_sound(gate_power(make_gate(), before, after, 0.03))


def test_no_drop_shows_on_scores_that_are_all_zero() -> None:
    power = assert_sound(gate_power(make_gate(), np.zeros(40), np.zeros(40), 0.03))
    assert (power.detectable_drop, power.queries_needed) == (None, None)


def test_zero_churn_is_said_and_churn_costs_power() -> None:
    """With no churn the assumption says so; the same scores with churn need more
    queries to catch the same drop and catch only a larger one now."""
    gate = make_gate()
    scores = skewed(200, 3) ** (1 / 6)  # spread over [0, 1]
    still = assert_sound(gate_power(gate, scores, scores, 0.03))
    moved = scores.copy()
    moved[::3] = np.random.default_rng(4).random(moved[::3].size)
    churned = assert_sound(gate_power(gate, scores, moved, 0.03))
    assert still.assumption == "assuming no other query's score changes"
    assert churned.assumption == (
        "assuming the churn seen against the baseline (67 of 200 queries changed)"
    )
    assert still.detectable_drop is not None and churned.detectable_drop is not None
    assert still.detectable_drop < churned.detectable_drop
    assert still.queries_needed is not None and churned.queries_needed is not None
    assert still.queries_needed < churned.queries_needed


def test_before_a_run_the_baseline_is_both_sides() -> None:
    """`gold stats` and `gold plan` get the figures `gate` gets when the run equals
    the baseline; without a baseline, 0/1 scores that are all 1, and it says so."""
    gate = make_gate()
    scores = skewed(80, 5) ** (1 / 3)
    assert baseline_power(gate, list(scores), 80) == gate_power(gate, scores, scores, 0.03)
    blind = assert_sound(baseline_power(gate, None, 80))
    ones = gate_power(gate, np.ones(80), np.ones(80), 0.03)
    assert ones is not None and blind.assumption == NO_BASELINE
    assert (blind.detectable_drop, blind.queries_needed) == (
        ones.detectable_drop,
        ones.queries_needed,
    )
    assert baseline_power(gate, [], 0) is None
    assert baseline_power(make_gate(significance=False), list(scores), 80) is None


# --- every surface, the same figures -------------------------------------------------

SENTENCE = re.compile(
    r"recall@5 \(tier A\): with (?P<n>[\d,]+) queries, a drop of (?P<drop>[\d.]+ pp) is "
    r"caught 4 times in 5; about (?P<needed>[\d,]+) queries catch one of "
    r"(?P<target>[\d.]+ pp) \(twice the 3\.0 pp limit\), (?P<assumption>assuming [a-z' ]+)"
)


def said(text: str) -> dict[str, str]:
    """The tier A sentence's figures, with the terminal's wrapping undone."""
    flat = re.sub(r"\s+", " ", text)
    found = SENTENCE.search(flat)
    assert found is not None, flat
    return {key: figure.strip() for key, figure in found.groupdict().items()}


def run(project: Path, *args: str) -> str:
    done = subprocess.run(
        [str(LLM_EVAL), *args], cwd=project, capture_output=True, text=True, check=False
    )
    assert done.returncode == 0, done.stderr
    return done.stdout


def test_gate_gold_stats_and_gold_plan_say_the_same_figures(indexed_demo: Path) -> None:
    """On the demo (the run equals the baseline), the gate's terminal and Markdown, `gold
    stats` and `gold plan` print the figures the power function gives for tier A's
    recall@5 from the baseline, in the same sentence."""
    gate_text = run(indexed_demo, "gate", "--out", "out")
    markdown = (indexed_demo / "out" / "report.md").read_text(encoding="utf-8")
    stats_text = run(indexed_demo, "gold", "stats")
    plan_text = run(indexed_demo, "gold", "plan", "--out", "out/plan.json")
    surfaces = {
        "gate": said(gate_text),
        "report.md": said(markdown),
        "gold stats": said(stats_text),
        "gold plan": said(plan_text),
    }
    inputs = load_inputs(
        indexed_demo / "config/llm-eval.yaml", indexed_demo / "config/ship-criteria.yaml"
    )
    baseline = load_baseline(indexed_demo / "gold/baseline.json")
    assert baseline is not None
    gate = inputs.criteria.gates[0]
    ids = scored_ids(inputs.gold.queries, gate.scope, gate.metric)
    power = scope_power_before_run(gate, ids, baseline.per_query)
    assert power is not None and power.detectable_drop is not None
    assert power.queries_needed is not None
    expected = {
        "n": f"{power.n:,}",
        "drop": drop_size(gate.metric, power.detectable_drop),
        "needed": f"{power.queries_needed:,}",
        "target": drop_size(gate.metric, power.target),
        "assumption": power.assumption,  # the zero-churn clause: words alone
    }
    for surface, figures in surfaces.items():
        assert figures == expected, surface
    report = json.loads((indexed_demo / "out" / "report.json").read_text(encoding="utf-8"))
    recall = next(g for g in report["gates"] if g["name"] == gate.name)
    assert recall["power"] == {
        "detectable_drop": power.detectable_drop,
        "queries_needed": power.queries_needed,
    }
    plan = json.loads((indexed_demo / "out" / "plan.json").read_text(encoding="utf-8"))
    tier_a = next(s for s in plan["scopes"] if s["gate"] == gate.name)
    assert (tier_a["detectable_drop"], tier_a["needed"]) == (
        power.detectable_drop,
        power.queries_needed,
    )
    *_, row = (line for line in stats_text.splitlines() if line.startswith("tier A "))
    assert row.split()[3:6] == [*expected["drop"].split(), expected["needed"]]


# --- the claim holds where the truth is known ------------------------------------------


def graded_truth(n: int, rng: np.random.Generator, drop: float = 0.0) -> tuple[np.ndarray, ...]:
    """A retriever's paired scores: graded, skewed towards 0; 30% of the queries are
    redrawn with no trend (churn), and of the others a share drop / E[score] lose
    their whole score (E[score] = 1/3), so the true mean worsening is `drop`."""
    before = rng.random(n) ** 2
    after = before.copy()
    churn = rng.random(n) < 0.3
    after[churn] = rng.random(int(churn.sum())) ** 2
    swap = churn & (rng.random(n) < 0.5)
    before[swap], after[swap] = after[swap], before[swap]
    lose = ~churn & (rng.random(n) < drop / (0.7 / 3))
    after[lose] = 0.0
    return before, after


def test_the_drop_a_graded_statement_names_is_caught_about_4_times_in_5() -> None:
    """The statement is made from one sample with churn and no true change; a true
    drop of the size it names is then caught by the gate's own test about as often as
    it says, averaged over the samples it could have been made from (the noise of the
    churn seen included). 12 statements of 100 queries, 150 fresh samples each."""
    rng = np.random.default_rng(11)
    rates = []
    for _ in range(12):
        before, after = graded_truth(100, rng)
        drop = detectable_worsening(before, after, 0.05, 0.05, simulations=200)
        assert math.isfinite(drop)
        caught = 0
        for _ in range(150):
            b, a = graded_truth(100, rng, drop)
            caught += column_test(b, a, 0.05).p_beyond(0.05) <= 0.05
        rates.append(caught / 150)
    assert 0.74 <= float(np.mean(rates)) <= 0.86, rates


def test_the_drop_a_0_1_statement_names_is_caught_about_4_times_in_5() -> None:
    """0/1 scores with 5% of the queries flipping half each way: the gate's exact test
    catches the named drop about 4 times in 5, averaged over the churn seen (exactly
    computed at the truth's churn for each statement)."""
    rng = np.random.default_rng(12)
    n, flips, rates = 200, 0.05, []
    for _ in range(12):
        u = rng.random(n)
        before = (u >= flips / 2).astype(float)  # flips / 2 went bad
        after = ((u >= flips) | (u < flips / 2)).astype(float)  # flips / 2 went good
        drop = detectable_worsening(before, after, 0.03, 0.05)
        rates.append(exact_power.catch_rate_over_churn(n, np.array([flips]), 0.03, 0.05)(drop))
    assert 0.75 <= float(np.mean(rates)) <= 0.85, rates


# --- the large-sample figures against the full model -------------------------------------


def resampled_rate(
    before: np.ndarray, after: np.ndarray, drop: float, margin: float, simulations: int = 1000
) -> float:
    """The graded model's catch rate at `drop` as the simulation draws it below
    `detection.LARGE_GRADED` queries: each sample of n queries from its own truth (the n
    queries seen, drawn again), every sample tested by the gate's graded test."""
    n = before.size
    rng = np.random.default_rng(SEED)
    worlds = rng.integers(0, n, size=(simulations, n))
    rows = np.take_along_axis(worlds, rng.integers(0, n, size=(simulations, n)), axis=1)
    flips = rng.random((simulations, n)) < 0.5
    lose = rng.random((simulations, n))
    whole_all = np.maximum(before, after)
    still = before == after
    steady = np.where(still, whole_all, 0.0)[worlds].mean(axis=1, keepdims=True)
    moving = np.where(still, 0.0, whole_all)[worlds].mean(axis=1, keepdims=True)
    first = np.minimum(drop / steady, 1.0) if still.any() else np.ones_like(steady)
    rest = np.clip((drop - steady) / moving, 0.0, 1.0) if (~still).any() else np.ones_like(steady)
    share = np.where(still[rows], first, rest)
    churn = np.where(flips, after[rows] - before[rows], before[rows] - after[rows])
    worse = np.where(lose < share, whole_all[rows], churn)
    caught = sum(
        int(betting.graded_rejects(worse[k : k + 25], margin, 0.05).sum())
        for k in range(0, simulations, 25)
    )
    return caught / simulations


def graded_scope(kind: str, n: int, rng: np.random.Generator) -> tuple[np.ndarray, np.ndarray]:
    """Graded scores: spread out with 30% churn, skewed towards 0 with 7%, MRR-like
    (1/rank or 0) with 10%, or spread out with none."""
    draw = {
        "spread-churn-30": lambda k: rng.random(k) ** 2,
        "skewed-churn-7": lambda k: rng.random(k) ** 6,
        "mrr-churn-10": lambda k: (rng.random(k) < 0.7) / rng.integers(1, 11, k),
        "no-churn": lambda k: rng.random(k) ** 0.5,
    }[kind]
    churn = {"spread-churn-30": 0.3, "skewed-churn-7": 0.07, "mrr-churn-10": 0.1}.get(kind, 0.0)
    before = draw(n)
    after = before.copy()
    moved = rng.random(n) < churn
    after[moved] = draw(int(moved.sum()))
    return before, after


@pytest.mark.parametrize("n", [500, 1000, 2000])
@pytest.mark.parametrize("kind", ["spread-churn-30", "skewed-churn-7", "mrr-churn-10", "no-churn"])
def test_a_large_graded_scope_names_a_drop_the_full_simulation_catches_4_times_in_5(
    kind: str, n: int
) -> None:
    """From `detection.LARGE_GRADED` queries on, the drop comes from the normal approximation;
    the full simulation (every sample from its own resampled truth, 1,000 samples)
    catches that drop 4 times in 5, within the statement's 5 points (its own noise,
    about 1.3 points, included)."""
    assert n >= detection.LARGE_GRADED
    before, after = graded_scope(kind, n, np.random.default_rng(n))
    drop = detectable_worsening(before, after, 0.05, 0.05)
    assert math.isfinite(drop)
    assert abs(resampled_rate(before, after, drop, 0.05) - detection.POWER) <= 0.05


@pytest.mark.parametrize("n", [1000, 2000])
@pytest.mark.parametrize("churn", [0.0, 0.02, 0.07, 0.2])
def test_a_large_0_1_scope_has_about_the_exact_catch_rate(n: int, churn: float) -> None:
    """From `exact_power.LARGE_BINARY` queries on, the catch rate of the exact test is the
    normal approximation of Tango's statistic: within 3 points of the exact sum, at
    drops caught from about 1 time in 4 to nearly always."""
    assert n >= exact_power.LARGE_BINARY
    for drop in (0.045, 0.06):
        exact = exact_power.exact_catch_rate(n, churn / 2 + drop, churn / 2, 0.03, 0.05)
        normal = exact_power.normal_catch_rate(n, churn / 2 + drop, churn / 2, 0.03, 0.05)
        assert abs(normal - exact) <= 0.03, (drop, exact, normal)


REFERENCE = Path(__file__).parent / "data" / "power_reference.json"
"""The 0/1 power figures as the code before the cached and counted share intervals
computed them (scripts/power_reference.py wrote it; its docstring says how to redo)."""


def reference_cases() -> list[dict[str, object]]:
    return list(json.loads(REFERENCE.read_text())["cases"])


@pytest.mark.parametrize("case", reference_cases(), ids=lambda c: f"{c['n']}-{c['churn']}")
def test_0_1_power_figures_are_those_recorded_before(case: dict[str, object]) -> None:
    """The detectable drop (to 1e-9) and the queries needed (the same whole number) of a
    0/1 scope equal those the full computation gave before it was made cheaper."""
    sys.path.insert(0, str(Path(__file__).parents[1] / "scripts"))
    from power_reference import ALPHA, LIMIT, scope

    n, churn = int(case["n"]), float(case["churn"])  # type: ignore[call-overload, arg-type]
    before, after = scope(n, churn)
    drop = detectable_worsening(before, after, LIMIT, ALPHA)
    assert drop == pytest.approx(case["detectable"], abs=1e-9, rel=0)
    assert detection.queries_to_catch(before, after, 2 * LIMIT, LIMIT, ALPHA) == case["needed"]


def test_0_1_catch_rates_are_those_recorded_before() -> None:
    """The exact test's catch rate at sizes below `exact_power.LARGE_BINARY` equals, to 1e-9,
    the one recorded before."""
    rates = json.loads(REFERENCE.read_text())["rates"]
    for row in rates:
        n, churn, drop = row["n"], row["churn"], row["drop"]
        rate = exact_power.exact_catch_rate(n, churn / 2 + drop, churn / 2, 0.03, 0.05)
        assert rate == pytest.approx(row["rate"], abs=1e-9, rel=0), row


def test_the_churn_clause_writes_large_counts_with_separators() -> None:
    from llm_eval.power import assumption

    before = np.zeros(105_424)
    after = before.copy()
    after[:4_332] = 1.0
    assert assumption(before, after).endswith("(4,332 of 105,424 queries changed)")
    assert assumption(np.zeros(1), np.ones(1)).endswith("(1 of 1 query changed)")
