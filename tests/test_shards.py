"""Shards: which shard holds a query, `I/N` parsed, and the checks on a run's parts."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from llm_eval.errors import InputError
from llm_eval.runs_io import load_run
from llm_eval.shards import Part, PartHeader, Shard, parse_shard, part_problem, shard_number
from llm_eval.shards_io import header_line, join_parts

PRINTS = {"gold": "g1", "corpus": "c1", "retriever": "r1"}
IDS = [f"q{i:03d}" for i in range(60)]


def test_every_query_is_in_exactly_one_shard_whatever_the_order() -> None:
    for count in (1, 2, 3, 7):
        shards = [Shard(i, count) for i in range(1, count + 1)]
        forward = [[q for q in IDS if s.holds(q)] for s in shards]
        backward = [[q for q in reversed(IDS) if s.holds(q)] for s in shards]
        assert sorted(q for part in forward for q in part) == IDS
        assert [sorted(p) for p in forward] == [sorted(p) for p in backward]


def test_a_query_keeps_its_shard_across_runs() -> None:
    # Pinned: a shard's queries must not change between versions, or a matrix job of an
    # older release would hold other queries than its neighbours.
    assert [shard_number(q, 3) for q in ("a-001", "a-002", "b-001", "py-001")] == [1, 3, 2, 3]


def test_three_shards_of_the_demo_ids_are_each_about_a_third() -> None:
    ids = [f"a-{i:03d}" for i in range(1, 343)]
    sizes = [sum(Shard(i, 3).holds(q) for q in ids) for i in (1, 2, 3)]
    assert sum(sizes) == 342 and min(sizes) > 90


@pytest.mark.parametrize(
    ("text", "expected"),
    [("1/1", Shard(1, 1)), ("2/3", Shard(2, 3)), (" 3/3 ", Shard(3, 3)), ("10/12", Shard(10, 12))],
)
def test_shards_parse(text: str, expected: Shard) -> None:
    assert parse_shard(text) == expected
    assert str(expected) == text.strip()


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("0/3", "shard 0/3: I must be from 1 to N"),
        ("4/3", "shard 4/3: I must be from 1 to N"),
        ("3", "expected I/N (shard I of N, e.g. 2/3), got '3'"),
        ("1/3/", "expected I/N (shard I of N, e.g. 2/3), got '1/3/'"),
        ("-1/3", "expected I/N (shard I of N, e.g. 2/3), got '-1/3'"),
    ],
)
def test_a_bad_shard_is_refused(text: str, message: str) -> None:
    with pytest.raises(ValueError) as caught:
        parse_shard(text)
    assert str(caught.value) == message


def part(path: str, shard: str, ids: list[str] | None = None, **prints: str) -> Part:
    """The part file `path` of `shard`, holding that shard's `IDS` unless told."""
    parsed = parse_shard(shard)
    held = [q for q in IDS if parsed.holds(q)] if ids is None else ids
    return Part(path, PartHeader(parsed, {**PRINTS, **prints}), tuple(held))


WHOLE = [part("p1", "1/3"), part("p2", "2/3"), part("p3", "3/3")]
STRAY = next(q for q in IDS if shard_number(q, 3) == 2)
LACKED = [q for q in IDS if shard_number(q, 3) == 3]


@pytest.mark.parametrize(
    ("parts", "expected", "problem"),
    [
        (WHOLE, PRINTS, None),
        (WHOLE[::-1], PRINTS, None),
        ([part("p1", "1/1")], PRINTS, None),
        (WHOLE, None, None),
        (
            WHOLE[:2],
            PRINTS,
            (None, "shard 3/3 of the run is missing; given: p1 (1/3), p2 (2/3)"),
        ),
        (WHOLE[:1], PRINTS, (None, "shards 2/3 and 3/3 of the run are missing; given: p1 (1/3)")),
        ([*WHOLE, part("p2b", "2/3")], PRINTS, ("p2b", "is shard 2/3 again (also p2)")),
        (
            [*WHOLE[:2], part("p3", "3/4")],
            PRINTS,
            ("p3", "is shard 3/4, but p1 is 1/3: parts of another split"),
        ),
        (
            [*WHOLE[:2], part("p3", "3/3", gold="g2")],
            PRINTS,
            (
                "p3",
                "is a part of a run with another gold set (gold fingerprint g2, this config's g1)",
            ),
        ),
        (
            [*WHOLE[:2], part("p3", "3/3", retriever="r2")],
            None,
            (
                "p3",
                "is a part of a run with another retriever configuration (retriever "
                "fingerprint r2, p1's r1)",
            ),
        ),
        (
            [*WHOLE, part("p4", "1/3", corpus="c2")],
            PRINTS,
            (
                "p4",
                "is a part of a run with another corpus (corpus fingerprint c2, this config's c1)",
            ),
        ),
        (
            [WHOLE[0], WHOLE[1], part("p3", "3/3", [*LACKED, STRAY])],
            PRINTS,
            ("p3", f"holds query {STRAY!r}, which is shard 2/3's, not 3/3's"),
        ),
        (
            [WHOLE[0], WHOLE[1], part("p3", "3/3", LACKED[1:])],
            PRINTS,
            (
                "p3",
                f"lacks 1 of shard 3/3's {len(LACKED)} gold queries (first {LACKED[0]!r}): "
                "a part cut short?",
            ),
        ),
    ],
)
def test_the_first_problem_of_the_parts_is_named(
    parts: list[Part], expected: dict[str, str] | None, problem: tuple[str | None, str] | None
) -> None:
    assert part_problem(parts, expected, IDS) == problem


