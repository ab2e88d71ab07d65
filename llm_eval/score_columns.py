"""Per-query scores held as columns: `{query_id: {metric: value}}` without a dict per query.

A gate over a million queries keeps two such tables (the run's and the baseline's) of
ten metrics each; as dicts of dicts they take about 700 bytes a query, as columns
about 100 (a float and a flag per metric, and the query's place). `ScoreColumns` is a
read-only `Mapping` of the same shape, so every reader of per-query scores takes it as
it took the dicts; a query's row is a small view onto the columns, made when asked for.
"""

from __future__ import annotations

import itertools
import weakref
from collections.abc import Callable, ItemsView, Iterable, Iterator, Mapping, Sequence
from typing import Any

import numpy as np
import numpy.typing as npt

FloatArray = npt.NDArray[np.float64]
BoolArray = npt.NDArray[np.bool_]
IntArray = npt.NDArray[np.int64]

_ROWS_READ = 4096
"""Queries whose rows `row_items` reads from the columns at once."""


class Places(dict[str, int]):
    """`{query_id: place}` of a table's queries, and the queries in order: shared by the
    tables of the same queries (`places_of`)."""

    __slots__ = ("__weakref__", "query_ids")

    def __init__(self, query_ids: tuple[str, ...], numbers: Iterable[int] = ()) -> None:
        """`numbers`: the int objects 0, 1, 2... of other places, as many or more, to
        hold rather than a new one each (28 bytes a place past 256)."""
        count = len(query_ids)
        held = list(itertools.islice(numbers, count))
        places = held if len(held) == count else range(count)
        super().__init__(zip(query_ids, places, strict=True))
        self.query_ids = query_ids


_RECENT_PLACES = 4
"""How many dicts of places `places_of` remembers (while tables still hold them)."""
_recent_places: list[weakref.ReferenceType[Places]] = []


def places_of(query_ids: Sequence[str]) -> Places:
    """The places of these queries: ones made before for the same queries in the same
    order, while some table still holds them (a gate's run and baseline tables, and
    their latency columns, list the same million queries: one dict of places, 100 MB,
    serves them all), else new ones. The last few made are remembered, so that tables
    of two sets of queries made in turn (the scored ones and all of them) each find
    theirs."""
    ids = tuple(query_ids)
    alive = [known for ref in _recent_places if (known := ref()) is not None]
    for known in alive:
        if len(known.query_ids) == len(ids) and known.query_ids == ids:
            return known
    # Places of distinct queries hold 0, 1, 2... in order: their ints serve these too.
    larger = [k for k in alive if len(k) >= len(ids) and len(k) == len(k.query_ids)]
    made = Places(ids, larger[0].values() if larger else ())
    kept = alive[-(_RECENT_PLACES - 1) :]
    _recent_places[:] = [*map(weakref.ref, kept), weakref.ref(made)]
    return made


