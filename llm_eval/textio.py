"""Reading line-oriented input files and writing output files atomically.

All file loaders go through `iter_lines` (or, for large run files, the blocks of
text it is built on), so a UTF-8 BOM, CRLF line ends, blank lines and bytes that
are not UTF-8 are handled the same way everywhere. The history file, where one bad
line must not stop the reading, splits the same way with `iter_raw_lines` and
decodes each line alone.
"""

from __future__ import annotations

import codecs
import contextlib
import hashlib
import io
import json
import os
import re
import shutil
import stat
import tempfile
from collections import Counter
from collections.abc import Callable, Iterable, Iterator, Sequence
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
    with open_regular(path) as handle:
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


def iter_raw_lines(path: str | Path) -> Iterator[tuple[int, bytes]]:
    """Yield `(line_number, bytes)` for each non-blank line, line ends stripped and a
    UTF-8 BOM at the start dropped, as `iter_lines` does, but undecoded: for a file
    where a line that is not UTF-8 is one bad line (`decode_line`), not a bad file."""
    with open_regular(path) as handle:
        for number, raw in enumerate(handle, 1):
            if number == 1:
                raw = raw.removeprefix(codecs.BOM_UTF8)
            raw = raw.removesuffix(b"\n").rstrip(b"\r")
            if raw.strip():
                yield number, raw


def decode_line(raw: bytes, path: str | Path, number: int) -> str:
    """One line's text; InputError naming the line and column where it is not UTF-8."""
    try:
        return raw.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise InputError(_not_utf8(raw, exc.start, exc.start + 1), path=path, line=number) from None


def _not_utf8(raw: bytes, at: int, column: int) -> str:
    return f"not valid UTF-8 (byte 0x{raw[at]:02x} at column {column})"


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
            _not_utf8(raw, exc.start, exc.start - start + 1),
            path=path,
            line=number + raw.count(b"\n", 0, start),
        ) from None
    yield number, text


MAX_JSON_DEPTH = 100
"""Deepest nesting of arrays and objects in a hand-edited JSON file; the tool's files
nest a few levels."""

# A JSON string (unrolled: no backtracking), and what is left of nesting without them.
_JSON_STRING = re.compile(r'"[^"\\]*(?:\\.[^"\\]*)*"')
_JSON_BRACKET = re.compile(r"[\[\]{}]")
_INNERMOST_PAIR = re.compile(r"\[\]|\{\}")
# A \u escape of a UTF-16 surrogate: only these can make a parsed string that is not text.
_SURROGATE_ESCAPE = re.compile(r"\\u[dD][89a-fA-F]")


def load_json(text: str, path: str | Path, line: int | None = None, *, strict: bool = False) -> Any:
    """Parse JSON text from `path` (at `line`, for one line of a JSONL file).

    Every JSON input goes through here, so each is refused the same way, as an
    InputError naming the file and line: invalid JSON, nesting too deep for Python's
    recursive parser (a thousand levels or so), numbers too long to convert, and
    strings holding a lone UTF-16 surrogate (`"\\ud800"` parses, but is not text: it
    cannot be written, hashed or printed).

    `strict` is for the files people edit by hand (gold files, the versions sidecar,
    baseline, report): it also refuses nesting deeper than `MAX_JSON_DEPTH` and an
    object that repeats a key (JSON would keep the last one silently). Both checks
    double the time a large run line takes to parse, so machine-written files skip
    them; nothing the tool does with their values recurses.
    """
    if strict and nesting_depth(text) > MAX_JSON_DEPTH:
        raise InputError(f"JSON nested deeper than {MAX_JSON_DEPTH} levels", path=path, line=line)
    try:
        if strict and line is not None:
            value = _strict_line(text)
        elif strict:
            value = json.loads(text, object_pairs_hook=_unique, parse_float=_shared_floats())
        else:
            value = json.loads(text)
    except RecursionError:
        raise InputError("JSON nested too deeply to read", path=path, line=line) from None
    except _DuplicateKeyError as exc:
        raise InputError("duplicate key", path=path, line=line, key=exc.key) from None
    except json.JSONDecodeError as exc:
        where = line if line is not None else exc.lineno
        raise InputError(
            f"invalid JSON: {exc.msg} (column {exc.colno})", path=path, line=where
        ) from None
    except ValueError:  # the one other failure: an integer of too many digits to convert
        raise InputError("invalid JSON: a number too long to read", path=path, line=line) from None
    if _SURROGATE_ESCAPE.search(text):
        key = _first_unencodable(value)
        if key is not None:
            raise InputError(
                "a string holds a lone UTF-16 surrogate (\\ud800-\\udfff escape), not text",
                path=path,
                line=line,
                key=key or None,
            )
    return value


