"""The baseline file (round trip, atomic replacement, corrupt files) and its refresh,
which rewrites it only when something the gate reads moved."""

from __future__ import annotations

import json
import math
import os
import re
from pathlib import Path
from typing import Any

import pytest
from conftest import Cli, gold_query
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from llm_eval.baseline import Baseline
from llm_eval.baseline_io import load_baseline, save_baseline
from llm_eval.commands.baseline import changes, moved
from llm_eval.criteria import Gate, Location, Scope
from llm_eval.errors import InputError
from llm_eval.metrics import parse_metric
from llm_eval.service_metrics import ServiceRecord


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


def _whole_and_by_rows(text: str, path: Path) -> tuple[Baseline, Baseline | None]:
    from llm_eval.baseline_io import _read_by_rows, parse_baseline

    return parse_baseline(json.loads(text), str(path)), _read_by_rows(text, str(path))


@pytest.mark.parametrize(
    "per_query",
    [
        {"q1": {"recall@5": 1.0, "mrr": 0.5}, "q2": {"mrr": 0.25}, "q3": {}},
        {'q "1",\\': {"recall@5": 1.0}, "é\n": {"mrr": 0.5, "recall@5": 0.0}},
        {"q:1": {"recall@5": 1.0, "mrr": 0.5}, "q:2": {"recall@5": 0.0, "mrr": 1.0}},
        {},
    ],
)
@pytest.mark.parametrize("indent", [1, None, 4])
def test_a_baseline_read_by_rows_is_the_baseline_read_whole(
    tmp_path: Path, per_query: dict[str, dict[str, float]], indent: int | None
) -> None:
    service = {q: ServiceRecord(12.5 if i else None, bool(i)) for i, q in enumerate(per_query)}
    document = sample(per_query=per_query, service=service).to_json()
    text = json.dumps(document, indent=indent)
    whole, by_rows = _whole_and_by_rows(text, tmp_path)
    assert by_rows is not None
    assert by_rows == whole
    assert {q: dict(row) for q, row in by_rows.per_query.items()} == per_query


@pytest.mark.parametrize(
    "change",
    [
        '"q2": {"recall@5": true, "mrr": 0.0}',
        '"q2": {"recall@5": NaN, "mrr": 0.0}',
        '"q2": {"mrr": 0.0, "recall@5": 1.0}',  # no one order: the rows stay dicts
        '"q1": {"recall@5": 0.0, "mrr": 0.0}',  # a repeated query id
        '"q2": {"recall@5": 0.0, "recall@5": 0.0}',
    ],
)
def test_a_baseline_read_by_rows_leaves_anything_unusual_to_the_whole_reading(
    tmp_path: Path, change: str
) -> None:
    text = json.dumps(sample().to_json(), indent=1)
    text = text.replace('"q2": {\n   "recall@5": 0.0,\n   "mrr": 0.0\n  }', change)
    assert change.split(":")[0] in text
    from llm_eval.baseline_io import _read_by_rows

    assert _read_by_rows(text, str(tmp_path)) is None


@pytest.mark.parametrize(("levels", "read"), [(99, True), (100, False)])
def test_a_baseline_read_by_rows_refuses_nesting_as_the_whole_reading_does(
    tmp_path: Path, levels: int, read: bool
) -> None:
    from llm_eval.baseline_io import _read_by_rows

    text = json.dumps({**sample().to_json(), "extra": "[" * levels + "]" * levels}, indent=1)
    text = text.replace('"' + "[" * levels + "]" * levels + '"', "[" * levels + "]" * levels)
    path = tmp_path / "baseline.json"
    path.write_text(text)
    assert (_read_by_rows(text, str(path)) is not None) == read
    if read:
        assert load_baseline(path) == sample()
    else:
        with pytest.raises(InputError, match="nested deeper than 100 levels"):
            load_baseline(path)


