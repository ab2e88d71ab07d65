from __future__ import annotations

import json
import pickle
from pathlib import Path

import pytest

from llm_eval.errors import ExitCode, InputError
from llm_eval.gold import GoldQuery, GoldSet, GoldSource, Labels, compact_labels, has_negatives
from llm_eval.gold_io import iter_gold_file, load_gold

VALID_KEYS = (
    "category, difficulty, expected_answer, expected_answer_gist, gold_references, "
    "is_rejection, notes, prompt_version, query, query_id, reference_passages, relevant, "
    "reviewed, source, tags, tier"
)


def write_gold(path: Path, *records: dict[str, object] | str) -> Path:
    """One JSONL line per record; strings are written verbatim."""
    lines = [r if isinstance(r, str) else json.dumps(r) for r in records]
    path.write_text("".join(f"{line}\n" for line in lines), encoding="utf-8")
    return path


def load_one(tmp_path: Path, record: dict[str, object] | str) -> GoldQuery:
    (query,) = load_gold([write_gold(tmp_path / "gold.jsonl", record)]).queries
    return query


def test_a_full_record(tmp_path: Path) -> None:
    path = write_gold(
        tmp_path / "gold.jsonl",
        {
            "query_id": "py-001",
            "query": "How do I sort a list of dicts by a key?",
            "tier": "B",
            "tags": ["howto", "stdlib", "howto"],
            "relevant": {"sorting-howto#2": 2, "stdtypes-list#4": 1},
            "is_rejection": False,
            "expected_answer": "Use sorted with a key.",
            "notes": "checked",
        },
    )
    assert load_gold([path]).queries == (
        GoldQuery(
            query_id="py-001",
            query="How do I sort a list of dicts by a key?",
            tier="B",
            tags=("howto", "stdlib"),
            relevant=(("sorting-howto#2", 2), ("stdtypes-list#4", 1)),
            is_rejection=False,
            expected_answer="Use sorted with a key.",
            notes="checked",
            path=str(path),
            line=1,
        ),
    )


@pytest.mark.parametrize(
    ("relevant", "expected"),
    [
        (["d1", "d2"], (("d1", 1), ("d2", 1))),
        (["d1", "d2", "d1"], (("d1", 1), ("d2", 1))),
        ({"d1": 3, "d2": 1}, (("d1", 3), ("d2", 1))),
        ({"d1": 0, "d2": 2, "d3": 0}, (("d2", 2),)),
    ],
)
def test_relevant_forms(
    tmp_path: Path, relevant: object, expected: tuple[tuple[str, int], ...]
) -> None:
    query = load_one(tmp_path, {"query_id": "q1", "query": "x", "relevant": relevant})
    assert query.relevant == expected
    assert {d: g for d, g in query.grades.items() if g > 0} == dict(expected)
    assert query.is_rejection is False


@pytest.mark.parametrize(
    "extra",
    [
        {},
        {"relevant": {}},
        {"relevant": []},
        {"relevant": {"d1": 0}},
        {"is_rejection": True},
        {"is_rejection": True, "relevant": {"d1": 0}},
        {"is_rejection": False},
    ],
)
def test_a_query_without_relevant_documents_is_a_rejection_query(
    tmp_path: Path, extra: dict[str, object]
) -> None:
    query = load_one(tmp_path, {"query_id": "q1", "query": "x", **extra})
    assert query.relevant == ()
    assert query.is_rejection is True


def test_optional_fields_default(tmp_path: Path) -> None:
    query = load_one(tmp_path, {"query_id": "q1", "query": "x", "relevant": ["d1"]})
    assert (query.tier, query.tags, query.expected_answer, query.notes) == ("A", (), None, None)


@pytest.mark.parametrize(
    ("file_tier", "record_tier", "expected"),
    [
        (None, None, "A"),
        (None, "B", "B"),
        ("B", None, "B"),
        ("B", "B", "B"),
        ("gating", None, "gating"),
    ],
)
def test_tier(
    tmp_path: Path, file_tier: str | None, record_tier: str | None, expected: str
) -> None:
    record: dict[str, object] = {"query_id": "q1", "query": "x"}
    if record_tier is not None:
        record["tier"] = record_tier
    path = write_gold(tmp_path / "gold.jsonl", record)
    (query,) = load_gold([GoldSource(str(path), file_tier)]).queries
    assert query.tier == expected


