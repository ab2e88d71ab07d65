"""Reading line-oriented input files and writing output files atomically.

All file loaders go through `iter_lines`, so a UTF-8 BOM, CRLF line ends, blank
lines and bytes that are not UTF-8 are handled the same way everywhere.
"""

from __future__ import annotations

import codecs
import json
import os
import tempfile
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from llm_eval.errors import InputError


def iter_lines(path: str | Path) -> Iterator[tuple[int, str]]:
    """Yield `(line_number, text)` for each non-blank line, line ends stripped."""
    with require_file(path).open("rb") as handle:
        for number, raw in enumerate(handle, 1):
            if number == 1 and raw.startswith(codecs.BOM_UTF8):
                raw = raw[len(codecs.BOM_UTF8) :]
            text = _decode(raw, path, number).rstrip("\r\n")
            if text.strip():
                yield number, text


def _decode(raw: bytes, path: str | Path, number: int) -> str:
    try:
        return raw.decode("utf-8")
    except UnicodeDecodeError as exc:
        byte = raw[exc.start]
        raise InputError(
            f"not valid UTF-8 (byte 0x{byte:02x} at column {exc.start + 1})",
            path=path,
            line=number,
        ) from None


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