def test_a_service_row_with_other_keys_is_read_whole(tmp_path: Path) -> None:
    from llm_eval.baseline_io import _read_by_rows

    document = sample(service={"q1": ServiceRecord(1.5, False)}).to_json()
    document["service"]["q1"]["note"] = [[1]]
    path = tmp_path / "baseline.json"
    path.write_text(json.dumps(document, indent=1))
    assert _read_by_rows(path.read_text(), str(path)) is None
    baseline = load_baseline(path)
    assert baseline is not None and baseline.service == {"q1": ServiceRecord(1.5, False)}


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
        (
            "aggregates.overall.mrr",
            10**400,
            "expected a finite number, got an integer of 401 digits",
        ),
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


# --- what a refresh counts as moved ----------------------------------------------------

HERE = Location("config/ship-criteria.yaml", 1, "gates[0]")
QUERIES = [gold_query(q, (("d", 1),), line=i + 1) for i, q in enumerate(["q1", "q2"])]


def latency_gate(regression_max: float | None, relative: bool = False) -> Gate:
    return Gate(
        "latency",
        "latency_p50",
        None,
        regression_max,
        "warning",
        Scope(),
        HERE,
        HERE,
        regression_relative=relative,
    )


def timed(*latencies: float | None, error: bool = False) -> dict[str, ServiceRecord]:
    return {f"q{i + 1}": ServiceRecord(ms, error) for i, ms in enumerate(latencies)}


def with_scores(q1: dict[str, float]) -> dict[str, dict[str, float]]:
    return {**sample().per_query, "q1": q1}


@pytest.mark.parametrize(
    ("changed", "moved"),
    [
        ({}, ()),
        # provenance is not a move
        ({"created_at": "2026-11-24T05:00:00+00:00", "git_commit": None}, ()),
        ({"tool_version": "0.2.0"}, ()),
        # nor is latency: it differs on every run of the same retriever
        ({"service": timed(40.0, 2.5)}, ()),
        (
            {"aggregates": {"overall": {"n": 2, "recall@5": 0.5, "mrr": 0.25, "latency_p50": 9.0}}},
            (),
        ),
        ({"per_query": with_scores({"recall@5": 1.0, "mrr": 1.0})}, ("the scores of 1 query",)),
        ({"first_relevant_rank": {"q1": 3, "q2": 1}}, ("the scores of 2 queries",)),
        ({"service": timed(1.0, None, error=True)}, ("the scores of 2 queries",)),
        (
            {"aggregates": {"overall": {"n": 2, "recall@5": 0.4, "mrr": 0.25}}},
            ("the slice values",),
        ),
        (
            {"fingerprints": {"gold": "g", "corpus": "c", "retriever": "r2", "criteria": "k2"}},
            ("fingerprints (retriever, criteria)",),
        ),
        (
            {"fingerprints": {"gold": "g", "corpus": "c", "retriever": "r"}},
            ("fingerprints (criteria)",),
        ),
        ({"metrics": ("recall@5", "mrr", "ndcg@10")}, ("the metrics",)),
        ({"relevance_level": 2, "gating_k": 10}, ("the relevance level", "the hit cutoff")),
    ],
)
def test_what_a_refresh_counts_as_moved(changed: dict[str, object], moved: tuple[str, ...]) -> None:
    old = sample(service=timed(10.0, 20.0))
    new = sample(**{"service": timed(10.0, 20.0), **changed})
    assert changes(old, new, QUERIES, []) == moved


def test_a_slice_without_scores_has_not_moved(tmp_path: Path) -> None:
    """Its mean is NaN, which the file keeps: NaN read back equals NaN computed."""
    empty = {"overall": {"n": 0, "recall@5": math.nan, "mrr": math.nan}}
    save_baseline(tmp_path / "baseline.json", sample(aggregates=empty))
    old = load_baseline(tmp_path / "baseline.json")
    assert old is not None
    assert changes(old, sample(aggregates=empty), QUERIES, []) == ()