def test_tier_that_contradicts_the_file_tier(tmp_path: Path) -> None:
    path = write_gold(
        tmp_path / "gold.jsonl",
        {"query_id": "q1", "query": "x", "tier": "A"},
        {"query_id": "q2", "query": "y", "tier": "B"},
    )
    with pytest.raises(InputError) as info:
        load_gold([GoldSource(str(path), "A")])
    assert str(info.value) == (f"{path}:2: tier: is 'B' but the config lists this file as tier 'A'")


def test_line_numbers_count_blank_lines(tmp_path: Path) -> None:
    path = tmp_path / "gold.jsonl"
    path.write_text(
        '\n{"query_id": "q1", "query": "x"}\n\n\r\n{"query_id": "q2", "query": "y"}\r\n'
    )
    assert [(q.query_id, q.line) for q in iter_gold_file(path)] == [("q1", 2), ("q2", 5)]


@pytest.mark.parametrize(
    ("line", "message"),
    [
        ('{"query": "x"}', "query_id: missing required key"),
        ('{"query_id": "q1"}', "query: missing required key"),
        ('{"query_id": "", "query": "x"}', "query_id: must be a non-empty string"),
        ('{"query_id": 7, "query": "x"}', "query_id: must be a non-empty string"),
        ('{"query_id": null, "query": "x"}', "query_id: must be a non-empty string"),
        ('{"query_id": "q1", "query": ""}', "query: must be a non-empty string"),
        ('{"query_id": "q1", "query": "  \\t "}', "query: must be a non-empty string"),
        ('{"query_id": "q1", "query": 5}', "query: must be a non-empty string"),
        ('{"query_id": "q1", "query": ["x"]}', "query: must be a non-empty string"),
        (
            '{"query_id": "q1", "query": "x", "relevant": "d1"}',
            "relevant: must be an object {doc_id: grade} or a list of doc ids, got a string",
        ),
        (
            '{"query_id": "q1", "query": "x", "relevant": 3}',
            "relevant: must be an object {doc_id: grade} or a list of doc ids, got a number",
        ),
        (
            '{"query_id": "q1", "query": "x", "relevant": ["d1", 2]}',
            "relevant: a list must hold document ids (non-empty strings)",
        ),
        (
            '{"query_id": "q1", "query": "x", "relevant": [""]}',
            "relevant: a list must hold document ids (non-empty strings)",
        ),
        (
            '{"query_id": "q1", "query": "x", "relevant": {"": 1}}',
            "relevant: document ids must be non-empty",
        ),
        (
            '{"query_id": "q1", "query": "x", "relevant": {"d1": -1}}',
            "relevant.d1: grade must be a whole number from 0 to 100, got -1",
        ),
        (
            '{"query_id": "q1", "query": "x", "relevant": {"d1": 1, "d2": 1.5}}',
            "relevant.d2: grade must be a whole number from 0 to 100, got 1.5",
        ),
        (
            '{"query_id": "q1", "query": "x", "relevant": {"d1": 1.0}}',
            "relevant.d1: grade must be a whole number from 0 to 100, got 1.0",
        ),
        (
            '{"query_id": "q1", "query": "x", "relevant": {"d1": "2"}}',
            'relevant.d1: grade must be a whole number from 0 to 100, got "2"',
        ),
        (
            '{"query_id": "q1", "query": "x", "relevant": {"d1": true}}',
            "relevant.d1: grade must be a whole number from 0 to 100, got true",
        ),
        (
            '{"query_id": "q1", "query": "x", "relevant": {"d1": null}}',
            "relevant.d1: grade must be a whole number from 0 to 100, got null",
        ),
        (
            '{"query_id": "q1", "query": "x", "relevant": {"d1": 100000000000000000000}}',
            "relevant.d1: grade must be a whole number from 0 to 100, got 100000000000000000000",
        ),
        (
            '{"query_id": "q1", "query": "x", "relevance": {"d1": 1}}',
            f"relevance: unknown key (valid keys: {VALID_KEYS})",
        ),
        (
            '{"query_id": "q1", "query": "x", "zeta": 1, "alpha": 2}',
            f"alpha: unknown key (valid keys: {VALID_KEYS})",
        ),
        (
            '{"query_id": "q1", "query": "x", "is_rejection": "yes"}',
            "is_rejection: must be true or false",
        ),
        (
            '{"query_id": "q1", "query": "x", "is_rejection": 0}',
            "is_rejection: must be true or false",
        ),
        (
            '{"query_id": "q1", "query": "x", "is_rejection": true, "relevant": ["d1", "d2"]}',
            "is_rejection: is true but `relevant` lists 2 documents",
        ),
        (
            '{"query_id": "q1", "query": "x", "tags": "howto"}',
            "tags: must be a list of non-empty strings",
        ),
        (
            '{"query_id": "q1", "query": "x", "tags": ["howto", 3]}',
            "tags: must be a list of non-empty strings",
        ),
        (
            '{"query_id": "q1", "query": "x", "tags": [""]}',
            "tags: must be a list of non-empty strings",
        ),
        ('{"query_id": "q1", "query": "x", "tier": ""}', "tier: must be a non-empty string"),
        ('{"query_id": "q1", "query": "x", "tier": 1}', "tier: must be a non-empty string"),
        (
            '{"query_id": "q1", "query": "x", "expected_answer": 42}',
            "expected_answer: must be a string",
        ),
        ('{"query_id": "q1", "query": "x", "notes": ["a"]}', "notes: must be a string"),
        ('["q1", "x"]', "expected a JSON object, got an array"),
        ('{"query_id": "q1" "query": "x"}', "invalid JSON: Expecting ',' delimiter (column 19)"),
    ],
)
def test_invalid_line(tmp_path: Path, line: str, message: str) -> None:
    path = write_gold(tmp_path / "gold.jsonl", line)
    with pytest.raises(InputError) as info:
        load_gold([path])
    assert str(info.value) == f"{path}:1: {message}"
    assert info.value.exit_code == ExitCode.BAD_INPUT


