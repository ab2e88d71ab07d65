"""Stale and conflicting context from the corpus-versions sidecar, worked by hand."""

from __future__ import annotations

import json
from datetime import UTC, datetime
from pathlib import Path

import pytest
from conftest import gold_query

from llm_eval.config_io import load_config
from llm_eval.criteria_io import check_against_config, load_criteria
from llm_eval.errors import InputError
from llm_eval.gold import GoldSet
from llm_eval.runs import QueryResults, RankedResult, Run
from llm_eval.scoring import Scoring, score_run
from llm_eval.slices import ScoreTable, value_over
from llm_eval.versions import (
    Conflict,
    StaleHit,
    Supersession,
    TopK,
    VersionRecord,
    build_versions,
    inspect_top_k,
)
from llm_eval.versions_io import load_versions


def at(text: str) -> datetime:
    moment = datetime.fromisoformat(text)
    return moment if moment.tzinfo else moment.replace(tzinfo=UTC)


@pytest.mark.parametrize(
    ("records", "stale"),
    [
        # Said explicitly, whatever the dates.
        (
            [VersionRecord("a", superseded_by="b"), VersionRecord("b")],
            {"a": Supersession("b", "superseded_by")},
        ),
        # Implied by a strictly newer document with the same key: the newest wins.
        (
            [
                VersionRecord("v1", "k", at("2022-01-01")),
                VersionRecord("v3", "k", at("2024-01-01")),
                VersionRecord("v2", "k", at("2023-06-30T12:00:00")),
            ],
            {"v1": Supersession("v3", "newer version"), "v2": Supersession("v3", "newer version")},
        ),
        # The same moment is not newer: neither is stale.
        (
            [VersionRecord("a", "k", at("2024-01-01")), VersionRecord("b", "k", at("2024-01-01"))],
            {},
        ),
        # 00:00 at +02:00 is 22:00 UTC the day before: earlier than 23:00Z.
        (
            [
                VersionRecord("a", "k", at("2024-01-01T00:00:00+02:00")),
                VersionRecord("b", "k", at("2023-12-31T23:00:00Z")),
            ],
            {"a": Supersession("b", "newer version")},
        ),
        # Other keys, and documents without a date, neither supersede nor go stale.
        (
            [
                VersionRecord("a", "k", at("2020-01-01")),
                VersionRecord("b", "other", at("2024-01-01")),
                VersionRecord("c", "k"),
                VersionRecord("d"),
            ],
            {},
        ),
        # An explicit successor is named even when a newer version exists.
        (
            [
                VersionRecord("a", "k", at("2020-01-01"), superseded_by="x"),
                VersionRecord("b", "k", at("2024-01-01")),
            ],
            {"a": Supersession("x", "superseded_by")},
        ),
    ],
)
def test_which_documents_are_stale(
    records: list[VersionRecord], stale: dict[str, Supersession]
) -> None:
    assert build_versions(records).stale == stale


VERSIONS = build_versions(
    [
        VersionRecord("old", "policy", at("2023-01-01")),
        VersionRecord("new", "policy", at("2024-01-01")),
        VersionRecord("retired", superseded_by="handbook"),
        VersionRecord("handbook"),
    ]
)


def hits(*doc_ids: str) -> tuple[RankedResult, ...]:
    return tuple(RankedResult(d) for d in doc_ids)


@pytest.mark.parametrize(
    ("results", "k", "expected"),
    [
        # Unversioned documents are never stale and never conflict.
        (hits("x", "y", "z"), 5, TopK(3, (), ())),
        (
            hits("old", "x", "new", "retired"),
            5,
            TopK(
                4,
                (
                    StaleHit("q", 1, "old", "new", "newer version"),
                    StaleHit("q", 4, "retired", "handbook", "superseded_by"),
                ),
                (Conflict("q", "policy", ("old", "new")),),
            ),
        ),
        # The collision at rank 3 is outside the top 2: no conflict.
        (
            hits("old", "x", "new"),
            2,
            TopK(2, (StaleHit("q", 1, "old", "new", "newer version"),), ()),
        ),
        # The same document twice is one version: no conflict, but two stale positions.
        (
            hits("old", "old"),
            5,
            TopK(
                2,
                (
                    StaleHit("q", 1, "old", "new", "newer version"),
                    StaleHit("q", 2, "old", "new", "newer version"),
                ),
                (),
            ),
        ),
        (hits(), 5, TopK(0, (), ())),
        # Without a cutoff, the whole list.
        (
            hits("x", "x", "new", "old"),
            None,
            TopK(
                4,
                (StaleHit("q", 4, "old", "new", "newer version"),),
                (Conflict("q", "policy", ("new", "old")),),
            ),
        ),
    ],
)
def test_inspect_top_k(results: tuple[RankedResult, ...], k: int | None, expected: TopK) -> None:
    assert inspect_top_k("q", results, VERSIONS, k) == expected


