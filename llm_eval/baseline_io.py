"""The baseline file (`gold/baseline.json`): read and checked against its schema, or
written atomically (temp file + rename), and only when something the gate reads moved
(`llm_eval.commands.baseline.changes`): the per-query latencies are those of the
refresh that last wrote the file, so that an unchanged retriever, whose latency
differs on every run, leaves the file as it is.
"""

from __future__ import annotations

import itertools
import math
import re
from array import array
from collections.abc import Iterable, Mapping
from datetime import datetime
from json.decoder import scanstring  # type: ignore[attr-defined]
from pathlib import Path
from typing import Any, TypeVar

import numpy as np

from llm_eval.baseline import SCHEMA_VERSION, Baseline
from llm_eval.errors import InputError
from llm_eval.json_indented import iter_indented
from llm_eval.schema import (
    Check,
    Fail,
    boolean,
    list_of,
    map_of,
    number,
    optional,
    record,
    shown,
    text,
    whole,
)
from llm_eval.score_columns import Column, ScoreColumns, hex_fingerprint
from llm_eval.service_metrics import ServiceColumns, ServiceRecord
from llm_eval.textio import (
    MAX_JSON_DEPTH,
    holds_surrogate_escape,
    json_document,
    json_type,
    nesting_depth,
    read_text,
    repeats_no_key,
    require_file,
    strict_decoder,
    sweep_stale_temporaries,
    unhooked_scan,
    write_atomic,
)


def save_baseline(path: str | Path, baseline: Baseline) -> None:
    """Write the baseline atomically: `json.dumps(baseline.to_json(), indent=1)` and a
    line end, written in pieces as they are made."""
    write_atomic(path, itertools.chain(iter_indented(baseline.json_fields()), ["\n"]))


def load_baseline(path: str | Path, query_ids: Iterable[str] = ()) -> Baseline | None:
    """Read a baseline; None when the file does not exist; InputError when it is corrupt.

    The whole document is checked against its schema here, so that nothing downstream
    (the statistics, the report) meets a NaN, a string rank or a missing `n`. The
    baseline's queries among `query_ids` (the gold set's) keep those strings rather than
    a copy each: at a million queries, 50 MB.
    """
    file = Path(path)
    if not file.exists() and not file.is_symlink():
        return None
    sweep_stale_temporaries(file.parent)
    require_file(file)
    try:
        content = read_text(file)
        read = _read_by_rows(content, str(path), {query_id: query_id for query_id in query_ids})
        if read is not None:
            return read
        data = json_document(content, file)
    except InputError as exc:
        raise InputError(
            f"corrupt baseline: {exc.reason}", path=exc.path, line=exc.line, key=exc.key
        ) from None
    return parse_baseline(data, str(path))


def parse_baseline(data: Any, path: str) -> Baseline:
    """A parsed baseline document checked against its schema (InputError naming `path`
    and the key when it does not fit)."""

    def fail(key: str, reason: str) -> InputError:
        return InputError(f"corrupt baseline: {reason}", path=path, key=key)

    if not isinstance(data, dict):
        raise InputError(
            f"corrupt baseline: expected a JSON object, got {json_type(data)}", path=path
        )
    version = data.get("schema_version")
    if isinstance(version, int) and version != SCHEMA_VERSION:
        raise fail(
            "schema_version",
            f"version {version} is not supported (expected {SCHEMA_VERSION}); "
            "run `llm-eval baseline refresh`",
        )
    _check_sections(data, fail)
    service = {
        qid: ServiceRecord(row.get("latency_ms"), row.get("error", False))
        for qid, row in data.get("service", {}).items()
    }
    return _built(data, path, ScoreColumns.from_rows(data["per_query"]), service)


def _check_sections(data: dict[str, Any], fail: Fail, read: frozenset[str] = frozenset()) -> None:
    """Each section of the document against its schema, but those `read` checked."""
    for key, check in _SCHEMA.items():
        if key not in data:
            if key in _OPTIONAL:
                continue
            raise fail(key, "missing required key")
        if key not in read:
            check(data[key], key, fail)