class ScoreColumns(Mapping[str, Mapping[str, float]]):
    """`{query_id: {metric: value}}` as one column of values per metric, and a flag
    per metric and query saying whether the query has a value for it. A row's metrics
    come in the table's order, which keeps every row's own order (`from_rows`)."""

    __slots__ = ("_metrics", "_position", "_present", "_query_ids", "_values")

    def __init__(
        self,
        query_ids: Sequence[str],
        metrics: Sequence[str],
        values: FloatArray,
        present: BoolArray,
    ) -> None:
        """`values` and `present` have a row per metric and a column per query."""
        self._position = places_of(query_ids)
        self._query_ids = self._position.query_ids
        self._metrics = {metric: i for i, metric in enumerate(metrics)}
        self._values = values
        self._present = present

    @classmethod
    def from_rows(
        cls, rows: Mapping[str, Mapping[str, float]]
    ) -> Mapping[str, Mapping[str, float]]:
        """The rows as columns; the rows themselves when their metrics come in orders
        that no one order of the table keeps (a row would then change its order)."""
        if isinstance(rows, ScoreColumns):
            return rows
        table = cls.from_groups(list(rows), _grouped_rows(rows))
        return rows if table is None else table

    @classmethod
    def from_groups(
        cls, query_ids: Sequence[str], groups: Mapping[tuple[str, ...], tuple[Any, Any]]
    ) -> ScoreColumns | None:
        """The table of rows given grouped by their metrics (in each row's order): per
        group its rows' places among `query_ids` and their values, a row of values per
        place; None when no one order of the table keeps every group's order."""
        order = _common_order(set(groups))
        if order is None:
            return None
        metrics = {metric: i for i, metric in enumerate(order)}
        values = np.zeros((len(metrics), len(query_ids)))
        present = np.zeros((len(metrics), len(query_ids)), dtype=bool)
        for keys, (places, values_of) in groups.items():
            where = np.asarray(places, dtype=np.int64)
            at = np.asarray([metrics[m] for m in keys], dtype=np.int64)
            rows = np.asarray(values_of, dtype=np.float64).reshape(where.size, len(keys))
            values[at[:, None], where] = rows.T
            present[at[:, None], where] = True
        return cls(query_ids, order, values, present)

    def __getitem__(self, query_id: str) -> Mapping[str, float]:
        return _Row(self, self._position[query_id])

    def __contains__(self, query_id: object) -> bool:
        return query_id in self._position

    def __iter__(self) -> Iterator[str]:
        return iter(self._query_ids)

    def __len__(self) -> int:
        return len(self._query_ids)

    def row_items(self) -> Iterator[tuple[str, list[tuple[str, float]]]]:
        """Each query and its row's `(metric, value)` items, as `items()` of every row
        gives them, read from the columns a block of queries at a time."""
        metrics = list(self._metrics)
        for start in range(0, len(self._query_ids), _ROWS_READ):
            stop = start + _ROWS_READ
            values = self._values[:, start:stop].T.tolist()
            present = self._present[:, start:stop].T.tolist()
            for query_id, row, flags in zip(
                self._query_ids[start:stop], values, present, strict=True
            ):
                yield query_id, list(itertools.compress(zip(metrics, row, strict=True), flags))

    def column(self, metric: str, query_ids: Sequence[str]) -> tuple[BoolArray, FloatArray]:
        """Per listed query: whether it has a value for `metric`, and the value (0 when
        not): what reading `row[metric]` of each row would give, in one pass."""
        return self.column_at(metric, self.places(query_ids))

    def places(self, query_ids: Sequence[str]) -> IntArray:
        """Each listed query's place in the columns, -1 for a query without a row: what
        `column_at` reads, found once for many metrics."""
        places = map(self._position.get, query_ids, itertools.repeat(-1))
        return np.fromiter(places, np.int64, len(query_ids))

    def column_at(self, metric: str, at: IntArray) -> tuple[BoolArray, FloatArray]:
        """`column` of the queries at the `places` given."""
        row = self._metrics.get(metric)
        if row is None:
            return np.zeros(len(at), dtype=bool), np.zeros(len(at))
        known = at >= 0
        present = np.zeros(len(at), dtype=bool)
        present[known] = self._present[row, at[known]]
        values = np.zeros(len(at))
        values[present] = self._values[row, at[present]]
        return present, values


class Column(Mapping[str, Any]):
    """`{query_id: value}` as one array over the queries' shared places (`places_of`):
    a baseline's fingerprints and ranks of a million queries, a dict and an object per
    query otherwise (about 100 bytes), take 8 bytes a query here. `read` makes a
    value of an array item (a fingerprint's hex digits of its integer)."""

    __slots__ = ("_position", "_read", "array")

    def __init__(
        self, query_ids: Sequence[str], values: npt.NDArray[Any], read: Callable[[Any], Any]
    ) -> None:
        self._position = places_of(query_ids)
        self.array = values
        """Per query, in the order of `places`."""
        self._read = read

    @property
    def places(self) -> Places:
        """The queries' places (the same object for columns of the same queries)."""
        return self._position

    def read(self, item: Any) -> Any:
        """The value an array item stands for."""
        return self._read(item)

    def __getitem__(self, query_id: str) -> Any:
        return self._read(self.array.item(self._position[query_id]))

    def get(self, query_id: str, default: Any = None) -> Any:
        place = self._position.get(query_id)
        return default if place is None else self._read(self.array.item(place))

    def __contains__(self, query_id: object) -> bool:
        return query_id in self._position

    def __iter__(self) -> Iterator[str]:
        return iter(self._position.query_ids)

    def __len__(self) -> int:
        return len(self._position)

    def items(self) -> ItemsView[str, Any]:
        return _ColumnItems(self)


class _ColumnItems(ItemsView[str, Any]):
    """A column's items in order, read from the array a block at a time."""

    def __init__(self, column: Column) -> None:
        super().__init__(column)
        self._column = column

    def __iter__(self) -> Iterator[tuple[str, Any]]:
        column = self._column
        ids = column.places.query_ids
        for start in range(0, len(ids), _ROWS_READ):
            values = column.array[start : start + _ROWS_READ].tolist()
            yield from zip(ids[start : start + _ROWS_READ], map(column._read, values), strict=True)


