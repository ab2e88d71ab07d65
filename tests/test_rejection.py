"""Rejection queries: abstaining, empty results and low scores count as rejecting."""

from __future__ import annotations

from pathlib import Path

import pytest
from conftest import Cli, gold_query

from llm_eval.config_io import load_config
from llm_eval.errors import InputError
from llm_eval.gold import GoldSet
from llm_eval.rejection import (
    RejectionOutcome,
    ThresholdSuggestion,
    judge_rejection,
    rejection_outcomes,
    rejection_values,
    suggest_threshold,
    top_scores,
)
from llm_eval.runs import QueryResults, RankedResult, Run
from llm_eval.scoring import Scoring, score_run
from llm_eval.slices import ScoreTable, value_over


def answer(*scores: float | None, abstained: bool = False) -> QueryResults:
    results = tuple(RankedResult(f"d{i}", score) for i, score in enumerate(scores))
    return QueryResults("q", results, abstained=abstained)


@pytest.mark.parametrize(
    ("given", "threshold", "expected"),
    [
        (answer(abstained=True), None, RejectionOutcome("q", True, "abstained")),
        # Abstaining counts even when results came with it.
        (answer(9.0, abstained=True), 0.5, RejectionOutcome("q", True, "abstained", 9.0)),
        (answer(), None, RejectionOutcome("q", True, "no results")),
        (answer(), 0.5, RejectionOutcome("q", True, "no results")),
        (answer(0.2), 0.5, RejectionOutcome("q", True, "low score", 0.2)),
        # The top score is the highest, wherever it is ranked.
        (answer(0.1, 0.9), 0.5, RejectionOutcome("q", False, "confident", 0.9)),
        (answer(0.1, 0.4), 0.5, RejectionOutcome("q", True, "low score", 0.4)),
        # Not below the threshold: confident.
        (answer(0.5), 0.5, RejectionOutcome("q", False, "confident", 0.5)),
        (answer(-3.0), -2.0, RejectionOutcome("q", True, "low score", -3.0)),
        # Without a threshold only abstaining or an empty list rejects.
        (answer(0.2), None, RejectionOutcome("q", False, "confident", 0.2)),
        # Results without scores cannot be judged by score.
        (answer(None, None), 0.5, RejectionOutcome("q", False, "confident")),
        (None, 0.5, RejectionOutcome("q", False, "missing from the run")),
    ],
)
def test_judge_rejection(
    given: QueryResults | None, threshold: float | None, expected: RejectionOutcome
) -> None:
    assert judge_rejection("q", given, threshold) == expected


GOLD = GoldSet(
    (
        gold_query("answerable", (("d1", 1),)),
        gold_query("abstains"),
        gold_query("empty"),
        gold_query("low"),
        gold_query("confident"),
        gold_query("failed"),
        gold_query("missing"),
    )
)
RUN = Run(
    {
        "answerable": QueryResults("answerable", (RankedResult("d1", 1.0),)),
        "abstains": QueryResults("abstains", (), abstained=True),
        "empty": QueryResults("empty", ()),
        "low": QueryResults("low", (RankedResult("d1", 0.1),)),
        "confident": QueryResults("confident", (RankedResult("d1", 0.8),)),
        "failed": QueryResults("failed", (), error="timeout"),
    }
)


def test_outcomes_cover_the_rejection_queries_that_did_not_fail() -> None:
    assert rejection_outcomes(GOLD, RUN, 0.5) == (
        RejectionOutcome("abstains", True, "abstained"),
        RejectionOutcome("empty", True, "no results"),
        RejectionOutcome("low", True, "low score", 0.1),
        RejectionOutcome("confident", False, "confident", 0.8),
        RejectionOutcome("missing", False, "missing from the run"),
    )


@pytest.mark.parametrize(
    ("rejected", "metrics", "values"),
    [
        (True, ["rejection_accuracy", "false_confidence_rate", "mrr"], (1.0, 0.0)),
        (False, ["rejection_accuracy", "false_confidence_rate"], (0.0, 1.0)),
    ],
)
def test_each_query_scores_one_on_exactly_one_metric(
    rejected: bool, metrics: list[str], values: tuple[float, float]
) -> None:
    outcome = RejectionOutcome("q", rejected, "x")
    assert rejection_values(outcome, metrics) == dict(
        zip(["rejection_accuracy", "false_confidence_rate"], values, strict=True)
    )
    assert rejection_values(outcome, ["mrr"]) == {}


@pytest.mark.parametrize(
    ("threshold", "accuracy"),
    [
        # Rejected: abstains, empty (and low, with the threshold); not: confident, missing.
        (None, 2 / 5),
        (0.5, 3 / 5),
        (0.9, 4 / 5),
    ],
)
def test_rejection_metrics_average_over_the_rejection_queries(
    threshold: float | None, accuracy: float
) -> None:
    metrics = ["mrr", "rejection_accuracy", "false_confidence_rate"]
    measured = score_run(GOLD, RUN, metrics, 1, Scoring(rejection_score_threshold=threshold))
    assert measured.per_query["answerable"] == {"mrr": 1.0}
    assert "failed" not in measured.per_query
    table = ScoreTable(measured.per_query)
    ids = [q.query_id for q in GOLD.queries]
    accuracy_over = value_over(table, ids, "rejection_accuracy")
    assert (accuracy_over.value, accuracy_over.n) == (pytest.approx(accuracy), 5)
    assert value_over(table, ids, "false_confidence_rate").value == pytest.approx(1 - accuracy)
    assert value_over(table, ids, "mrr").n == 1


def test_rejection_rows_appear_only_when_a_rejection_metric_is_asked_for() -> None:
    measured = score_run(GOLD, RUN, ["mrr"], 1)
    assert list(measured.per_query) == ["answerable"]
    assert len(measured.rejections) == 5