def _built(
    data: dict[str, Any],
    path: str,
    per_query: Mapping[str, Mapping[str, float]],
    service: Mapping[str, ServiceRecord],
) -> Baseline:
    """The baseline of a checked document."""
    return Baseline(
        created_at=data["created_at"],
        git_commit=data.get("git_commit"),
        tool_version=data["tool_version"],
        fingerprints=data["fingerprints"],
        query_fingerprints=data["query_fingerprints"],
        relevance_level=data["relevance_level"],
        gating_k=data["gating_k"],
        metrics=tuple(data["metrics"]),
        per_query=per_query,
        first_relevant_rank=data["first_relevant_rank"],
        aggregates=data["aggregates"],
        service=service,
        judge_repeats=data.get("judge_repeats"),
        builds=tuple(data.get("builds", ())),
        source=path,
    )


def _timestamp(value: Any, key: str, fail: Fail) -> None:
    text(value, key, fail)
    try:
        datetime.fromisoformat(value)
    except ValueError:
        raise fail(key, f"expected an ISO 8601 time, got {shown(value)}") from None


def _mean(value: Any, key: str, fail: Fail) -> None:
    """A slice's mean: NaN is what `baseline refresh` writes for a metric that scores none
    of the slice's queries (a slice of rejection queries has no recall), so it passes."""
    if not (isinstance(value, float) and math.isnan(value)):
        optional(number)(value, key, fail)


def _aggregate_row(value: Any, key: str, fail: Fail) -> None:
    """`{"n": n, metric: mean}`."""
    record({"n": whole(0)}, frozenset({"n"}))(value, key, fail)
    map_of(_mean)({m: v for m, v in value.items() if m != "n"}, key, fail)


_SERVICE_ROW = record({"latency_ms": optional(number), "error": boolean})

_SCHEMA: dict[str, Check] = {
    "schema_version": whole(1),
    "created_at": _timestamp,
    "git_commit": optional(text),
    "tool_version": text,
    "fingerprints": map_of(optional(text)),
    "relevance_level": whole(1),
    "gating_k": whole(1),
    "metrics": list_of(text),
    "aggregates": map_of(_aggregate_row),
    "query_fingerprints": map_of(text),
    "first_relevant_rank": map_of(whole(0)),
    "per_query": map_of(map_of(number)),
    "service": map_of(_SERVICE_ROW),
    "judge_repeats": whole(1),
    "builds": list_of(map_of(map_of(number))),
}
"""Every key of the document and how its value is checked."""

_OPTIONAL = frozenset({"git_commit", "service", "judge_repeats", "builds"})


# Reading a document a query's row at a time. Parsed whole, a baseline of a million
# queries is a tree of millions of objects (a dict per query and section, each with its
# keys) beside its text: about 1.7 KB a query at the peak, for tables that keep a
# quarter of it. Here the top-level object is read key by key, `per_query` and
# `service` a row at a time straight into columns and records, and the other sections
# whole. A document this reading does not expect (a value of another type, a repeated
# key, invalid JSON, deep nesting, a service row with other keys) is read whole
# instead, by `json_document` and `parse_baseline`, which name its fault as they
# always have.

_WHITESPACE = re.compile(r"[ \t\n\r]*")
_CLOSE = re.compile(r"[ \t\n\r]*}")
_NEXT_PLAIN_KEY = re.compile(r'[ \t\n\r]*,[ \t\n\r]*"([^"\\\x00-\x1f]*)"[ \t\n\r]*:[ \t\n\r]*')
"""After a row: the comma and the next key, when the key holds no escape or control
character (`scanstring` reads any other)."""
_NUMBERS = frozenset({float, int})
_SERVICE_KEYS = frozenset({"latency_ms", "error"})


class _Unexpected(Exception):
    """What the reading by rows leaves to the whole reading."""


def _unexpected(key: str, reason: str) -> InputError:
    raise _Unexpected


def _read_by_rows(content: str, path: str, shared: dict[str, str] | None = None) -> Baseline | None:
    """The baseline, read by rows; None when the document is to be read whole."""
    if content.startswith("\ufeff") or holds_surrogate_escape(content):
        return None
    try:
        data, scores, service = _sections(content, {} if shared is None else shared)
        version = data.get("schema_version")
        if isinstance(version, int) and version != SCHEMA_VERSION:
            return None
        _check_sections(data, _unexpected, _READ_BY_ROWS)
        per_query = scores.table()
    except Exception:  # any fault: the whole reading says what it is, as it always has
        return None
    return None if per_query is None else _built(data, path, per_query, service)