def test_without_gold_ids_a_short_part_is_not_a_problem() -> None:
    assert part_problem([part("p1", "1/1", IDS[:3])], PRINTS, None) is None


def write_part(path: Path, shard: str, ids: list[str]) -> Path:
    """A part file of `shard` whose queries each return doc `d-<id>`."""
    header = header_line(PartHeader(parse_shard(shard), PRINTS, from_cache=2))
    lines = [json.dumps({"query_id": q, "results": [f"d-{q}"]}) + "\n" for q in ids]
    path.write_text(header + "".join(lines), encoding="utf-8")
    return path


def test_parts_join_into_the_run_in_gold_order(tmp_path: Path) -> None:
    shards = [Shard(i, 2) for i in (1, 2)]
    paths = [
        write_part(tmp_path / f"p{s.index}.jsonl", str(s), [q for q in IDS if s.holds(q)])
        for s in shards
    ]
    joined = join_parts(paths[::-1], PRINTS, IDS)
    assert list(joined.run.queries) == IDS
    assert joined.run.queries["q007"].doc_ids == ("d-q007",)
    assert joined.from_cache == 4


def test_a_part_alone_is_not_read_as_a_whole_run(tmp_path: Path) -> None:
    path = write_part(tmp_path / "p1.jsonl", "1/2", ["q001"])
    with pytest.raises(InputError) as caught:
        load_run(path)
    assert str(caught.value) == (
        f"{path}:1: is shard 1/2 of a run in parts, not a whole run: give every part to "
        "gate, baseline refresh or evaluate (--run once each, or a glob)"
    )


def test_a_whole_run_is_not_joined_with_parts(tmp_path: Path) -> None:
    whole = tmp_path / "run.jsonl"
    whole.write_text(json.dumps({"query_id": "q001", "results": []}) + "\n", encoding="utf-8")
    part_path = write_part(tmp_path / "p1.jsonl", "1/2", ["q001"])
    with pytest.raises(InputError) as caught:
        join_parts([part_path, whole], PRINTS, None)
    assert str(caught.value) == (
        f"{whole}: has no part header (`retrieve --shard I/N` writes one): several run "
        "files are read as the parts of one sharded run"
    )


@pytest.mark.parametrize(
    ("header", "message"),
    [
        ({"shard": "5/3", **{"fingerprints": PRINTS}}, "shard: shard 5/3: I must be from 1 to N"),
        (
            {"shard": 2, "fingerprints": PRINTS},
            "shard: expected I/N (shard I of N, e.g. 2/3), got '2'",
        ),
        ({"shard": "1/1"}, "fingerprints: missing or not an object"),
        (
            {"shard": "1/1", "fingerprints": {"gold": "g", "corpus": None}},
            "fingerprints.retriever: missing or not a string (or null)",
        ),
        (
            {"shard": "1/1", "fingerprints": PRINTS, "from_cache": -1},
            "from_cache: must be a whole number of queries, got -1",
        ),
        (
            {"shard": "1/1", "fingerprints": PRINTS, "shards": 3},
            "shards: unknown key in a part's header",
        ),
    ],
)
def test_a_bad_header_is_named_with_its_key(
    tmp_path: Path, header: dict[str, object], message: str
) -> None:
    path = tmp_path / "p.jsonl"
    path.write_text(json.dumps(header) + "\n", encoding="utf-8")
    with pytest.raises(InputError) as caught:
        join_parts([path], None, None)
    assert str(caught.value) == f"{path}:1: {message}"