def test_the_error_names_the_bad_line(tmp_path: Path) -> None:
    path = write_gold(
        tmp_path / "gold.jsonl",
        {"query_id": "q1", "query": "x"},
        "",
        {"query_id": "q2", "query": "y", "relevant": {"d1": -2}},
    )
    with pytest.raises(InputError) as info:
        load_gold([path])
    assert (
        str(info.value)
        == f"{path}:3: relevant.d1: grade must be a whole number from 0 to 100, got -2"
    )
    assert (info.value.path, info.value.line, info.value.key) == (str(path), 3, "relevant.d1")


def test_duplicate_query_id_across_files(tmp_path: Path) -> None:
    first = write_gold(
        tmp_path / "tier-a.jsonl",
        {"query_id": "q0", "query": "x"},
        "",
        {"query_id": "q1", "query": "y"},
    )
    second = write_gold(
        tmp_path / "tier-b.jsonl",
        {"query_id": "q2", "query": "z"},
        {"query_id": "q1", "query": "again"},
    )
    with pytest.raises(InputError) as info:
        load_gold([GoldSource(str(first), "A"), GoldSource(str(second), "B")])
    assert str(info.value) == (
        f"{second}:2: query_id: duplicate query_id 'q1' (first at {first}:3)"
    )


def test_duplicate_query_id_in_one_file(tmp_path: Path) -> None:
    path = write_gold(
        tmp_path / "gold.jsonl",
        {"query_id": "q1", "query": "x"},
        {"query_id": "q1", "query": "y"},
    )
    with pytest.raises(InputError) as info:
        load_gold([path])
    assert str(info.value) == f"{path}:2: query_id: duplicate query_id 'q1' (first at {path}:1)"


def test_missing_gold_file(tmp_path: Path) -> None:
    with pytest.raises(InputError) as info:
        load_gold([tmp_path / "absent.jsonl"])
    assert str(info.value) == f"{tmp_path / 'absent.jsonl'}: no such file"