def _sections(
    content: str, shared: dict[str, str]
) -> tuple[dict[str, Any], _ScoreRows, Mapping[str, ServiceRecord]]:
    """The top-level object's sections; `per_query` and `service` read by rows, their
    query ids those of `shared` when it holds them."""
    scan = strict_decoder().scan_once  # type: ignore[attr-defined]
    unshared = strict_decoder(shared_floats=False).scan_once  # type: ignore[attr-defined]
    # One string per query id, as a whole parse keeps (`shared` is the caller's: a
    # query twice is still told by the rows, which list each id they take).
    data: dict[str, Any] = {}
    scores, service = _ScoreRows(), _ServiceRows()
    at = _after(content, _skip(content, 0), "{")
    while True:
        key, at = _key(content, _skip(content, at))
        if key in data:
            raise _Unexpected
        # Rows go to columns and records: their floats need not be shared.
        if key == "per_query":
            at, scores = _read_section(content, at, shared, _ScoreRows, unshared)
            data[key] = None
        elif key == "service":
            at, service = _read_section(content, at, shared, _ServiceRows, unshared)
            data[key] = None
        elif key in _SCALAR_ROWS:
            at, scalars = _read_section(content, at, shared, _SCALAR_ROWS[key], unshared)
            data[key] = scalars.values
        else:
            data[key], end = scan(content, at)
            if nesting_depth(f"[{content[at:end]}]") > MAX_JSON_DEPTH:  # within the top
                raise _Unexpected
            at = end
        at = _skip(content, at)
        if content[at] == "}":
            break
        at = _after(content, at, ",")
    if _skip(content, at + 1) != len(content):
        raise _Unexpected
    return data, scores, service.values


class _Rows:
    """Takes a section's rows as they are read."""

    def take(self, query_id: str, row: Any) -> None:
        raise NotImplementedError

    def take_piece(self, query_ids: list[str], rows: list[Any]) -> None:
        """Take rows a piece at a time (`_read_pieces`): checked and kept together
        where a reader can, one by one otherwise."""
        for query_id, row in zip(query_ids, rows, strict=True):
            self.take(query_id, row)


class _Scalars(_Rows):
    """A section's rows of one kind of number, by query, as a `Column`: rows another
    reading would give as they are, and a query twice, are left to the whole reading."""

    typecode: str = "q"
    dtype: Any = np.int64
    read: Any = int

    def __init__(self) -> None:
        self.query_ids: list[str] = []
        self.items = array(self.typecode)

    def take(self, query_id: str, row: Any) -> None:
        self.take_piece([query_id], [row])

    def take_piece(self, query_ids: list[str], rows: list[Any]) -> None:
        """Rows that are counts under 2^62 (`_Unexpected` for any other)."""
        if not {int}.issuperset(map(type, rows)) or (
            rows and not 0 <= min(rows) <= max(rows) < 1 << 62
        ):
            raise _Unexpected
        self.items.extend(rows)
        self.query_ids += query_ids

    @property
    def values(self) -> Column:
        if len(set(self.query_ids)) != len(self.query_ids):
            raise _Unexpected
        return Column(self.query_ids, np.frombuffer(self.items, self.dtype), self.read)


class _Fingerprints(_Scalars):
    """`query_fingerprints`: 16 lowercase hex digits each (the ones `baseline refresh`
    writes), held as their integer; any other text makes the section a dict of them."""

    typecode = "Q"
    dtype = np.uint64
    read = staticmethod(hex_fingerprint)

    def __init__(self) -> None:
        super().__init__()
        self.texts: dict[str, str] | None = None
        """The section as it is, once a row is not 16 hex digits."""

    def take(self, query_id: str, row: Any) -> None:
        if type(row) is not str:
            raise _Unexpected
        if self.texts is None and _HEX16.fullmatch(row) is not None:
            self.items.append(int(row, 16))
            self.query_ids.append(query_id)
            return
        if self.texts is None:
            self.texts = dict(zip(self.query_ids, map(hex_fingerprint, self.items), strict=True))
            if len(self.texts) != len(self.query_ids):
                raise _Unexpected  # a query twice: said by the whole reading
        if query_id in self.texts:
            raise _Unexpected
        self.texts[query_id] = row
        self.query_ids.append(query_id)

    def take_piece(self, query_ids: list[str], rows: list[Any]) -> None:
        """A piece of 16 hex digits a row at once; any other a row at a time (`take`)."""
        joined = "".join(rows) if {str}.issuperset(map(type, rows)) else ""
        if self.texts is not None or len(joined) != 16 * len(rows) or not _HEXES.fullmatch(joined):
            for query_id, row in zip(query_ids, rows, strict=True):
                self.take(query_id, row)
            return
        items = np.frombuffer(bytes.fromhex(joined), ">u8").astype(np.uint64)
        self.items.frombytes(items.tobytes())
        self.query_ids += query_ids

    @property
    def values(self) -> Mapping[str, str]:  # type: ignore[override]
        return super().values if self.texts is None else self.texts