def _strict_line(text: str) -> Any:
    """`json.loads` of one line refusing a repeated key, by a decoder made once: `loads`
    given a hook makes a decoder per call, which costs as much as a short line's parse.
    (Its floats are not shared: a line holds few.)

    An object is read first without the hook, in C, and kept when `repeats_no_key`
    proves it; any other value is read again by the hook, which finds a repeated key."""
    if text.startswith("\ufeff"):  # as `json.loads` refuses it
        raise json.JSONDecodeError("Unexpected UTF-8 BOM (decode using utf-8-sig)", text, 0)
    value = _PLAIN_DECODER.decode(text)
    if repeats_no_key(value, text, 0, len(text)):
        return value
    return _LINE_DECODER.decode(text)


def repeats_no_key(value: Any, text: str, start: int, end: int) -> bool:
    """Whether `value`, read without the hook from `text[start:end]`, surely repeated no
    key: an object whose keys (its own and its objects') are as many as the colons of
    its text. Every key in the text is followed by a colon, so then none was dropped.
    False for anything else (a colon inside a string, objects nested deeper, a value
    that is not an object), which the hook is to read again."""
    if type(value) is not dict:
        return False
    keys = len(value)
    for item in value.values():  # a loop, not a list summed: a gold line's is short
        if type(item) is dict:
            keys += len(item)
    return keys == text.count(":", start, end)


class _DuplicateKeyError(Exception):
    def __init__(self, key: str) -> None:
        super().__init__(key)
        self.key = key.encode("utf-8", "backslashreplace").decode("utf-8")


def _unique(pairs: list[tuple[str, Any]]) -> dict[str, Any]:
    value = dict(pairs)
    if len(value) < len(pairs):
        counts = Counter(key for key, _ in pairs)
        raise _DuplicateKeyError(next(key for key, _ in pairs if counts[key] > 1))
    return value


_LINE_DECODER = json.JSONDecoder(object_pairs_hook=_unique)
_PLAIN_DECODER = json.JSONDecoder()
unhooked_scan: Callable[[str, int], tuple[Any, int]] = _PLAIN_DECODER.scan_once  # type: ignore[attr-defined]
"""`scan_once(text, at)` (the value there, where it ends) without the hook that refuses a
repeated key: for a reader that checks each value with `repeats_no_key`, or refuses
any object itself. The C scanner, not a function around it: it reads a row at a time."""


def nesting_depth(text: str) -> int:
    """How deep arrays and objects nest in `text`, when that may exceed `MAX_JSON_DEPTH`
    (0 when there are too few brackets to; at most `MAX_JSON_DEPTH` + 1 passes).

    The brackets outside strings, with one level of innermost pairs removed at a time:
    each pass runs in C, where a loop over the brackets in Python would not.
    """
    if text.count("[") + text.count("{") <= MAX_JSON_DEPTH:
        return 0
    brackets = "".join(_JSON_BRACKET.findall(_JSON_STRING.sub("", text)))
    levels = 0
    while levels <= MAX_JSON_DEPTH:
        brackets, removed = _INNERMOST_PAIR.subn("", brackets)
        if not removed:
            break
        levels += 1
    # What is left is unmatched; the openers among it are all open at the end at once.
    return max(levels, brackets.count("[") + brackets.count("{"))


def _first_unencodable(value: Any) -> str | None:
    """The key path of the first string (or key) in `value` that is not encodable text."""
    pending: list[tuple[Any, str]] = [(value, "")]
    while pending:
        item, key = pending.pop()
        if isinstance(item, str) and not encodable(item):
            return key
        if isinstance(item, dict):
            for name, child in reversed(item.items()):
                child_key = f"{key}.{name}" if key else name
                if not encodable(name):
                    return child_key.encode("utf-8", "backslashreplace").decode("utf-8")
                pending.append((child, child_key))
        elif isinstance(item, list):
            pending.extend((child, f"{key}[{i}]") for i, child in reversed(list(enumerate(item))))
    return None


