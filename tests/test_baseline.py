"""The baseline file: round trip, atomic replacement, and corrupt files."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest

from llm_eval.baseline import Baseline, load_baseline, save_baseline
from llm_eval.errors import InputError


def sample(**changes: object) -> Baseline:
    fields = {
        "created_at": "2026-11-01T10:00:00+00:00",
        "git_commit": "abc123",
        "tool_version": "0.1.0",
        "fingerprints": {"gold": "g", "corpus": "c", "retriever": "r", "criteria": "k"},
        "query_fingerprints": {"q1": "f1", "q2": "f2"},
        "relevance_level": 1,
        "gating_k": 5,
        "metrics": ("recall@5", "mrr"),
        "per_query": {"q1": {"recall@5": 1.0, "mrr": 0.5}, "q2": {"recall@5": 0.0, "mrr": 0.0}},
        "first_relevant_rank": {"q1": 2, "q2": 0},
        "aggregates": {"overall": {"n": 2, "recall@5": 0.5, "mrr": 0.25}},
    }
    fields.update(changes)
    return Baseline(**fields)  # type: ignore[arg-type]


def test_round_trip(tmp_path: Path) -> None:
    path = tmp_path / "baseline.json"
    save_baseline(path, sample())
    assert load_baseline(path) == sample()
    assert json.loads(path.read_text())["schema_version"] == 1


def test_a_missing_baseline_is_none(tmp_path: Path) -> None:
    assert load_baseline(tmp_path / "absent.json") is None


def test_a_failure_mid_write_leaves_the_old_baseline_intact(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    path = tmp_path / "baseline.json"
    save_baseline(path, sample())
    before = path.read_bytes()

    def crash(fd: int) -> None:
        raise OSError("disk full")

    monkeypatch.setattr(os, "fsync", crash)
    with pytest.raises(OSError, match="disk full"):
        save_baseline(path, sample(git_commit="def456"))
    assert path.read_bytes() == before
    assert [p.name for p in tmp_path.iterdir()] == ["baseline.json"]


@pytest.mark.parametrize(
    ("content", "message"),
    [
        (
            "{",
            "FILE:1: corrupt baseline: invalid JSON: "
            "Expecting property name enclosed in double quotes (column 2)",
        ),
        ("[]", "FILE: corrupt baseline: expected a JSON object, got an array"),
        ("", "FILE: corrupt baseline: empty file, expected JSON"),
        ("[" * 200_000, "FILE: corrupt baseline: JSON nested deeper than 100 levels"),
        (
            '{"schema_version": 2}',
            "FILE: schema_version: corrupt baseline: version 2 is not supported (expected 1); "
            "run `llm-eval baseline refresh`",
        ),
        ('{"schema_version": 1}', "FILE: created_at: corrupt baseline: missing required key"),
    ],
)
def test_corrupt_baselines(tmp_path: Path, content: str, message: str) -> None:
    path = tmp_path / "baseline.json"
    path.write_text(content)
    with pytest.raises(InputError) as caught:
        load_baseline(path)
    assert str(caught.value).replace(str(path), "FILE") == message


def test_per_query_values_must_be_numbers(tmp_path: Path) -> None:
    data = sample().to_json()
    data["per_query"]["q1"]["mrr"] = "high"
    path = tmp_path / "baseline.json"
    path.write_text(json.dumps(data))
    with pytest.raises(InputError) as caught:
        load_baseline(path)
    assert str(caught.value) == (
        f'{path}: per_query.q1.mrr: corrupt baseline: expected a finite number, got "high"'
    )


def _broken(key: str, value: object) -> dict[str, object]:
    """The sample baseline's JSON with the value at the dotted `key` replaced."""
    data = sample().to_json()
    *parents, last = key.split(".")
    node = data
    for name in parents:
        node = node[name]
    node[last] = value
    return data


@pytest.mark.parametrize(
    ("key", "value", "message"),
    [
        ("per_query.q1.mrr", float("nan"), "expected a finite number, got NaN"),
        ("per_query.q1.mrr", float("inf"), "expected a finite number, got Infinity"),
        ("per_query.q1", [1.0], "expected an object, got an array"),
        ("aggregates.overall", 0.5, "expected an object, got a number"),
        ("aggregates.overall.n", "2", 'expected a whole number >= 0, got "2"'),
        ("aggregates.overall.n", -1, "expected a whole number >= 0, got -1"),
        ("aggregates.overall.mrr", float("-inf"), "expected a finite number, got -Infinity"),
        ("aggregates.overall.mrr", "0.5", 'expected a finite number, got "0.5"'),
        ("first_relevant_rank.q1", "2", 'expected a whole number >= 0, got "2"'),
        ("first_relevant_rank.q1", 1.5, "expected a whole number >= 0, got 1.5"),
        ("first_relevant_rank.q1", True, "expected a whole number >= 0, got true"),
        ("relevance_level", 0, "expected a whole number >= 1, got 0"),
        ("gating_k", None, "expected a whole number >= 1, got null"),
        ("metrics", ["mrr", 5], "expected a string, got a number"),
        ("fingerprints.gold", 7, "expected a string, got a number"),
        ("query_fingerprints.q1", None, "expected a string, got null"),
        ("created_at", "yesterday", 'expected an ISO 8601 time, got "yesterday"'),
        ("git_commit", 12, "expected a string, got a number"),
        ("service", [], "expected an object, got an array"),
        ("service.q1", {"latency_ms": "fast"}, 'expected a finite number, got "fast"'),
        ("service.q1", {"error": "yes"}, 'expected true or false, got "yes"'),
    ],
)
def test_every_part_of_the_baseline_is_checked_on_load(
    tmp_path: Path, key: str, value: object, message: str
) -> None:
    data = _broken(key, value)
    data.setdefault("service", {"q1": {"latency_ms": 1.0, "error": False}})
    path = tmp_path / "baseline.json"
    path.write_text(json.dumps(data))
    with pytest.raises(InputError) as caught:
        load_baseline(path)
    where = str(caught.value).removeprefix(f"{path}: ")
    assert where.split(": corrupt baseline: ") == [_path_of(key, message), message]


def _path_of(key: str, message: str) -> str:
    """The key an error names: the element, for a bad element of a list or record."""
    if message.startswith("expected a string") and key == "metrics":
        return "metrics[1]"
    if key == "service.q1":
        return "service.q1.latency_ms" if "finite" in message else "service.q1.error"
    return key


def test_a_baseline_path_that_is_a_folder_is_an_input_error(tmp_path: Path) -> None:
    with pytest.raises(InputError) as caught:
        load_baseline(tmp_path)
    assert str(caught.value) == f"{tmp_path}: is a directory, expected a file"