_HEX16 = re.compile(r"[0-9a-f]{16}")
_HEXES = re.compile(r"[0-9a-f]*")
_READ_BY_ROWS = frozenset({"per_query", "service", "query_fingerprints", "first_relevant_rank"})
"""The sections whose rows their readers check as they take them (no less strictly
than the schema)."""
_SCALAR_ROWS: dict[str, type[_Scalars]] = {
    "query_fingerprints": _Fingerprints,
    "first_relevant_rank": _Scalars,
}


class _ScoreRows(_Rows):
    """`per_query`'s rows, grouped by their metrics, as `ScoreColumns.from_groups` takes
    them: per group its rows' places and their values one after the other."""

    def __init__(self) -> None:
        self.query_ids: list[str] = []
        self.groups: dict[tuple[str, ...], tuple[array[int], array[float]]] = {}

    def take(self, query_id: str, row: Any) -> None:
        if type(row) is not dict or not _NUMBERS.issuperset(map(type, row.values())):
            raise _Unexpected  # a bool, a string, a null: said by the whole reading
        group = self.groups.get(keys := tuple(row))
        if group is None:
            group = self.groups[keys] = (array("q"), array("d"))
        group[0].append(len(self.query_ids))
        group[1].extend(row.values())
        self.query_ids.append(query_id)

    def take_piece(self, query_ids: list[str], rows: list[Any]) -> None:
        """A piece whose rows are objects of the same metrics in the same order, the
        usual one, is kept at once; any other a row at a time."""
        if not {dict}.issuperset(map(type, rows)) or len(orders := set(map(tuple, rows))) != 1:
            super().take_piece(query_ids, rows)
            return
        values = list(itertools.chain.from_iterable(map(dict.values, rows)))
        if not _NUMBERS.issuperset(map(type, values)):
            raise _Unexpected
        keys = orders.pop()
        group = self.groups.get(keys)
        if group is None:
            group = self.groups[keys] = (array("q"), array("d"))
        group[0].extend(range(len(self.query_ids), len(self.query_ids) + len(rows)))
        group[1].extend(values)
        self.query_ids += query_ids

    def table(self) -> ScoreColumns | None:
        if len(set(self.query_ids)) != len(self.query_ids):
            raise _Unexpected
        for _, values in self.groups.values():
            if not np.isfinite(np.frombuffer(values, dtype=np.float64)).all():
                raise _Unexpected
        return ScoreColumns.from_groups(self.query_ids, self.groups)


class _ServiceRows(_Rows):
    """`service`'s rows as columns; a query twice is left to the whole reading."""

    def __init__(self) -> None:
        self.query_ids: list[str] = []
        self.latencies: list[float | None] = []
        self.errors: list[bool] = []

    def take(self, query_id: str, row: Any) -> None:
        self.take_piece([query_id], [row])

    def take_piece(self, query_ids: list[str], rows: list[Any]) -> None:
        """Rows that `_SERVICE_ROW` passes, of the keys it checks alone (another key may
        nest too deep), tested together: objects whose latency is a finite float or
        null and whose `error` is a boolean (when given); `_Unexpected` otherwise."""
        if not {dict}.issuperset(map(type, rows)):
            raise _Unexpected
        if not _SERVICE_KEYS.issuperset(itertools.chain.from_iterable(rows)):
            raise _Unexpected
        errors = list(map(dict.get, rows, itertools.repeat("error"), itertools.repeat(False)))
        latencies = list(map(dict.get, rows, itertools.repeat("latency_ms")))
        if not {bool}.issuperset(map(type, errors)):
            raise _Unexpected
        if not {float, type(None)}.issuperset(map(type, latencies)):
            raise _Unexpected
        if not np.isfinite(np.array([value for value in latencies if value is not None])).all():
            raise _Unexpected
        self.query_ids += query_ids
        self.latencies += latencies
        self.errors += errors

    @property
    def values(self) -> ServiceColumns:
        if len(set(self.query_ids)) != len(self.query_ids):
            raise _Unexpected
        return ServiceColumns(self.query_ids, self.latencies, self.errors)