def encodable(text: str) -> bool:
    """The text can be written as UTF-8 (it holds no lone surrogate)."""
    try:
        text.encode("utf-8")
    except UnicodeEncodeError:
        return False
    return True


def parse_json_object(
    text: str, path: str | Path, line: int, *, strict: bool = False
) -> dict[str, Any]:
    """Parse one JSONL line that must hold a JSON object (see `load_json`)."""
    value = usual_json_object(text, strict)
    if value is not None:
        return value
    value = load_json(text, path, line, strict=strict)
    if not isinstance(value, dict):
        raise InputError(f"expected a JSON object, got {json_type(value)}", path=path, line=line)
    return value


def usual_json_object(text: str, strict: bool = False) -> dict[str, Any] | None:
    """The object of a JSONL line of the usual kind, as `load_json` reads it (`strict`
    or not); None for any other line, which `load_json` reads and names the fault of.

    The usual line is an object from its first character to its last, with no escape
    of a code point (so no lone surrogate) and too few brackets to nest deeper than
    `MAX_JSON_DEPTH`. It is read by the C scanners alone, strictly as `_strict_line`
    reads it: a million lines of a gold set or a run file spent more time in the checks
    around the scanner than in it."""
    if text[:1] != "{" or "\\u" in text or text.count("[") + text.count("{") > MAX_JSON_DEPTH:
        return None
    try:
        value, end = unhooked_scan(text, 0)
        if end != len(text):
            return None
        if strict and not repeats_no_key(value, text, 0, end):
            value = _LINE_DECODER.scan_once(text, 0)[0]  # type: ignore[attr-defined]
    except Exception:  # invalid JSON, a key twice, a number too long: said by load_json
        return None
    return value


def read_text(path: str | Path) -> str:
    """A whole file's text (a UTF-8 BOM is dropped); bytes that are not UTF-8 are an
    InputError naming their line."""
    with open_regular(path) as handle:
        raw = handle.read()
    try:
        return raw.decode("utf-8-sig")
    except UnicodeDecodeError as exc:
        raise InputError(
            f"not valid UTF-8 (byte 0x{raw[exc.start]:02x})",
            path=path,
            line=raw.count(b"\n", 0, exc.start) + 1,
        ) from None


def _shared_floats() -> Callable[[str], float]:
    """`float` for a JSON number literal, one object per distinct literal of a document:
    a baseline holds each query's scores, few distinct values written many times (0.0,
    0.5, 1.0), and one float object each would cost 24 bytes per score."""
    seen: dict[str, float] = {}

    def shared(literal: str) -> float:
        value = seen.get(literal)
        if value is None:
            value = seen[literal] = float(literal)
        return value

    return shared


def strict_decoder(shared_floats: bool = True) -> json.JSONDecoder:
    """The decoder `load_json` reads a whole document with when `strict`: a repeated key
    is an error, and the document's floats are shared (unless not `shared_floats`, for
    values that are not kept as objects). Only for a reader that checks the rest itself
    (nesting, `holds_surrogate_escape`) and reads the document in parts."""
    if not shared_floats:
        return _LINE_DECODER
    return json.JSONDecoder(object_pairs_hook=_unique, parse_float=_shared_floats())


def holds_surrogate_escape(text: str) -> bool:
    """Whether JSON text may hold a lone surrogate (`load_json` then looks further)."""
    return _SURROGATE_ESCAPE.search(text) is not None


def read_json_file(path: str | Path) -> Any:
    """Parse a whole JSON file (see `read_text`); an InputError when it is not JSON."""
    return json_document(read_text(path), path)


def json_document(text: str, path: str | Path) -> Any:
    """Parse a whole JSON file's text, as `read_json_file` does."""
    if not text.strip():
        raise InputError("empty file, expected JSON", path=path)
    return load_json(text, path, strict=True)


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


