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
            "Expecting property name enclosed in double quotes",
        ),
        ("[]", "FILE: corrupt baseline: expected a JSON object"),
        (
            '{"schema_version": 2}',
            "FILE: schema_version: corrupt baseline: version 2 is not supported (expected 1); "
            "run `llm-eval baseline refresh`",
        ),
        ('{"schema_version": 1}', "FILE: created_at: corrupt baseline: missing or not a str"),
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
        f"{path}: per_query.q1: corrupt baseline: expected {{metric: number}}"
    )