class FoundPlaces:
    """The places of lists of queries in tables, each found once: a gate decision reads
    the same scopes (its own and its tag slices) for every gate that shares them, from
    the run's table and the baseline's, which list the same queries (one dict of
    places) when the gold set has not changed. At a million queries each finding is a
    million lookups in a dict of a million, most of them missing the processor's cache.
    """

    __slots__ = ("_found",)

    def __init__(self) -> None:
        self._found: dict[tuple[int, tuple[str, ...]], tuple[Places, IntArray]] = {}
        """By the places' identity and the queries: the places (held, so that their
        identity stays theirs) and the queries' places among them."""

    def column(
        self, per_query: Mapping[str, Mapping[str, float]], metric: str, query_ids: Sequence[str]
    ) -> tuple[BoolArray, FloatArray]:
        """`column_of(per_query, metric, query_ids)`."""
        if not isinstance(per_query, ScoreColumns):
            return column_of(per_query, metric, query_ids)
        places = per_query._position
        key = (id(places), tuple(query_ids))
        found = self._found.get(key)
        if found is None:
            found = self._found[key] = (places, per_query.places(query_ids))
        return per_query.column_at(metric, found[1])


def hex_fingerprint(value: int) -> str:
    """A 16-hex-digit fingerprint of its integer (`Column`'s `read` for fingerprints)."""
    return f"{value:016x}"


def column_of(
    per_query: Mapping[str, Mapping[str, float]], metric: str, query_ids: Sequence[str]
) -> tuple[BoolArray, FloatArray]:
    """`ScoreColumns.column` of any per-query mapping: from the columns when it is
    columns, else from each listed query's row."""
    if isinstance(per_query, ScoreColumns):
        return per_query.column(metric, query_ids)
    present = np.zeros(len(query_ids), dtype=bool)
    values = np.zeros(len(query_ids))
    for i, query_id in enumerate(query_ids):
        row = per_query.get(query_id)
        if row is not None and metric in row:
            present[i], values[i] = True, row[metric]
    return present, values


def _common_order(orders: set[tuple[str, ...]]) -> list[str] | None:
    """One order of every metric that each of the rows' `orders` follows; None if none does."""
    after: dict[str, set[str]] = {}
    for keys in orders:
        for i, metric in enumerate(keys):
            after.setdefault(metric, set()).update(keys[i + 1 :])
    # Kahn's algorithm, taking metrics in the order they first appear.
    first = list(dict.fromkeys(m for keys in sorted(orders, key=len, reverse=True) for m in keys))
    before = {m: sum(m in later for later in after.values()) for m in first}
    order: list[str] = []
    ready = [m for m in first if before[m] == 0]
    while ready:
        metric = ready.pop(0)
        order.append(metric)
        for later in sorted(after[metric], key=first.index):
            before[later] -= 1
            if before[later] == 0:
                ready.append(later)
    return order if len(order) == len(first) else None


def _grouped_rows(
    rows: Mapping[str, Mapping[str, float]],
) -> dict[tuple[str, ...], tuple[list[int], list[list[float]]]]:
    """Rows grouped by their metrics: per group its queries' places and their values."""
    groups: dict[tuple[str, ...], tuple[list[int], list[list[float]]]] = {}
    for place, row in enumerate(rows.values()):
        columns, values = groups.setdefault(tuple(row), ([], []))
        columns.append(place)
        values.append(list(row.values()))
    return groups


class _Row(Mapping[str, float]):
    """One query's scores: a view onto the table's columns."""

    __slots__ = ("_at", "_table")

    def __init__(self, table: ScoreColumns, at: int) -> None:
        self._table = table
        self._at = at

    def __getitem__(self, metric: str) -> float:
        table = self._table
        row = table._metrics[metric]
        if not table._present[row, self._at]:
            raise KeyError(metric)
        return float(table._values[row, self._at])

    def __contains__(self, metric: object) -> bool:
        row = self._table._metrics.get(metric)  # type: ignore[call-overload]
        return row is not None and bool(self._table._present[row, self._at])

    def __iter__(self) -> Iterator[str]:
        present = self._table._present[:, self._at]
        return (m for m, row in self._table._metrics.items() if present[row])

    def __len__(self) -> int:
        return int(self._table._present[:, self._at].sum())