@pytest.mark.parametrize(
    ("gate", "before", "after", "moved"),
    [
        # the median of q1 and q2: 15.0 ms before
        (latency_gate(5.0), (10.0, 20.0), (14.0, 26.0), ()),  # +5.0 ms: at the limit
        (latency_gate(5.0), (10.0, 20.0), (10.0, 10.0), ()),  # −5.0 ms
        (
            latency_gate(5.0),
            (10.0, 20.0),
            (16.0, 26.0),
            ("latency p50 from 15.0 ms to 21.0 ms, more than the +5.0 ms its gate allows",),
        ),
        (
            latency_gate(5.0),
            (10.0, 20.0),
            (4.0, 14.0),
            ("latency p50 from 15.0 ms to 9.0 ms, more than the +5.0 ms its gate allows",),
        ),
        (latency_gate(0.2, relative=True), (10.0, 20.0), (12.0, 24.0), ()),  # +20%
        (
            latency_gate(0.2, relative=True),
            (10.0, 20.0),
            (13.0, 24.0),
            ("latency p50 from 15.0 ms to 18.5 ms, more than the +20% its gate allows",),
        ),
        # a ceiling without a regression limit does not read the baseline's latency
        (latency_gate(None), (10.0, 20.0), (100.0, 200.0), ()),
        # a baseline without latencies gets them
        (
            latency_gate(5.0),
            (None, None),
            (10.0, 20.0),
            ("latency p50 from n/a to 15.0 ms, more than the +5.0 ms its gate allows",),
        ),
    ],
)
def test_a_latency_moves_only_beyond_the_limit_of_a_gate_that_reads_it(
    gate: Gate,
    before: tuple[float | None, ...],
    after: tuple[float | None, ...],
    moved: tuple[str, ...],
) -> None:
    old, new = sample(service=timed(*before)), sample(service=timed(*after))
    assert changes(old, new, QUERIES, [gate]) == moved


# --- `llm-eval baseline refresh` on the bundled demo -----------------------------------

REPO = Path(__file__).resolve().parents[1]
NOTHING_MOVED = (
    "Nothing moved: fresh.json already holds these scores (327 scored queries); left\n  as it is.\n"
)


def refresh(cli: Cli, *args: str) -> tuple[int, str]:
    code, out, _ = cli("baseline", "refresh", *args)
    return code, out


def change_k1(demo: Path) -> None:
    """A real score change: BM25's term-frequency saturation, 0.9 → 1.2."""
    config = demo / "config" / "llm-eval.yaml"
    config.write_text(config.read_text().replace("k1: 0.9", "k1: 1.2"))


def test_two_refreshes_of_an_unchanged_setup_leave_the_file_byte_identical(
    indexed_demo: Path, cli: Cli
) -> None:
    assert refresh(cli, "--baseline", "fresh.json")[1].startswith(
        "Wrote fresh.json (327 scored queries).\n\nNew values:\n"
    )
    written = (indexed_demo / "fresh.json").read_bytes()
    for _ in range(2):
        assert refresh(cli, "--baseline", "fresh.json") == (
            0,
            NOTHING_MOVED,
        )
        assert (indexed_demo / "fresh.json").read_bytes() == written


def test_a_score_change_rewrites_the_file_and_says_what_moved(indexed_demo: Path, cli: Cli) -> None:
    refresh(cli, "--baseline", "fresh.json")
    before = (indexed_demo / "fresh.json").read_bytes()
    change_k1(indexed_demo)
    code, out = refresh(cli, "--baseline", "fresh.json")
    assert code == 0
    assert out.startswith(
        "Wrote fresh.json (327 scored queries); moved: fingerprints (retriever), the\n"
        "  scores of 74 queries.\n\nWhat moved (new value, change):\n"
    )
    after = load_baseline(indexed_demo / "fresh.json")
    assert after is not None and after.aggregates != json.loads(before)["aggregates"]
    assert refresh(cli, "--baseline", "fresh.json")[1] == NOTHING_MOVED