def test_gold_set_views(tmp_path: Path) -> None:
    tier_a = write_gold(
        tmp_path / "a.jsonl",
        {"query_id": "q1", "query": "x", "relevant": {"d1": 2, "d2": 0}, "tags": ["zeta"]},
        {"query_id": "q2", "query": "y", "is_rejection": True, "tags": ["alpha", "zeta"]},
    )
    tier_b = write_gold(
        tmp_path / "b.jsonl",
        {"query_id": "q3", "query": "z", "relevant": ["d3", "d4"], "tags": ["mid"]},
    )
    gold = load_gold([GoldSource(str(tier_b), "B"), tier_a])
    assert isinstance(gold, GoldSet)
    assert [q.query_id for q in gold.queries] == ["q3", "q1", "q2"]
    # grade 0 is kept: a judged non-relevant document, as in trec_eval's qrels
    assert gold.qrels() == {"q3": {"d3": 1, "d4": 1}, "q1": {"d1": 2, "d2": 0}, "q2": {}}
    assert gold.tiers() == ("B", "A")
    assert gold.tags() == ("alpha", "mid", "zeta")
    assert gold.by_id()["q2"].path == str(tier_a)


def test_a_gold_file_without_queries_is_named(tmp_path: Path) -> None:
    full = tmp_path / "full.jsonl"
    full.write_text('{"query_id": "q1", "query": "a", "relevant": ["d1"]}\n')
    empty = tmp_path / "empty.jsonl"
    empty.write_text("\n\n")
    with pytest.raises(InputError) as info:
        load_gold([full, empty])
    assert str(info.value) == f"{empty}: the gold file has no queries"


SEED_LINE = {
    "query_id": "seed-001",
    "query": "How do I sort a list of dicts by a key?",
    "tier": "A",
    "tags": ["howto"],
    "relevant": ["builtins.sorted#0"],
    "category": "lookup",
    "difficulty": "easy",
    "expected_answer_gist": "sorted(rows, key=itemgetter('k'))",
}


def test_the_design_documents_seed_schema_is_read(tmp_path: Path) -> None:
    """`category` and `difficulty` slice the set as tags do; the gist is the reference
    answer when no `expected_answer` is given."""
    path = tmp_path / "gold.jsonl"
    lines = [SEED_LINE, {**SEED_LINE, "query_id": "seed-002", "difficulty": 3}]
    path.write_text("".join(json.dumps(line) + "\n" for line in lines))
    first, second = iter_gold_file(path)
    assert first.tags == ("howto", "category:lookup", "difficulty:easy")
    assert second.tags == ("howto", "category:lookup", "difficulty:3")
    assert first.expected_answer == "sorted(rows, key=itemgetter('k'))"
    both = {**SEED_LINE, "expected_answer": "Use sorted with a key."}
    path.write_text(json.dumps(both) + "\n")
    assert next(iter_gold_file(path)).expected_answer == "Use sorted with a key."


@pytest.mark.parametrize("value", ["", " ", True, 1.5, ["lookup"], {"a": 1}])
def test_a_bad_category_names_its_line_and_key(tmp_path: Path, value: object) -> None:
    path = tmp_path / "gold.jsonl"
    path.write_text(json.dumps(SEED_LINE) + "\n" + json.dumps({**SEED_LINE, "category": value}))
    with pytest.raises(InputError) as raised:
        list(iter_gold_file(path))
    assert str(raised.value).startswith(f"{path}:2: category: must be a non-empty string")
    assert raised.value.exit_code == ExitCode.BAD_INPUT


def test_documents_judged_not_relevant_are_kept_apart(tmp_path: Path) -> None:
    """Grade 0 is a label too: judged@k counts it, and whether the labels hold any
    says whether judged@k can show holes in them (`has_negatives`)."""
    query = load_one(
        tmp_path, {"query_id": "q", "query": "?", "relevant": {"good": 2, "checked-bad": 0}}
    )
    assert query.relevant == (("good", 2),)
    assert query.non_relevant == (("checked-bad", 0),)
    assert query.grades == {"good": 2, "checked-bad": 0}
    assert has_negatives([query])
    listed = load_one(tmp_path, {"query_id": "q", "query": "?", "relevant": ["good"]})
    assert listed.non_relevant == () and not has_negatives([listed])