_PIECE = 1 << 20
"""About how many characters of a section `_read_pieces` reads at once."""
_NEXT_ROW = ',\n  "'
"""A comma and the next row's key, as `save_baseline` writes a section (the keys of a
row's own object are indented further)."""
_LAST_ROW = "\n }"
"""The end of a section as `save_baseline` writes it: where the last piece is cut."""


_R = TypeVar("_R", bound=_Rows)


def _read_section(
    content: str, at: int, shared: dict[str, str], make: type[_R], scan: Any
) -> tuple[int, _R]:
    """An object of rows from `at` read into `make()`: by pieces, or else (anything
    unusual) row by row. Where it ends, and the rows."""
    rows = make()
    end = _read_pieces(content, at, shared, rows, scan)
    if end is None:
        rows = make()
        end = _read_rows(content, at, scan, shared, rows, unhooked_scan)
    return end, rows


def _read_pieces(
    content: str, at: int, shared: dict[str, str], rows: _Rows, scan: Any
) -> int | None:
    """Read an object of rows from `at` into `rows` by pieces of about `_PIECE`
    characters, each cut before a `_NEXT_ROW` and read whole by the C scanner: where
    the object ends, or None for anything unusual (a piece that does not read, a row
    its reader refuses), which `_read_rows` is to read again, row by row.

    A piece is `{` and its rows, closed: a cut that is not between two rows does not
    read, and the piece that holds the object's end reads as far as it. Its rows are
    read without the hook that refuses a repeated key, and kept when their keys are as
    many as their colons (`repeats_no_key`); otherwise it is read again by `scan`."""
    if content[at] != "{":
        return None
    start = at + 1
    try:
        while True:
            cut = content.find(_NEXT_ROW, start + _PIECE)
            stop = cut if cut >= 0 else content.find(_LAST_ROW, start) + len(_LAST_ROW)
            if stop < start:
                return None
            piece = "{" + content[start:stop] + "}"
            value, end = unhooked_scan(piece, 0)
            if not repeats_no_key(value, piece, 0, end):
                value, end = scan(piece, 0)
            rows.take_piece(list(map(shared.setdefault, value, value)), list(value.values()))
            if end < len(piece) or cut < 0:  # the object ended in this piece
                return start + end - 1 if end < len(piece) else None
            start = cut + 1
    except Exception:  # invalid text, a row refused: read row by row, which names it
        return None


def _read_rows(
    content: str, at: int, scan: Any, shared: dict[str, str], rows: _Rows, unhooked: Any = None
) -> int:
    """Read an object of rows from `at` into `rows`; where it ends. With `unhooked` (a
    scanner without the hook that refuses a repeated key), a row is read by it first,
    and kept when `repeats_no_key` proves it; any other row (a number, a string, an
    object that `repeats_no_key` cannot vouch for) is read again by `scan`."""
    at = _after(content, at, "{")
    if (end := _CLOSE.match(content, at)) is not None:
        return end.end()
    query_id, at = _key(content, _skip(content, at))
    while True:
        if unhooked is None:
            row, at = scan(content, at)
        else:
            start = at
            row, at = unhooked(content, start)
            if not repeats_no_key(row, content, start, at):
                row, at = scan(content, start)
        rows.take(shared.setdefault(query_id, query_id), row)
        plain = _NEXT_PLAIN_KEY.match(content, at)
        if plain is not None:  # a key without escapes, the usual one: read in one match
            query_id, at = plain.group(1), plain.end()
            continue
        if (end := _CLOSE.match(content, at)) is not None:
            return end.end()
        query_id, at = _key(content, _skip(content, _after(content, _skip(content, at), ",")))


def _key(content: str, at: int) -> tuple[str, int]:
    """A key and its colon at `at`; where its value starts."""
    key, at = scanstring(content, _after(content, at, '"'))
    return key, _skip(content, _after(content, _skip(content, at), ":"))


def _after(content: str, at: int, expected: str) -> int:
    if content[at] != expected:
        raise _Unexpected
    return at + 1


def _skip(content: str, at: int) -> int:
    return _WHITESPACE.match(content, at).end()  # type: ignore[union-attr]