def test_the_refresh_guide_shows_what_refresh_prints(indexed_demo: Path, cli: Cli) -> None:
    """On the committed baseline: nothing moved; after the change the guide names, what
    moved."""
    readme = (REPO / "docs" / "how-to" / "baseline-refresh.md").read_text(encoding="utf-8")
    blocks = re.findall(
        r"^```console\n\$ llm-eval baseline refresh(.*?)\n(.*?)^```$", readme, re.M | re.S
    )
    (unchanged, after_k1) = blocks
    assert unchanged == ("", refresh(cli)[1])
    assert (indexed_demo / "gold" / "baseline.json").read_bytes() == (
        REPO / "gold" / "baseline.json"
    ).read_bytes()
    assert "k1: 0.9 → 1.2" in after_k1[0]
    change_k1(indexed_demo)
    assert after_k1[1] == refresh(cli)[1]


def test_a_baseline_that_cannot_be_read_is_replaced(indexed_demo: Path, cli: Cli) -> None:
    (indexed_demo / "old.json").write_text('{"schema_version": 2}')
    code, out = refresh(cli, "--baseline", "old.json")
    assert code == 0
    assert out.startswith(
        "Wrote old.json (327 scored queries), in place of a file that could not be read:\n"
        "  old.json: schema_version: corrupt baseline: version 2 is not supported"
    )
    assert load_baseline(indexed_demo / "old.json") is not None


def test_a_move_below_a_floor_is_refused_but_a_state_that_did_not_move_is_not(
    indexed_demo: Path, cli: Cli
) -> None:
    degraded = ["--config", "config/examples/degraded.yaml", "--baseline", "b.json"]
    refresh(cli, "--baseline", "b.json")
    written = (indexed_demo / "b.json").read_bytes()
    code, out = refresh(cli, *degraded)
    assert code == 1
    assert out.startswith("Not writing b.json: an error gate's floor fails on this state.\n")
    assert (indexed_demo / "b.json").read_bytes() == written
    assert refresh(cli, *degraded, "--force")[0] == 0
    assert refresh(cli, *degraded) == (
        0,
        "Nothing moved: b.json already holds these scores (327 scored queries); left as\n"
        "  it is.\n",
    )


def replace_gold(demo: Path) -> None:
    """Another gold set in place of the demo's: tier A without its rejection queries and
    with its first ten queries renamed, no tier B; the config also reports rejection
    accuracy, which this set gives no query to score."""
    gold = demo / "gold" / "python-docs-A.jsonl"
    queries = [json.loads(line) for line in gold.read_text().splitlines()]
    kept = [q for q in queries if not q.get("is_rejection")]
    for q in kept[:10]:
        q["query_id"] = "new-" + q["query_id"]
    gold.write_text("".join(json.dumps(q) + "\n" for q in kept))
    config = demo / "config" / "llm-eval.yaml"
    text = config.read_text()
    b_tier = (
        "  - path: gold/python-docs-B.jsonl\n    tier: B          # secondary queries: reported\n"
    )
    assert b_tier in text and "precision@5, hit_rate@5]" in text
    text = text.replace(b_tier, "").replace("hit_rate@5]", "hit_rate@5, rejection_accuracy]")
    config.write_text(text)


def test_a_refresh_after_the_gold_set_was_replaced_shows_no_change_and_no_empty_row(
    indexed_demo: Path, cli: Cli
) -> None:
    replace_gold(indexed_demo)
    old = load_baseline(indexed_demo / "gold" / "baseline.json")
    assert old is not None
    code, out = refresh(cli)
    assert code == 0
    new = load_baseline(indexed_demo / "gold" / "baseline.json")
    assert new is not None
    gone = len(set(old.query_fingerprints) - set(new.query_fingerprints))
    assert out.startswith(
        f"Wrote gold/baseline.json ({len(new.per_query)} scored queries); moved: fingerprints "
        "(gold), the\n  metrics.\n\n"
        f"The gold set changed since the old baseline (10 queries added, {gone} queries\n"
        "  removed): its values are not over the same queries, so no change is shown.\n\n"
        "New values:\nmetric "
    )
    rows = out.split("\n-")[1].splitlines()[1:]
    labels = [parse_metric(m).label for m in new.metrics if m != "rejection_accuracy"]
    assert [row.split("  ")[0] for row in rows] == labels
    assert "(" not in "".join(rows) and "n/a" not in out