def test_a_result_is_looked_up_by_doc_id_then_by_document() -> None:
    results = (
        RankedResult("old#p3", document="old", page=3),
        RankedResult("chunk-9", document="unknown.pdf"),
    )
    top = inspect_top_k("q", results, VERSIONS, 5)
    assert top.stale == (StaleHit("q", 1, "old", "new", "newer version"),)


def test_context_metrics_per_query_and_pooled_over_positions() -> None:
    # q1: 5 positions, 1 stale (rank 2), old and new conflict.
    # q2: 2 positions, 1 stale. q3: no results. q4 failed, q5 missing: not scored.
    # stale_rate@5 pools: (1 + 1 + 0) / (5 + 2 + 0) = 2/7, not the mean of 1/5, 1/2, 0.
    gold = GoldSet(
        tuple(gold_query(f"q{i}", (("new", 1),), tier="A" if i < 3 else "B") for i in range(1, 6))
    )
    run = Run(
        {
            "q1": QueryResults("q1", hits("new", "old", "x", "y", "z", "w")),
            "q2": QueryResults("q2", hits("retired", "handbook")),
            "q3": QueryResults("q3", ()),
            "q4": QueryResults("q4", (), error="timeout"),
        }
    )
    metrics = ["stale_rate@5", "stale_query_rate@5", "conflict_rate@5", "conflict_rate@1"]
    measured = score_run(gold, run, metrics, 1, Scoring(versions=VERSIONS))
    # q5 is evaluated (it has a relevant document) but has no value of these metrics.
    assert measured.per_query == {
        "q1": {
            "stale_rate@5": 0.2,
            "positions@5": 5.0,
            "stale_query_rate@5": 1.0,
            "conflict_rate@5": 1.0,
            "conflict_rate@1": 0.0,
        },
        "q2": {
            "stale_rate@5": 0.5,
            "positions@5": 2.0,
            "stale_query_rate@5": 1.0,
            "conflict_rate@5": 0.0,
            "conflict_rate@1": 0.0,
        },
        "q3": {
            "stale_rate@5": 0.0,
            "positions@5": 0.0,
            "stale_query_rate@5": 0.0,
            "conflict_rate@5": 0.0,
            "conflict_rate@1": 0.0,
        },
        "q5": {},
    }
    table = ScoreTable(measured.per_query)
    everyone = [f"q{i}" for i in range(1, 6)]
    stale = value_over(table, everyone, "stale_rate@5")
    assert (stale.value, stale.n) == (pytest.approx(2 / 7), 3)
    assert value_over(table, everyone, "stale_query_rate@5").value == pytest.approx(2 / 3)
    assert value_over(table, everyone, "conflict_rate@5").value == pytest.approx(1 / 3)
    # A slice whose queries considered no position has no stale rate.
    nothing = value_over(table, ["q3"], "stale_rate@5")
    assert nothing.n == 1 and nothing.value != nothing.value
    assert measured.context is not None
    assert measured.context.k == 5
    assert measured.context.stale_hits == (
        StaleHit("q1", 2, "old", "new", "newer version"),
        StaleHit("q2", 1, "retired", "handbook", "superseded_by"),
    )
    assert measured.context.conflicts == (Conflict("q1", "policy", ("new", "old")),)


def test_without_context_metrics_the_whole_lists_are_inspected() -> None:
    gold = GoldSet((gold_query("q1", (("new", 1),)),))
    run = Run({"q1": QueryResults("q1", hits("x", "x", "x", "x", "x", "old"))})
    measured = score_run(gold, run, ["mrr"], 1, Scoring(versions=VERSIONS))
    assert measured.context is not None
    assert measured.context.k is None
    assert measured.context.stale_hits == (StaleHit("q1", 6, "old", "new", "newer version"),)
    assert measured.per_query == {"q1": {"mrr": 0.0}}


