"""Reading line-oriented input files and writing output files atomically.

All file loaders go through `iter_lines` (or, for large run files, the blocks of
text it is built on), so a UTF-8 BOM, CRLF line ends, blank lines and bytes that
are not UTF-8 are handled the same way everywhere.
"""

from __future__ import annotations

import codecs
import json
import math
import numbers
import os
import tempfile
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any, TypeVar

from llm_eval.errors import InputError

T = TypeVar("T")

# Bytes decoded at a time. Small blocks are much faster to parse than large ones: the
# strings split from a block are freed before the next, so the memory they use stays
# in the processor's cache (64 KiB to 256 KiB read a TREC run twice as fast as 2 MiB).
BLOCK_BYTES = 1 << 16


def iter_lines(path: str | Path) -> Iterator[tuple[int, str]]:
    """Yield `(line_number, text)` for each non-blank line, line ends stripped."""
    for first, block in iter_text_blocks(path):
        for number, text in enumerate(block.split("\n"), first):
            if text.strip():
                yield number, text.rstrip("\r")


def iter_text_blocks(path: str | Path) -> Iterator[tuple[int, str]]:
    """Yield `(first_line_number, text)`: the file decoded a block of whole lines at a time.

    Every block but the last ends with a newline; a UTF-8 BOM at the start is dropped.
    Bytes that are not UTF-8 raise `InputError` naming their line, once the lines
    before it have been yielded. `iter_lines` and the TREC run reader build on this:
    decoding a block at once is much faster than a line at a time.
    """
    with require_file(path).open("rb") as handle:
        head = handle.read(len(codecs.BOM_UTF8))
        # What is read but not yet handed out: no newline since the last block.
        partial = [] if head == codecs.BOM_UTF8 else [head]
        number = 1
        while data := handle.read(BLOCK_BYTES):
            cut = data.rfind(b"\n") + 1
            if cut:
                block = b"".join([*partial, data[:cut]])
                yield from _decode_block(block, path, number)
                number += block.count(b"\n")
                partial = []
            partial.append(data[cut:])
        if rest := b"".join(partial):
            yield from _decode_block(rest, path, number)


def _decode_block(raw: bytes, path: str | Path, number: int) -> Iterator[tuple[int, str]]:
    try:
        text = raw.decode("utf-8")
    except UnicodeDecodeError as exc:
        # A newline is never inside a UTF-8 sequence, so the decoder is at a line's
        # start as it would be decoding that line alone: the column is the same.
        start = raw.rfind(b"\n", 0, exc.start) + 1
        if start:
            yield number, raw[:start].decode("utf-8")
        raise InputError(
            f"not valid UTF-8 (byte 0x{raw[exc.start]:02x} at column {exc.start - start + 1})",
            path=path,
            line=number + raw.count(b"\n", 0, start),
        ) from None
    yield number, text


def parse_json_object(text: str, path: str | Path, line: int) -> dict[str, Any]:
    """Parse one JSONL line that must hold a JSON object."""
    try:
        value = json.loads(text)
    except json.JSONDecodeError as exc:
        raise InputError(
            f"invalid JSON: {exc.msg} (column {exc.colno})", path=path, line=line
        ) from None
    if not isinstance(value, dict):
        raise InputError(f"expected a JSON object, got {json_type(value)}", path=path, line=line)
    return value


def _mode_for(target: Path) -> int:
    try:
        return target.stat().st_mode & 0o7777
    except FileNotFoundError:
        umask = os.umask(0)
        os.umask(umask)
        return 0o666 & ~umask


def is_finite_number(value: Any) -> bool:
    """A real, finite number (not a boolean), as scores and latencies must be."""
    real = isinstance(value, numbers.Real) and not isinstance(value, bool)
    return real and math.isfinite(float(value))


def json_type(value: Any) -> str:
    """The JSON name of a parsed value's type, for error messages."""
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "a boolean"
    if isinstance(value, int | float):
        return "a number"
    if isinstance(value, str):
        return "a string"
    return "an array" if isinstance(value, list) else "an object"


def write_atomic(path: str | Path, text: str) -> None:
    """Write `text` to `path` so that readers see the old file or the new one, never half.

    The text goes to a temporary file in the same folder, is flushed to disk, then
    renamed over the target (rename is atomic within one file system).
    """
    target = Path(path)
    target.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp_name = tempfile.mkstemp(prefix=f".{target.name}.", suffix=".tmp", dir=target.parent)
    try:
        # mkstemp creates 0600; keep the old file's mode, or give a new file the umask's.
        Path(tmp_name).chmod(_mode_for(target))
        with os.fdopen(fd, "w", encoding="utf-8", newline="\n") as handle:
            handle.write(text)
            handle.flush()
            os.fsync(handle.fileno())
        Path(tmp_name).replace(target)
    except BaseException:
        Path(tmp_name).unlink(missing_ok=True)
        raise


def require_file(path: str | Path) -> Path:
    """The path, when it names an existing regular file; else an InputError saying why."""
    file = Path(path)
    if not file.exists():
        raise InputError("no such file", path=path)
    if file.is_dir():
        raise InputError("is a directory, expected a file", path=path)
    return file


def iter_unique_records(
    path: str | Path,
    parse: Callable[[dict[str, Any], str | Path, int], T],
    key: Callable[[T], str],
    key_name: str,
) -> Iterator[T]:
    """Parse each JSONL line into a record whose `key` must be unique in the file.

    A repeated key is an error naming both lines:
    `file:9: query_id: duplicate query_id 'q1' (first at line 3)`.
    """
    first_line: dict[str, int] = {}
    for line, text in iter_lines(path):
        record = parse(parse_json_object(text, path, line), path, line)
        value = key(record)
        if value in first_line:
            raise InputError(
                f"duplicate {key_name} {value!r} (first at line {first_line[value]})",
                path=path,
                line=line,
                key=key_name,
            )
        first_line[value] = line
        yield record