def test_changes_are_shown_only_against_a_baseline_of_the_same_gold_set() -> None:
    new = sample(aggregates={"overall": {"n": 2, "recall@5": 0.75, "mrr": 0.25}})
    same = moved(sample(), new).splitlines()
    assert same[0] == "What moved (new value, change):"
    assert same[3].split() == ["recall@5", "75.0%", "(+25.0", "pp)"]
    other = sample(query_fingerprints={"q1": "f1", "q3": "f3", "q4": "f4"})
    assert moved(other, new).splitlines()[:3] == [
        "The gold set changed since the old baseline (1 query added, 2 queries removed):",
        "  its values are not over the same queries, so no change is shown.",
        "",
    ]
    assert moved(other, new).splitlines()[3] == "New values:"
    assert "(" not in moved(other, new).split("New values:")[1].replace("overall (2)", "")


def test_a_metric_no_query_scores_has_no_row() -> None:
    rows = {"n": 2, "recall@5": 0.5, "mrr": 0.25, "rejection_accuracy": math.nan}
    new = sample(metrics=("recall@5", "mrr", "rejection_accuracy"), aggregates={"overall": rows})
    for old in (None, new):
        text = moved(old, new)
        assert "rejection accuracy" not in text and "n/a" not in text
        assert "MRR" in text


@pytest.mark.parametrize(
    "fingerprints",
    [
        {"q1": "0123456789abcdef", "q2": "ffffffffffffffff"},
        {"q1": "0123456789abcdef", "q2": "f2"},  # another text: the section stays as it is
        {"q1": "f1", "q2": "0123456789abcdef"},
        {},
    ],
)
def test_fingerprints_and_ranks_read_by_rows_are_those_read_whole(
    tmp_path: Path, fingerprints: dict[str, str]
) -> None:
    from llm_eval.score_columns import Column

    ranks = {q: i * 3 for i, q in enumerate(fingerprints)}
    document = sample(query_fingerprints=fingerprints, first_relevant_rank=ranks).to_json()
    whole, by_rows = _whole_and_by_rows(json.dumps(document, indent=1), tmp_path)
    assert by_rows is not None and by_rows == whole
    assert dict(by_rows.query_fingerprints) == fingerprints
    assert dict(by_rows.first_relevant_rank) == ranks
    assert list(by_rows.query_fingerprints.items()) == list(fingerprints.items())
    hexed = all(re.fullmatch("[0-9a-f]{16}", f) for f in fingerprints.values())
    assert isinstance(by_rows.query_fingerprints, Column) == hexed
    assert isinstance(by_rows.first_relevant_rank, Column)


def test_a_baseline_read_with_the_gold_ids_holds_their_strings(tmp_path: Path) -> None:
    path = tmp_path / "baseline.json"
    save_baseline(path, sample())
    ids = ["".join(["q", str(n)]) for n in (1, 2, 3)]  # made here: not the file's strings
    read = load_baseline(path, ids)
    assert read == sample()
    for section in (read.per_query, read.query_fingerprints, read.first_relevant_rank):
        assert [next(i for i in ids if i == q) is q for q in section] == [True, True]


_IDS = st.text(st.characters(codec="utf-8", exclude_characters="\x00"), max_size=4)
_SCORES = st.floats(allow_nan=False, allow_infinity=False) | st.integers(-(2**53), 2**53)
_ROW = st.dictionaries(st.sampled_from(["recall@5", "mrr", "m:1", "ndcg@10"]), _SCORES)


