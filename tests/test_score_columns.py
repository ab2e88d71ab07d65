from __future__ import annotations

import numpy as np

from llm_eval.score_columns import ScoreColumns

ROWS = {
    "q1": {"recall@5": 1.0, "mrr": 0.5},
    "q2": {"recall@5": 0.0, "mrr": -0.0},
    "q3": {"rejected": 1.0},
    "q4": {"recall@5": 0.25, "mrr": 0.125, "spearman@10": 0.75},
}


def test_columns_read_as_the_rows_they_were_made_from() -> None:
    table = ScoreColumns.from_rows(ROWS)
    assert isinstance(table, ScoreColumns)
    assert table == ROWS
    assert list(table) == list(ROWS)
    assert [list(row) for row in table.values()] == [list(row) for row in ROWS.values()]
    assert np.signbit(table["q2"]["mrr"])
    assert "mrr" not in table["q3"]
    assert table.get("q9") is None
    assert table["q3"].get("mrr", 7.0) == 7.0


def test_a_column_is_each_rows_value_where_it_has_one() -> None:
    table = ScoreColumns.from_rows(ROWS)
    assert isinstance(table, ScoreColumns)
    present, values = table.column("mrr", ["q4", "q3", "q9", "q1"])
    assert present.tolist() == [True, False, False, True]
    assert values.tolist() == [0.125, 0.0, 0.0, 0.5]
    assert not table.column("ndcg@10", ["q1"])[0].any()


def test_rows_whose_orders_no_one_order_keeps_stay_as_they_are() -> None:
    rows = {"q1": {"a": 1.0, "b": 2.0}, "q2": {"b": 3.0, "a": 4.0}}
    assert ScoreColumns.from_rows(rows) is rows


def test_no_rows_make_an_empty_table() -> None:
    table = ScoreColumns.from_rows({})
    assert len(table) == 0
    assert table == {}


def test_a_column_reads_as_the_dict_of_its_values() -> None:
    from llm_eval.score_columns import Column, hex_fingerprint

    ids = [f"q{i}" for i in range(10_000)]
    values = np.arange(10_000, dtype=np.uint64) * np.uint64(0x9E3779B97F4A7C15)
    column = Column(ids, values, hex_fingerprint)
    expected = {q: f"{int(v):016x}" for q, v in zip(ids, values.tolist(), strict=True)}
    assert column == expected and dict(column) == expected
    assert list(column.items()) == list(expected.items())  # read a block at a time
    assert column["q9999"] == expected["q9999"] and column.get("q10000") is None
    assert "q5" in column and "x" not in column and len(column) == 10_000
    assert Column(list(ids), values, hex_fingerprint).places is column.places


def test_the_gold_diff_of_columns_is_that_of_their_dicts() -> None:
    from llm_eval.fingerprint import diff_gold
    from llm_eval.score_columns import Column, hex_fingerprint

    ids = [f"q{i}" for i in range(50)]
    before = np.arange(50, dtype=np.uint64)
    after = before.copy()
    after[[3, 17, 40]] += np.uint64(1)
    old, new = Column(ids, before, hex_fingerprint), Column(ids, after, hex_fingerprint)
    assert old.places is new.places  # so the diff is read from the arrays
    diff = diff_gold(old, new)
    assert diff == diff_gold(dict(old), dict(new))
    assert diff.changed == ("q17", "q3", "q40") and not diff.added and not diff.removed
    shuffled = Column(ids[::-1], after[::-1].copy(), hex_fingerprint)
    assert diff_gold(old, shuffled) == diff


def test_places_found_once_read_what_each_lookup_reads() -> None:
    """Columns read through places found once (for a list of queries asked again, or
    equal to one asked before, and for two tables of the same queries) are those read
    by a lookup each; a mapping of rows is read row by row."""
    from llm_eval.score_columns import FoundPlaces, column_of

    rows = {f"q{i}": {"m": i / 7, **({"n": 1.0} if i % 3 else {})} for i in range(40)}
    now = ScoreColumns.from_rows(rows)
    before = ScoreColumns.from_rows({q: {"m": r["m"] + 1, "n": 2.0} for q, r in rows.items()})
    assert isinstance(now, ScoreColumns) and isinstance(before, ScoreColumns)
    found = FoundPlaces()
    for ids in (
        ["q3", "q1", "x", "q39"],
        [f"q{i}" for i in range(0, 45, 2)],
        ["q3", "q1", "x", "q39"],
    ):
        for table in (now, before, rows):
            for metric in ("m", "n", "absent"):
                got = found.column(table, metric, list(ids))
                expected = column_of(table, metric, ids)
                assert all(np.array_equal(a, b) for a, b in zip(got, expected, strict=True))
    other = ScoreColumns.from_rows({q: {"m": 5.0} for q in reversed(rows)})  # other places
    assert isinstance(other, ScoreColumns)
    got = found.column(other, "m", ["q3", "q1", "x", "q39"])
    assert got[0].tolist() == [True, True, False, True] and got[1].tolist() == [5.0, 5.0, 0.0, 5.0]