@pytest.mark.parametrize(
    "record",
    [
        {"query_id": "q", "query": "t", "tags": ["b", "a", "b"], "relevant": {"d": 2, "e": 1}},
        {"query_id": "q", "query": "t", "tier": "A", "relevant": {}, "is_rejection": True},
        {"query_id": "q", "query": "t"},
        {"query_id": "q", "query": "t", "relevant": {"d": 0, "e": 1}},
        {"query_id": "q", "query": "t", "relevant": ["d", "e", "d"]},
        {"query_id": "q", "query": "t", "tags": ["a"], "category": "lookup"},
        {"query_id": "q", "query": "t", "tier": None, "relevant": {"d": 1}},
        {"query_id": "q", "query": "t", "relevant": {"d\x00e": 1, "f": 2}},
        {"query_id": "q", "query": "t", "tags": ["a", ""], "relevant": {"d": 1}},
        {"query_id": "q", "query": "t", "tags": ["a", 1], "relevant": {"d": 1}},
        {"query_id": "q", "query": "t", "tags": [["a"]], "relevant": {"d": 1}},
        {"query_id": "q", "query": "t", "tags": ["b", "a", "b"], "relevant": {"d": 1}},
        {"query_id": "q", "query": "t", "relevant": {"": 1}},
        {"query_id": "q", "query": "t", "relevant": {"d": 101}},
        {"query_id": "q", "query": "t", "relevant": {"d": True}},
        {"query_id": "q", "query": "t", "relevant": {"d": 1.0}},
        {"query_id": "q", "query": "t", "relevant": {f"d{i}": 1 + i % 100 for i in range(128)}},
        {"query_id": "q", "query": "t", "relevant": {f"d{i}": 1 + i % 100 for i in range(127)}},
    ],
)
@pytest.mark.parametrize(("tier", "matching"), [(None, "auto"), ("A", "id"), (None, "page")])
def test_the_usual_record_is_read_as_every_record_is(
    record: dict[str, object],
    tier: str | None,
    matching: str,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    from llm_eval import gold_io

    def read() -> object:
        try:
            return gold_io._parse_query(record, "gold.jsonl", 3, tier, matching)
        except InputError as exc:
            return str(exc)

    usual = read()
    monkeypatch.setattr(gold_io, "_usual_query", lambda *_: None)
    assert usual == read()


def test_compact_labels_read_as_their_pairs() -> None:
    pairs = (("d1", 2), ("d2", 1), ("é-3", 100))
    held = compact_labels(pairs)
    assert isinstance(held, Labels)
    assert held == pairs and pairs == held and hash(held) == hash(pairs)
    assert tuple(held) == pairs and len(held) == 3 and bool(held)
    assert held[1] == ("d2", 1) and held[-1] == ("é-3", 100) and held[:2] == pairs[:2]
    assert held + (("x", 0),) == (*pairs, ("x", 0))  # noqa: RUF005 (its `+` is tested)
    assert (("x", 0),) + held == (("x", 0), *pairs)  # noqa: RUF005
    assert dict(held) == dict(pairs) and sorted(held) == sorted(pairs)
    assert held.ids() == ["d1", "d2", "é-3"] and held.row() == dict(pairs)
    assert pickle.loads(pickle.dumps(held)) == held and repr(held) == repr(pairs)
    assert held != compact_labels(pairs[:2]) and held == compact_labels(pairs)


@pytest.mark.parametrize(
    "pairs",
    [
        (),
        (("a\x00b", 1),),
        (("d", 0),),
        (("d", 101),),
        (("d", True),),
        (("", 1),),
        tuple((f"d{i}", 1) for i in range(128)),  # more than one character counts
    ],
)
def test_labels_that_cannot_be_held_compact_stay_a_tuple(
    pairs: tuple[tuple[str, int], ...],
) -> None:
    held = compact_labels(pairs)
    assert type(held) is tuple and held == pairs


def test_a_gold_query_reads_the_same_with_compact_labels_or_not(tmp_path: Path) -> None:
    """An id holding the character compact labels join with keeps its query's labels a
    tuple; both read, compare and fingerprint as the labels they are."""
    path = tmp_path / "gold.jsonl"
    records = [
        {"query_id": "a", "query": "x", "relevant": {"d\u00001": 2, "d2": 1}},
        {"query_id": "b", "query": "x", "relevant": {"d1": 2, "d2": 1}},
    ]
    path.write_text("\n".join(map(json.dumps, records)) + "\n")
    first, second = load_gold([path]).queries
    assert type(first.relevant) is tuple and isinstance(second.relevant, Labels)
    assert first.relevant == (("d\x001", 2), ("d2", 1))
    assert second.relevant == (("d1", 2), ("d2", 1)) and second.grades == {"d1": 2, "d2": 1}