@settings(max_examples=300, deadline=None, suppress_health_check=list(HealthCheck))
@given(
    per_query=st.dictionaries(_IDS, st.one_of(_ROW, st.just({"recall@5": 1.0, "mrr": 0.5}))),
    service=st.dictionaries(
        _IDS,
        st.fixed_dictionaries(
            {},
            optional={
                "latency_ms": st.none() | st.floats(allow_nan=False) | st.integers(0, 9),
                "error": st.booleans(),
            },
        ),
    ),
    scalars=st.dictionaries(
        _IDS,
        st.tuples(
            st.from_regex("[0-9a-f]{16}", fullmatch=True) | st.sampled_from(["F1", "f2"]),
            st.integers(0, 2**62) | st.just(-1),
        ),
    ),
    piece=st.integers(1, 400),
    repeat=st.sampled_from(["", "recall@5", "q"]),
)
def test_a_baseline_read_by_pieces_of_any_size_is_the_baseline_read_whole(
    per_query: dict[str, dict[str, float]],
    service: dict[str, dict[str, Any]],
    scalars: dict[str, tuple[str, int]],
    piece: int,
    repeat: str,
) -> None:
    """Every section of rows read by pieces cut wherever the writer's form allows gives
    what the whole reading gives, or leaves the document to it: scores of any metrics,
    ids with colons, quotes and line ends, service rows of every shape (an integer
    latency, an infinite one), fingerprints of other texts, ranks out of range, and a
    key repeated in a row or a query twice."""
    from llm_eval import baseline_io

    document = sample().to_json()
    document["per_query"] = per_query
    document["service"] = service
    document["query_fingerprints"] = {q: f for q, (f, _) in scalars.items()}
    document["first_relevant_rank"] = {q: r for q, (_, r) in scalars.items()}
    text = json.dumps(document, indent=1)
    rows = text.index('"per_query": {')
    if repeat == "recall@5" and '"mrr": ' in text[rows:]:  # a key twice in a row
        text = text[:rows] + text[rows:].replace('"mrr": ', '"recall@5": ', 1)
    elif repeat == "q" and per_query:  # a query twice, in rows that may be pieces apart
        first = json.dumps(next(iter(per_query)))
        text = text.replace('"per_query": {', f'"per_query": {{\n  {first}: {{}},', 1)
    try:
        whole: Baseline | None = baseline_io.parse_baseline(
            baseline_io.json_document(text, "b.json"), "b.json"
        )
    except InputError:
        whole = None
    old_piece = baseline_io._PIECE
    baseline_io._PIECE = piece
    try:
        by_pieces = baseline_io._read_by_rows(text, "b.json")
    finally:
        baseline_io._PIECE = old_piece
    if whole is None:
        assert by_pieces is None
    elif by_pieces is not None:
        assert by_pieces == whole
        assert {q: dict(row) for q, row in by_pieces.per_query.items()} == {
            q: dict(row) for q, row in whole.per_query.items()
        }
        assert list(by_pieces.service.items()) == list(whole.service.items())


def test_a_written_baseline_is_read_by_pieces_not_row_by_row(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The sections `save_baseline` writes are read a piece at a time, cut between rows
    anywhere: the reading row by row is never asked for."""
    from llm_eval import baseline_io

    ids = [f"q{i}" for i in range(500)]
    baseline = sample(
        per_query={q: {"recall@5": i / 50, "mrr": 1 / (i + 1)} for i, q in enumerate(ids)},
        query_fingerprints={q: f"{i:016x}" for i, q in enumerate(ids)},
        first_relevant_rank={q: i % 7 for i, q in enumerate(ids)},
        service={q: ServiceRecord(None if i % 5 else 2.5, i % 3 == 0) for i, q in enumerate(ids)},
    )
    path = tmp_path / "baseline.json"
    save_baseline(path, baseline)

    asked: list[int] = []
    monkeypatch.setattr(baseline_io, "_read_rows", lambda *args: asked.append(1))
    monkeypatch.setattr(baseline_io, "json_document", lambda *args: asked.append(2))
    for piece in (1, 37, 5000, 1 << 20):
        monkeypatch.setattr(baseline_io, "_PIECE", piece)
        assert load_baseline(path) == baseline
    assert asked == []