def write_atomic(path: str | Path, text: str | bytes | Iterable[str]) -> None:
    """Write `text` (or bytes, as they are, or the pieces of a text, written as they
    come) to `path` so that readers see the old file or the new one, never half.

    The text goes to a temporary file in the same folder, is flushed to disk, then
    renamed over the target (rename is atomic within one file system). Temporary files
    that killed processes left in that folder are removed first.
    """
    target = Path(path)
    with _staged(target, text) as temporary:
        temporary.replace(target)


def append_atomic(path: str | Path, lines: str) -> None:
    """Add `lines` at the end of a text file (made when missing), on a line of their
    own, atomically: the whole file is rewritten by `write_atomic`."""
    append_together([(Path(path), lines)])


def append_line_locked(path: Path, line: str) -> int:
    """Add one line at the end of a line-oriented file (made when missing), atomically,
    with the other writers of the file shut out from reading it until it is written:
    the number of non-blank lines the file holds right after. The bytes already there
    are kept as they are, a line that is not UTF-8 included; a last line without its
    newline gets one first, so the new line stands alone."""
    with exclusive_lock(path):
        old = path.read_bytes() if path.is_file() else b""
        if old and not old.endswith(b"\n"):
            old += b"\n"
        new = old + line.encode("utf-8") + b"\n"
        write_atomic(path, new)
    lines = new.removeprefix(codecs.BOM_UTF8).split(b"\n")  # as `iter_raw_lines` reads them
    return sum(1 for text in lines if text.strip())


@contextlib.contextmanager
def exclusive_lock(path: Path) -> Iterator[None]:
    """Hold the lock of `path`'s writers for the block: a read, change and rewrite of
    the file by one of them is never interleaved with another's.

    The lock is on a file beside it, `.NAME.lock`, never removed, not on the file
    itself: each write renames a new file over the old one, so a writer waiting on
    the old file's lock would wake holding a lock on a file no longer at the path,
    while a writer arriving later locks the new one; both would then rewrite the file
    at once. The lock file stays the same file for as long as it exists.

    `flock`, not `lockf`: a POSIX record lock belongs to the process and is dropped
    when any of its descriptors of the file is closed, and it does not shut out
    another thread of the same process; a flock belongs to the open file, and the
    system drops it when the process ends, killed or not. Without fcntl (Windows)
    there is no lock: one writer at a time, as the dashboard workflow runs them.
    """
    try:
        import fcntl
    except ImportError:
        yield
        return
    path.parent.mkdir(parents=True, exist_ok=True)
    lock = path.with_name(f".{path.name}.lock")
    if lock.is_symlink():  # where it points is not the writers' to choose
        raise InputError(f"is a symbolic link, expected the lock file of {path.name}", path=lock)
    try:
        fd = os.open(lock, os.O_RDWR | os.O_CREAT | getattr(os, "O_NOFOLLOW", 0), 0o666)
    except OSError as exc:  # a folder in its place, an immutable file: the lock is named
        raise OSError(exc.errno, exc.strerror, str(lock)) from None
    try:
        if not stat.S_ISREG(os.fstat(fd).st_mode):
            kind = special_kind(os.fstat(fd).st_mode)
            raise InputError(f"is {kind}, expected the lock file of {path.name}", path=lock)
        try:
            fcntl.flock(fd, fcntl.LOCK_EX)
        except OSError as exc:  # a file system without locks: refused, never unlocked
            raise OSError(exc.errno, f"cannot lock it ({exc.strerror})", str(lock)) from None
        yield
    finally:
        os.close(fd)  # the lock goes with it


def append_together(appends: Sequence[tuple[Path, str]]) -> None:
    """`append_atomic` to several files, all or none of them (`write_together`)."""
    changes = []
    for target, lines in appends:
        old = read_text(target) if target.is_file() else ""
        if old and not old.endswith("\n"):
            old += "\n"
        changes.append((target, old + lines))
    write_together(changes)


def write_together(changes: Sequence[tuple[Path, str]]) -> None:
    """Write related files so that a failure leaves all of them as they were, for files
    whose lines belong together (a review decision and its gold line)."""
    with written_together(changes):
        pass


