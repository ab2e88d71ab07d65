"""A record made by setting its slots is the record its class makes."""

from __future__ import annotations

import dataclasses

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from llm_eval.gold import GoldQuery, GoldReference
from llm_eval.runs import IdResults, QueryResults, RankedResult
from llm_eval.slotted import positional


def fields_of(record: object) -> list[tuple[str, object]]:
    return [(f.name, getattr(record, f.name)) for f in dataclasses.fields(record)]  # type: ignore[arg-type]


@settings(max_examples=200, deadline=None)
@given(
    values=st.lists(st.none() | st.integers() | st.text(max_size=3) | st.booleans(), max_size=17),
)
def test_a_gold_query_made_by_position_is_the_dataclasses(values: list[object]) -> None:
    """Any prefix of the fields given (the rest their defaults), any values."""
    fields = dataclasses.fields(GoldQuery)
    required = sum(f.default is dataclasses.MISSING for f in fields)
    given_values = values + [None] * max(0, required - len(values))
    made = positional(GoldQuery)(*given_values)
    expected = GoldQuery(*given_values)  # type: ignore[arg-type]
    assert type(made) is GoldQuery and fields_of(made) == fields_of(expected)
    assert made == expected and hash(made) == hash(expected)
    with pytest.raises(dataclasses.FrozenInstanceError):
        made.query_id = "changed"  # type: ignore[misc]


def test_answers_and_references_made_by_position_are_the_dataclasses() -> None:
    make = positional(QueryResults)
    for args in [
        ("q", IdResults(["a", "b"]), 20.5),
        ("q", (RankedResult("d"),)),
        ("q", (), None, "x"),
    ]:
        assert fields_of(make(*args)) == fields_of(QueryResults(*args))  # type: ignore[arg-type]
    assert positional(GoldReference)("M.pdf", 3) == GoldReference("M.pdf", 3)
    with pytest.raises(TypeError):
        make()  # a field without a default is still required


def test_a_class_whose_init_does_more_is_refused() -> None:
    @dataclasses.dataclass(frozen=True, slots=True)
    class Checked:
        value: int

        def __post_init__(self) -> None:
            assert self.value >= 0

    @dataclasses.dataclass(frozen=True, slots=True)
    class Listed:
        items: list[int] = dataclasses.field(default_factory=list)

    for cls in (Checked, Listed):
        with pytest.raises(TypeError, match="does more than set its fields"):
            positional(cls)