def write_lines(path: Path, *lines: str | dict) -> Path:
    text = "".join((line if isinstance(line, str) else json.dumps(line)) + "\n" for line in lines)
    path.write_text(text, encoding="utf-8")
    return path


def test_the_sidecar_loads(tmp_path: Path) -> None:
    path = write_lines(
        tmp_path / "v.jsonl",
        {"doc_id": "a", "version_key": "k", "effective_timestamp": "2023-01-01"},
        "",
        {"doc_id": "b", "version_key": "k", "effective_timestamp": "2024-01-01T08:00:00Z"},
        {"doc_id": "c", "superseded_by": "d", "version_key": None},
    )
    versions = load_versions(path)
    assert versions.records["b"] == VersionRecord("b", "k", at("2024-01-01T08:00:00+00:00"))
    assert versions.stale == {
        "a": Supersession("b", "newer version"),
        "c": Supersession("d", "superseded_by"),
    }


GOOD = {"doc_id": "a", "version_key": "k", "effective_timestamp": "2024-01-01"}


@pytest.mark.parametrize(
    ("line", "message"),
    [
        ("{not json", "invalid JSON: Expecting property name enclosed in double quotes (column 2)"),
        ("[1]", "expected a JSON object, got an array"),
        ({"version_key": "k"}, "doc_id: missing required key"),
        ({"doc_id": 7}, "doc_id: must be a non-empty string, got a number"),
        ({"doc_id": ""}, "doc_id: must be a non-empty string, got a string"),
        ({"doc_id": None}, "doc_id: must be a non-empty string, got null"),
        (
            {"doc_id": "x", "version_key": ["k"]},
            "version_key: must be a non-empty string, got an array",
        ),
        (
            {"doc_id": "x", "effective_timestamp": "yesterday"},
            'effective_timestamp: must be an ISO 8601 date or time, got "yesterday"',
        ),
        (
            {"doc_id": "x", "effective_timestamp": 20240101},
            "effective_timestamp: must be an ISO 8601 date or time, got 20240101",
        ),
        (
            {"doc_id": "x", "superseded_by": "x"},
            "superseded_by: a document cannot supersede itself",
        ),
        (
            {"doc_id": "x", "supersededBy": "y"},
            "supersededBy: unknown key (valid keys: doc_id, effective_timestamp, superseded_by, "
            "version_key)",
        ),
        (GOOD, "doc_id: duplicate doc_id 'a' (first at line 1)"),
    ],
)
def test_a_bad_sidecar_line_names_file_line_and_key(
    tmp_path: Path, line: str | dict, message: str
) -> None:
    path = write_lines(tmp_path / "v.jsonl", GOOD, "", line)
    with pytest.raises(InputError) as caught:
        load_versions(path)
    assert str(caught.value) == f"{path}:3: {message}"


def test_context_metrics_need_a_sidecar(tmp_path: Path) -> None:
    config = tmp_path / "c.yaml"
    config.write_text("gold: [a.jsonl]\nmetrics: [mrr, stale_rate@5]\n")
    with pytest.raises(InputError) as caught:
        load_config(config)
    assert str(caught.value) == (
        f"{config}:2: metrics: stale_rate@5 needs a corpus-versions sidecar; add "
        f"`versions: PATH` to {config}"
    )
    config.write_text("gold: [a.jsonl]\n")
    criteria = tmp_path / "s.yaml"
    criteria.write_text(
        "gates:\n  - name: conflicts\n    metric: conflict_rate@3\n    threshold: 0.1\n"
    )
    with pytest.raises(InputError) as caught:
        check_against_config(load_criteria(criteria), load_config(config))
    assert str(caught.value) == (
        f"{criteria}:2: gates[0]: conflict_rate@3 needs a corpus-versions sidecar; add "
        f"`versions: PATH` to {config}"
    )
    config.write_text("gold: [a.jsonl]\nversions: v.jsonl\ntop_k: 3\nmetrics: [stale_rate@5]\n")
    with pytest.raises(InputError) as caught:
        load_config(config)
    assert (
        str(caught.value)
        == f"{config}:4: metrics: stale_rate@5 needs the top 5 results but top_k is 3"
    )