@contextlib.contextmanager
def written_together(changes: Sequence[tuple[Path, str]]) -> Iterator[None]:
    """Write the files, and put them back as they were (folders made for them removed)
    when the body raises: for work that is only whole with every file (`llm-eval init`).

    Each new text is written to a temporary file and flushed first; the renames follow,
    and when one fails (a folder in a file's place), the files renamed before it get
    their old text back. A process killed between two renames can still leave the
    first file new: callers write the file whose line alone does no harm first.
    """
    made = _missing_folders([target.parent for target, _ in changes])
    olds = [target.read_bytes() if target.is_file() else None for target, _ in changes]
    done: list[int] = []
    try:
        with contextlib.ExitStack() as staged:
            temporaries = [staged.enter_context(_staged(t, text)) for t, text in changes]
            for i, (target, _) in enumerate(changes):
                temporaries[i].replace(target)
                done.append(i)
        yield
    except BaseException:
        for i in reversed(done):
            target, old = changes[i][0], olds[i]
            if old is None:
                target.unlink(missing_ok=True)
            else:
                write_atomic(target, old)
        for folder in made:
            with contextlib.suppress(OSError):  # not empty: something else was put there
                folder.rmdir()
        raise


def _missing_folders(folders: Sequence[Path]) -> list[Path]:
    """The folders (and parents) of `folders` that do not exist yet, deepest first."""
    missing = {parent for folder in folders for parent in (folder, *folder.parents)}
    return sorted((f for f in missing if not f.exists()), key=lambda f: -len(f.parts))


@contextlib.contextmanager
def _staged(target: Path, text: str | bytes | Iterable[str]) -> Iterator[Path]:
    """A flushed temporary file next to `target` holding `text`; removed on the way out
    unless it was renamed."""
    target.parent.mkdir(parents=True, exist_ok=True)
    sweep_stale_temporaries(target.parent)
    try:
        fd, name = tempfile.mkstemp(
            prefix=temporary_prefix(target.name), suffix=TEMP_SUFFIX, dir=target.parent
        )
    except OSError as exc:  # a read-only folder: the file the user knows is the target
        raise OSError(exc.errno, exc.strerror, str(target)) from None
    temporary = Path(name)
    try:
        # mkstemp creates 0600; keep the old file's mode, or give a new file the umask's.
        temporary.chmod(_mode_for(target))
        with os.fdopen(fd, "wb") as handle:
            if isinstance(text, str):
                handle.write(text.encode("utf-8"))
            elif isinstance(text, bytes):
                handle.write(text)
            else:
                for piece in text:
                    handle.write(piece.encode("utf-8"))
            handle.flush()
            os.fsync(handle.fileno())
        yield temporary
    finally:
        temporary.unlink(missing_ok=True)


TEMP_SUFFIX = ".tmp"
_TEMPORARY = re.compile(r"\..+\.pid(\d+)\.[^.]+" + re.escape(TEMP_SUFFIX))


def temporary_prefix(name: str) -> str:
    """The name prefix of a temporary file or folder made for `name` by this process.

    It carries the process id, so that `sweep_stale_temporaries` can tell the
    leftovers of a killed process from the files of one still writing.
    """
    return f".{name}.pid{os.getpid()}."


_SWEPT: set[Path] = set()
"""Folders swept by this process: once is enough (the cache writes a file a query)."""


def sweep_stale_temporaries(folder: Path) -> None:
    """Remove the temporary files and folders in `folder` whose process is gone.

    A process killed between creating a temporary and renaming it cannot clean up;
    the next process to write in the same folder does.
    """
    if folder in _SWEPT:
        return
    _SWEPT.add(folder)
    try:
        entries = list(os.scandir(folder))
    except OSError:
        return
    for entry in entries:
        match = _TEMPORARY.fullmatch(entry.name)
        if match is None or _process_alive(int(match.group(1))):
            continue
        with contextlib.suppress(OSError):  # another process may be sweeping it too
            if entry.is_dir(follow_symlinks=False):
                shutil.rmtree(entry.path)
            else:
                Path(entry.path).unlink()


def _process_alive(pid: int) -> bool:
    # On Windows os.kill would end the process rather than probe it: never sweep there.
    if pid == os.getpid() or os.name == "nt":
        return True
    try:
        os.kill(pid, 0)
    except (ProcessLookupError, OverflowError):
        return False
    except OSError:  # e.g. another user's process: it exists
        return True
    return True