def test_the_score_threshold_loads(tmp_path: Path) -> None:
    path = tmp_path / "c.yaml"
    path.write_text("gold: [a.jsonl]\nrejection_score_threshold: -2\n")
    assert load_config(path).rejection_score_threshold == -2.0
    path.write_text("gold: [a.jsonl]\n")
    assert load_config(path).rejection_score_threshold is None


@pytest.mark.parametrize(
    ("value", "message"),
    [
        ("high", "must be a number, got 'high'"),
        ("true", "must be a number, got True"),
        (".nan", "must be a number, got nan"),
    ],
)
def test_a_bad_score_threshold(tmp_path: Path, value: str, message: str) -> None:
    path = tmp_path / "c.yaml"
    path.write_text(f"gold: [a.jsonl]\nrejection_score_threshold: {value}\n")
    with pytest.raises(InputError) as caught:
        load_config(path)
    assert str(caught.value) == f"{path}:2: rejection_score_threshold: {message}"


@pytest.mark.parametrize(
    ("answerable", "unanswerable", "expected"),
    [
        ((3, 4, 5), (1, 2), (2.5, 3, 2)),  # apart: every question right
        ((1, 5, 6), (2, 3), (4.0, 2, 2)),  # overlapping: the most right in balance
        ((2, 4), (1, 3), (1.5, 2, 1)),  # a tie: the lower threshold loses no answerable
        ((2.187, 3.1), (1.598,), (2.0, 2, 1)),  # the shortest decimal between the two
        ((0.30000000000000004,), (0.3,), (0.30000000000000004, 1, 1)),  # no room between
        ((10, 100, 1000), (1,), (6.0, 3, 1)),
    ],
)
def test_suggest_threshold(
    answerable: tuple[float, ...], unanswerable: tuple[float, ...], expected: tuple
) -> None:
    found = suggest_threshold(answerable, unanswerable)
    threshold, kept, rejected = expected
    assert found == ThresholdSuggestion(
        threshold, kept, len(answerable), rejected, len(unanswerable)
    )


@pytest.mark.parametrize(
    ("answerable", "unanswerable", "reason"),
    [
        ((1.0, 2.0), (), "no rejection question has scores"),
        ((), (1.0,), "no answerable question has scores"),
        ((1.0, 2.0), (3.0, 4.0), "the rejection questions score as high as the answerable ones"),
        ((2.0, 2.0), (2.0,), "the rejection questions score as high as the answerable ones"),
    ],
)
def test_no_threshold_to_suggest(
    answerable: tuple[float, ...], unanswerable: tuple[float, ...], reason: str
) -> None:
    found = suggest_threshold(answerable, unanswerable)
    assert (found.threshold, found.reason) == (None, reason)
    assert (found.answerable, found.unanswerable) == (len(answerable), len(unanswerable))


def test_top_scores_leave_out_abstentions_and_empty_answers() -> None:
    gold = GoldSet(
        (
            gold_query("a", (("d0", 1),)),
            gold_query("b", (("d0", 1),)),
            gold_query("r1"),
            gold_query("r2"),
            gold_query("r3"),
        )
    )
    run = Run(
        {
            "a": QueryResults("a", (RankedResult("d0", 2.0), RankedResult("d1", 5.0))),
            "b": QueryResults("b", (RankedResult("d0", None),)),
            "r1": QueryResults("r1", (RankedResult("d0", 1.0),)),
            "r2": QueryResults("r2", (RankedResult("d0", 9.0),), abstained=True),
            "r3": QueryResults("r3", ()),
        }
    )
    assert top_scores(gold, run) == ((5.0,), (1.0,))


STARTER_STATS = (
    "rejection_score_threshold: 2.0 separates the top scores of {source} best: of the "
    "questions with scored results, it keeps 12 of 12 answerable ones confident and "
    "rejects 1 of 1 rejection question. config/llm-eval.yaml sets none."
)
"""What `gold stats` says of init's starter project, its line breaks left out."""


def test_gold_stats_suggests_a_threshold(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, cli: Cli
) -> None:
    """On init's starter project (bm25; one rejection question gets no results, the other
    a top score below every answerable one's), from the retriever and from a run file."""
    monkeypatch.chdir(tmp_path)
    assert cli("init")[0] == 0
    code, out, _ = cli("gold", "stats")
    assert code == 0
    assert STARTER_STATS.format(source="the bm25 retriever") in " ".join(out.split())
    assert cli("retrieve", "--out", "run.jsonl")[0] == 0
    code, out, _ = cli("gold", "stats", "--run", "run.jsonl")
    assert STARTER_STATS.format(source="run.jsonl") in " ".join(out.split())


def test_gold_stats_says_when_it_cannot_suggest(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, cli: Cli
) -> None:
    monkeypatch.chdir(tmp_path)
    assert cli("init")[0] == 0
    config = Path("config/llm-eval.yaml")
    text = config.read_text(encoding="utf-8")
    config.write_text(text.replace("retriever:\n  kind: bm25", "#"), encoding="utf-8")
    code, out, _ = cli("gold", "stats")
    assert code == 0
    assert (
        "No run to suggest a rejection_score_threshold from: pass --run, or configure a\n"
        "retriever.\n"
    ) in out
    gold = Path("gold/gold-A.jsonl")
    lines = gold.read_text(encoding="utf-8").splitlines()
    gold.write_text("".join(f"{ln}\n" for ln in lines if "is_rejection" not in ln))
    code, out, _ = cli("gold", "stats", "--baseline", "none.json")
    assert "No rejection question in the gold set: no rejection_score_threshold to suggest." in out