def require_file(path: str | Path) -> Path:
    """The path, when it names an existing regular file; else an InputError saying why
    (a FIFO, a socket or a device is named as such: opening one would wait for a
    writer that never comes, or read without end)."""
    file = Path(path)
    try:
        mode = file.stat().st_mode
    except OSError:
        raise InputError("no such file", path=path) from None
    if stat.S_ISDIR(mode):
        raise InputError("is a directory, expected a file", path=path)
    if not stat.S_ISREG(mode):
        raise InputError(f"is {special_kind(mode)}, expected a regular file", path=path)
    return file


def special_kind(mode: int) -> str:
    """What a file that is neither a regular file nor a folder is, for an error."""
    if stat.S_ISFIFO(mode):
        return "a FIFO"
    if stat.S_ISSOCK(mode):
        return "a socket"
    if stat.S_ISCHR(mode) or stat.S_ISBLK(mode):
        return "a device"
    return "not a regular file"


@contextlib.contextmanager
def open_regular(path: str | Path) -> Iterator[io.BufferedReader]:
    """`path` opened for reading in binary, when it is a regular file (`require_file`).

    The file is opened without blocking and checked again on the open descriptor, so a
    FIFO put in its place after the check is refused too, never waited on."""
    require_file(path)
    try:
        fd = os.open(path, os.O_RDONLY | getattr(os, "O_NONBLOCK", 0))
    except FileNotFoundError:
        raise InputError("no such file", path=path) from None
    mode = os.fstat(fd).st_mode
    if not stat.S_ISREG(mode):
        os.close(fd)
        raise InputError(f"is {special_kind(mode)}, expected a regular file", path=path)
    with os.fdopen(fd, "rb") as handle:
        yield handle


def unique_records(
    path: str | Path,
    parse: Callable[[dict[str, Any], str | Path, int], T],
    key: Callable[[T], str],
    key_name: str,
    *,
    after: int = 0,
) -> dict[str, T]:
    """`{key: record}` of `iter_unique_records`, the dict itself telling a key that
    repeats: a million lines of a run file are each one lookup fewer."""
    records: dict[str, T] = {}
    for line, record in _records(path, parse, after, False):
        value = key(record)
        if records.setdefault(value, record) is not record:
            raise _repeated(path, parse, key, key_name, value, line, after, False)
    return records


def iter_unique_records(
    path: str | Path,
    parse: Callable[[dict[str, Any], str | Path, int], T],
    key: Callable[[T], str],
    key_name: str,
    *,
    strict: bool = False,
    after: int = 0,
) -> Iterator[T]:
    """Parse each JSONL line after line `after` (a header's) into a record whose `key`
    must be unique in the file.

    A repeated key is an error naming both lines:
    `file:9: query_id: duplicate query_id 'q1' (first at line 3)`.
    """
    seen: set[str] = set()
    for line, record in _records(path, parse, after, strict):
        value = key(record)
        if value in seen:
            raise _repeated(path, parse, key, key_name, value, line, after, strict)
        seen.add(value)
        yield record


def _records(
    path: str | Path,
    parse: Callable[[dict[str, Any], str | Path, int], T],
    after: int,
    strict: bool,
) -> Iterator[tuple[int, T]]:
    """`(line, record)` of each JSONL line after line `after`."""
    for line, text in iter_lines(path):
        if line > after:
            yield line, parse(parse_json_object(text, path, line, strict=strict), path, line)


def _repeated(
    path: str | Path,
    parse: Callable[[dict[str, Any], str | Path, int], T],
    key: Callable[[T], str],
    key_name: str,
    value: str,
    line: int,
    after: int,
    strict: bool,
) -> InputError:
    """The error of `value` repeated at `line`, naming the line that had it first: the
    file read again up to it, only on the way to an error ("?" if it no longer has)."""
    first = next(
        (at for at, record in _records(path, parse, after, strict) if key(record) == value), "?"
    )
    if isinstance(first, int) and first >= line:
        first = "?"
    return InputError(
        f"duplicate {key_name} {value!r} (first at line {first})",
        path=path,
        line=line,
        key=key_name,
    )


def file_digest(path: str | Path) -> str:
    """sha256 of a file's bytes (first 16 hex digits)."""
    with open_regular(path) as handle:
        return hashlib.file_digest(handle, "sha256").hexdigest()[:16]
