from __future__ import annotations

import json
import os
import signal
import socket
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import pytest
from conftest import no_hang
from hypothesis import given, settings
from hypothesis import strategies as st

from llm_eval import textio
from llm_eval.errors import ExitCode, InputError
from llm_eval.textio import (
    MAX_JSON_DEPTH,
    append_atomic,
    append_line_locked,
    decode_line,
    file_digest,
    iter_lines,
    iter_raw_lines,
    load_json,
    parse_json_object,
    read_json_file,
    read_text,
    sweep_stale_temporaries,
    write_atomic,
    write_together,
    written_together,
)


def names_in(folder: Path) -> list[str]:
    return sorted(p.name for p in folder.iterdir())


LINES: list[tuple[bytes, list[tuple[int, str]]]] = [
    (b"", []),
    (b"\n\n   \n\t\n", []),
    (b"a\nb\n", [(1, "a"), (2, "b")]),
    (b"a\nb", [(1, "a"), (2, "b")]),
    (b"\na\n\n  \nb\n\n", [(2, "a"), (5, "b")]),
    (b"a\r\nb\r\n", [(1, "a"), (2, "b")]),
    (b"a\r\n\r\nb", [(1, "a"), (3, "b")]),
    (b"\xef\xbb\xbfa\nb\n", [(1, "a"), (2, "b")]),
    (b"\xef\xbb\xbf\r\na\r\n", [(2, "a")]),
    (b"\xef\xbb\xbf{}\r\n", [(1, "{}")]),
    (b"  indented  \n", [(1, "  indented  ")]),
    ("caf\u00e9 \u2013 \u6587\n".encode(), [(1, "caf\u00e9 \u2013 \u6587")]),
]
"""File contents and their non-blank lines, as `iter_lines` yields them."""


@pytest.mark.parametrize(("content", "expected"), LINES)
def test_iter_lines(tmp_path: Path, content: bytes, expected: list[tuple[int, str]]) -> None:
    path = tmp_path / "input.txt"
    path.write_bytes(content)
    assert list(iter_lines(path)) == expected


@pytest.mark.parametrize(("content", "expected"), LINES)
def test_iter_raw_lines_splits_as_iter_lines_does(
    tmp_path: Path, content: bytes, expected: list[tuple[int, str]]
) -> None:
    path = tmp_path / "input.txt"
    path.write_bytes(content)
    assert list(iter_raw_lines(path)) == [(n, text.encode()) for n, text in expected]


def test_iter_raw_lines_leaves_each_line_to_be_decoded_alone(tmp_path: Path) -> None:
    path = tmp_path / "input.txt"
    path.write_bytes(b"ok\r\nab\xffcd\n\xed\xa0\x80\n\x00\nlast, no newline")
    lines = list(iter_raw_lines(path))
    assert [n for n, _ in lines] == [1, 2, 3, 4, 5]
    decoded = []
    for number, raw in lines:
        try:
            decoded.append(decode_line(raw, path, number))
        except InputError as exc:
            decoded.append(str(exc))
    assert decoded == [
        "ok",
        f"{path}:2: not valid UTF-8 (byte 0xff at column 3)",
        f"{path}:3: not valid UTF-8 (byte 0xed at column 1)",
        "\x00",
        "last, no newline",
    ]


def test_iter_lines_accepts_a_string_path(tmp_path: Path) -> None:
    path = tmp_path / "input.txt"
    path.write_text("x\n")
    assert list(iter_lines(str(path))) == [(1, "x")]


@pytest.mark.parametrize(
    ("content", "line", "where"),
    [
        (b"\xff\n", 1, "byte 0xff at column 1"),
        (b"ok\nab\xffcd\n", 2, "byte 0xff at column 3"),
        (b"ok\n\nabc\xfe\r\n", 3, "byte 0xfe at column 4"),
        (b"a\xc3(\n", 1, "byte 0xc3 at column 2"),
        (b"\xef\xbb\xbfab\xff\n", 1, "byte 0xff at column 3"),
        (b"\xff\xfeq\x001\x00\n\x00", 1, "byte 0xff at column 1"),
    ],
)
def test_iter_lines_rejects_bytes_that_are_not_utf8(
    tmp_path: Path, content: bytes, line: int, where: str
) -> None:
    path = tmp_path / "input.txt"
    path.write_bytes(content)
    with pytest.raises(InputError) as info:
        list(iter_lines(path))
    assert str(info.value) == f"{path}:{line}: not valid UTF-8 ({where})"
    assert info.value.exit_code == ExitCode.BAD_INPUT


def test_iter_lines_yields_the_good_lines_before_a_bad_one(tmp_path: Path) -> None:
    path = tmp_path / "input.txt"
    path.write_bytes(b"first\n\xff\n")
    lines = iter_lines(path)
    assert next(lines) == (1, "first")
    with pytest.raises(InputError, match="not valid UTF-8"):
        next(lines)


def test_iter_lines_missing_file(tmp_path: Path) -> None:
    path = tmp_path / "absent.jsonl"
    with pytest.raises(InputError) as info:
        list(iter_lines(path))
    assert str(info.value) == f"{path}: no such file"
    assert info.value.exit_code == ExitCode.BAD_INPUT


def test_iter_lines_directory(tmp_path: Path) -> None:
    with pytest.raises(InputError) as info:
        list(iter_lines(tmp_path))
    assert str(info.value) == f"{tmp_path}: is a directory, expected a file"


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("{}", {}),
        ('{"a": 1, "b": [true, null]}', {"a": 1, "b": [True, None]}),
        ('  {"a": "\\u00e9"}  ', {"a": "\u00e9"}),
    ],
)
def test_parse_json_object(text: str, expected: dict[str, object]) -> None:
    assert parse_json_object(text, "f.jsonl", 3) == expected


@pytest.mark.parametrize(
    ("text", "reason"),
    [
        ('{"a": }', "invalid JSON: Expecting value (column 7)"),
        (
            '{"query_id": "q1",',
            "invalid JSON: Expecting property name enclosed in double quotes (column 19)",
        ),
        ("nope", "invalid JSON: Expecting value (column 1)"),
        ('{"a": 1} x', "invalid JSON: Extra data (column 10)"),
        ("{'a': 1}", "invalid JSON: Expecting property name enclosed in double quotes (column 2)"),
        ("[1, 2]", "expected a JSON object, got an array"),
        ('"text"', "expected a JSON object, got a string"),
        ("12", "expected a JSON object, got a number"),
    ],
)
def test_parse_json_object_errors(text: str, reason: str) -> None:
    with pytest.raises(InputError) as info:
        parse_json_object(text, "data/f.jsonl", 3)
    assert str(info.value) == f"data/f.jsonl:3: {reason}"


def test_write_atomic_creates_the_file_and_its_folders(tmp_path: Path) -> None:
    target = tmp_path / "out" / "nested" / "baseline.json"
    write_atomic(target, "caf\u00e9\nline two\n")
    assert target.read_bytes() == "caf\u00e9\nline two\n".encode()
    assert names_in(target.parent) == ["baseline.json"]


def test_write_atomic_replaces_an_existing_file(tmp_path: Path) -> None:
    target = tmp_path / "baseline.json"
    target.write_text("old content that is longer than the new one\n")
    write_atomic(str(target), "new\n")
    assert target.read_text() == "new\n"
    assert names_in(tmp_path) == ["baseline.json"]


def test_write_atomic_keeps_the_old_file_when_flushing_fails(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    target = tmp_path / "baseline.json"
    target.write_text("old\n")

    def broken_fsync(fd: int) -> None:
        raise OSError(28, "No space left on device")

    monkeypatch.setattr(os, "fsync", broken_fsync)
    with pytest.raises(OSError, match="No space left on device"):
        write_atomic(target, "new\n")
    assert target.read_text() == "old\n"
    assert names_in(tmp_path) == ["baseline.json"]


def test_write_atomic_keeps_the_old_file_when_writing_fails(tmp_path: Path) -> None:
    target = tmp_path / "baseline.json"
    target.write_text("old\n")
    with pytest.raises(TypeError):
        write_atomic(target, 42)  # type: ignore[arg-type]
    assert target.read_text() == "old\n"
    assert names_in(tmp_path) == ["baseline.json"]


def test_write_atomic_leaves_no_file_when_there_was_none(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    def interrupted(fd: int) -> None:
        raise KeyboardInterrupt

    monkeypatch.setattr(os, "fsync", interrupted)
    with pytest.raises(KeyboardInterrupt):
        write_atomic(tmp_path / "baseline.json", "new\n")
    assert names_in(tmp_path) == []


@pytest.mark.parametrize("mode", [0o600, 0o640, 0o755])
def test_write_atomic_keeps_the_mode_of_the_file_it_replaces(tmp_path: Path, mode: int) -> None:
    """Modes a new file would not get (the umask gives 0o644 or 0o664), so the test fails
    when the old file's mode is ignored."""
    target = tmp_path / "baseline.json"
    target.write_text("old")
    target.chmod(mode)
    write_atomic(target, "new")
    assert target.read_text() == "new"
    assert target.stat().st_mode & 0o777 == mode


def test_the_mode_check_fails_when_the_old_mode_is_ignored(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A write that gives every file the umask's mode loses a 0o600 file's privacy."""
    monkeypatch.setattr(textio, "_mode_for", lambda target: 0o666 & ~_umask())
    target = tmp_path / "secret.json"
    target.write_text("old")
    target.chmod(0o600)
    write_atomic(target, "new")
    assert target.stat().st_mode & 0o777 != 0o600


def _umask() -> int:
    mask = os.umask(0)
    os.umask(mask)
    return mask


def test_write_atomic_gives_a_new_file_the_umask_mode(tmp_path: Path) -> None:
    old = os.umask(0o022)
    try:
        write_atomic(tmp_path / "new.json", "x")
    finally:
        os.umask(old)
    assert (tmp_path / "new.json").stat().st_mode & 0o777 == 0o644


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("[" * MAX_JSON_DEPTH + "]" * MAX_JSON_DEPTH, None),  # as deep as allowed
        ('{"a": "' + "[" * 1000 + '"}', {"a": "[" * 1000}),  # brackets in a string do not nest
        ('{"a": "\\"[[["}', {"a": '"[[['}),  # nor after an escaped quote
        ('{"smile": "\\ud83d\\ude00"}', {"smile": "\U0001f600"}),  # a surrogate pair is text
        ("[" + "[], " * 500 + "[]]", [[]] * 501),  # many brackets, not deep
    ],
)
def test_load_json_accepts(text: str, expected: Any) -> None:
    value = load_json(text, "f.json", strict=True)
    assert value == expected or (expected is None and isinstance(value, list))


@pytest.mark.parametrize(
    ("text", "reason"),
    [
        (
            "[" * (MAX_JSON_DEPTH + 1) + "]" * (MAX_JSON_DEPTH + 1),
            "JSON nested deeper than 100 levels",
        ),
        ("[" * 200_000, "JSON nested deeper than 100 levels"),
        ('{"a": ' * 101 + "1" + "}" * 101, "JSON nested deeper than 100 levels"),
        (
            '{"q": "\\ud800"}',
            "q: a string holds a lone UTF-16 surrogate (\\ud800-\\udfff escape), not text",
        ),
        ('{"q": ["ok", {"r": "x\\udfff"}]}', "q[1].r: a string holds a lone UTF-16 surrogate"),
        ('{"\\udc80": 1}', "\\udc80: a string holds a lone UTF-16 surrogate"),
        ('["\\ude00\\ud83d"]', "[0]: a string holds a lone UTF-16 surrogate"),  # wrong order
        ('{"café": {"\\udc80": 1}}', "café.\\udc80: a string holds a lone UTF-16 surrogate"),
        ('{"n": ' + "9" * 5000 + "}", "invalid JSON: a number too long to read"),
    ],
)
def test_load_json_refuses(text: str, reason: str) -> None:
    with pytest.raises(InputError) as info:
        load_json(text, "f.jsonl", 4, strict=True)
    assert str(info.value).startswith(f"f.jsonl:4: {reason}")


@pytest.mark.parametrize(
    ("content", "message"),
    [
        (b"", "FILE: empty file, expected JSON"),
        (b" \n\t", "FILE: empty file, expected JSON"),
        (b'{\n"a": "caf\xe9"}', "FILE:2: not valid UTF-8 (byte 0xe9)"),
        (
            b'{\n"a": 1,\n}',
            "FILE:3: invalid JSON: Expecting property name enclosed in double quotes (column 1)",
        ),
    ],
)
def test_read_json_file_errors_name_the_line(tmp_path: Path, content: bytes, message: str) -> None:
    path = tmp_path / "doc.json"
    path.write_bytes(content)
    with pytest.raises(InputError) as info:
        read_json_file(path)
    assert str(info.value) == message.replace("FILE", str(path))


def test_read_json_file_drops_a_bom(tmp_path: Path) -> None:
    path = tmp_path / "doc.json"
    path.write_bytes(b'\xef\xbb\xbf{"a": 1}')
    assert read_json_file(path) == {"a": 1}


def _dead_pid() -> int:
    """The id of a process that has ended (and been reaped)."""
    child = subprocess.Popen([sys.executable, "-c", "pass"])
    child.wait()
    return child.pid


def test_the_leftovers_of_dead_writers_are_swept_by_the_next_write(tmp_path: Path) -> None:
    dead, alive = _dead_pid(), os.getppid()
    leftovers = [
        f".report.json.pid{dead}.abc123.tmp",
        f".baseline.json.pid{dead}.x_9.tmp",
    ]
    kept = [
        f".report.json.pid{alive}.def456.tmp",  # a writer still at work
        "notes.tmp",  # not a temporary of ours
        f".report.json.{dead}.tmp",  # nor this
    ]
    for name in leftovers + kept:
        (tmp_path / name).write_text("half")
    staging = tmp_path / f".0123abcd.pid{dead}.q1w2e3.tmp"  # a BM25 staging folder
    staging.mkdir()
    (staging / "doc_ids.json").write_text("[]")
    write_atomic(tmp_path / "report.json", "{}")
    assert names_in(tmp_path) == sorted([*kept, "report.json"])


def test_a_folder_is_swept_once_per_process(tmp_path: Path) -> None:
    sweep_stale_temporaries(tmp_path)
    late = tmp_path / f".a.pid{_dead_pid()}.zz.tmp"
    late.write_text("")
    write_atomic(tmp_path / "a", "x")
    assert late.exists()


def test_a_write_killed_mid_way_is_cleaned_up_by_the_next_process(tmp_path: Path) -> None:
    """A real SIGKILL while the temporary file is open, then a new process writes there."""
    target = tmp_path / "report.json"
    slow = (
        "import os, time\n"
        "from llm_eval import textio\n"
        "os.fsync = lambda fd: time.sleep(60)\n"  # hold the temporary file open
        f"textio.write_atomic({str(target)!r}, 'new')\n"
    )
    writer = subprocess.Popen([sys.executable, "-c", slow])
    deadline = time.monotonic() + 30
    while not list(tmp_path.glob(".report.json.pid*.tmp")) and time.monotonic() < deadline:
        time.sleep(0.05)
    os.kill(writer.pid, signal.SIGKILL)
    writer.wait()
    (leftover,) = tmp_path.glob(".report.json.pid*.tmp")
    assert not target.exists()
    after = f"from llm_eval import textio\ntextio.write_atomic({str(target)!r}, 'later')\n"
    subprocess.run([sys.executable, "-c", after], check=True)
    assert names_in(tmp_path) == ["report.json"]
    assert target.read_text() == "later"
    assert not leftover.exists()


def test_duplicate_keys_are_refused_where_asked(tmp_path: Path) -> None:
    text = '{"a": {"b": 1, "c": 2, "b": 3}}'
    assert load_json(text, "f.jsonl", 2) == {"a": {"b": 3, "c": 2}}  # JSON's own rule
    with pytest.raises(InputError) as info:
        load_json(text, "f.jsonl", 2, strict=True)
    assert str(info.value) == "f.jsonl:2: b: duplicate key"
    path = tmp_path / "doc.json"
    path.write_text('{"x": 1,\n "x": 1}')
    with pytest.raises(InputError, match="x: duplicate key"):
        read_json_file(path)


def test_append_atomic_puts_the_lines_on_their_own_line(tmp_path: Path) -> None:
    path = tmp_path / "new" / "file.jsonl"
    append_atomic(path, "a\n")  # a missing file (and folder) is made
    assert path.read_text() == "a\n"
    path.write_text("a\nb")  # no newline at the end
    append_atomic(path, "c\nd\n")
    assert path.read_text() == "a\nb\nc\nd\n"
    assert names_in(path.parent) == ["file.jsonl"]  # no temporary file left


def test_append_line_locked_counts_the_lines_after_its_own(tmp_path: Path) -> None:
    path = tmp_path / "new" / "history.jsonl"
    assert append_line_locked(path, "a") == 1  # a missing file (and folder) is made
    path.write_bytes(b"\xef\xbb\xbfa\n\n\xff\r\n  \nb")
    assert append_line_locked(path, "c") == 4
    assert path.read_bytes() == b"\xef\xbb\xbfa\n\n\xff\r\n  \nb\nc\n"
    assert names_in(path.parent) == [".history.jsonl.lock", "history.jsonl"]


def test_without_fcntl_lines_are_appended_without_a_lock(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setitem(sys.modules, "fcntl", None)  # as on Windows: `import fcntl` fails
    path = tmp_path / "history.jsonl"
    assert (append_line_locked(path, "a"), append_line_locked(path, "b")) == (1, 2)
    assert path.read_bytes() == b"a\nb\n"
    assert names_in(tmp_path) == ["history.jsonl"]


@pytest.mark.skipif(os.name != "posix", reason="the lock is fcntl's")
def test_a_writer_killed_holding_the_lock_leaves_whole_lines_and_the_lock_free(
    tmp_path: Path,
) -> None:
    """A real SIGKILL while a writer holds the lock with its new file half made; the
    next writer gets the lock, and the file holds whole lines only."""
    target = tmp_path / "history.jsonl"
    target.write_bytes(b"one\ntwo\n")
    slow = (
        "import os, time\n"
        "from pathlib import Path\n"
        "from llm_eval import textio\n"
        "os.fsync = lambda fd: time.sleep(60)\n"  # hold the lock, the temporary file open
        f"textio.append_line_locked(Path({str(target)!r}), 'killed')\n"
    )
    writer = subprocess.Popen([sys.executable, "-c", slow])
    deadline = time.monotonic() + 30
    while not list(tmp_path.glob(".history.jsonl.pid*.tmp")) and time.monotonic() < deadline:
        time.sleep(0.05)
    os.kill(writer.pid, signal.SIGKILL)
    writer.wait()
    assert target.read_bytes() == b"one\ntwo\n"
    after = (
        "from pathlib import Path\nfrom llm_eval import textio\n"
        f"print(textio.append_line_locked(Path({str(target)!r}), 'three'))\n"
    )
    done = subprocess.run(
        [sys.executable, "-c", after], check=True, capture_output=True, text=True, timeout=120
    )
    assert done.stdout == "3\n"
    assert target.read_bytes() == b"one\ntwo\nthree\n"
    assert names_in(tmp_path) == [".history.jsonl.lock", "history.jsonl"]


def test_files_written_together_are_all_or_none(tmp_path: Path) -> None:
    gold, sidecar = tmp_path / "gold.jsonl", tmp_path / "cand.review.jsonl"
    gold.write_text("old\n")
    sidecar.mkdir()  # the second rename fails: the first file gets its old text back
    with pytest.raises(IsADirectoryError):
        write_together([(gold, "old\nnew\n"), (sidecar, "decided\n")])
    assert gold.read_text() == "old\n"
    assert names_in(tmp_path) == ["cand.review.jsonl", "gold.jsonl"]


def test_work_that_fails_takes_back_the_files_and_folders_written_for_it(
    tmp_path: Path,
) -> None:
    kept = tmp_path / "kept.txt"
    kept.write_text("mine\n")
    new = tmp_path / "config" / "deep" / "new.yaml"
    with pytest.raises(RuntimeError), written_together([(kept, "theirs\n"), (new, "a: 1\n")]):
        assert (kept.read_text(), new.read_text()) == ("theirs\n", "a: 1\n")
        raise RuntimeError
    assert names_in(tmp_path) == ["kept.txt"]
    assert kept.read_text() == "mine\n"


def test_a_folder_that_refuses_files_is_named_by_the_target(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    def refused(**_: object) -> None:
        raise PermissionError(13, "Permission denied", str(tmp_path / ".gold.jsonl.pid1.x.tmp"))

    monkeypatch.setattr(tempfile, "mkstemp", refused)
    with pytest.raises(PermissionError) as caught:
        write_atomic(tmp_path / "gold.jsonl", "line\n")
    assert caught.value.filename == str(tmp_path / "gold.jsonl")


def test_a_fifo_or_a_socket_is_refused_before_it_is_opened(tmp_path: Path) -> None:
    """Opening a FIFO for reading waits for a writer; none is ever started here, so a
    reader that opened it would never return (`no_hang` fails it instead)."""
    fifo = tmp_path / "gold.jsonl"
    os.mkfifo(fifo)
    for read in (
        lambda: list(iter_lines(fifo)),
        lambda: read_text(fifo),
        lambda: file_digest(fifo),
    ):
        with pytest.raises(InputError) as raised, no_hang():
            read()
        assert str(raised.value) == f"{fifo}: is a FIFO, expected a regular file"
    with socket.socket(socket.AF_UNIX) as server:
        listening = tmp_path / "s.sock"
        server.bind(str(listening))
        with pytest.raises(InputError) as raised:
            list(iter_raw_lines(listening))
        assert str(raised.value) == f"{listening}: is a socket, expected a regular file"
    with pytest.raises(InputError) as raised:
        read_text("/dev/null")
    assert str(raised.value) == "/dev/null: is a device, expected a regular file"


_KEYS = st.sampled_from(["a", "b", "c", "a:b", "é"])
_LEAVES = st.one_of(st.integers(-5, 5), st.sampled_from(["x", "y:z", ":", ""]), st.booleans())


@st.composite
def _objects(draw: Any, depth: int = 0) -> str:
    """JSON object text whose keys may repeat, at any level, colons in keys and values."""
    members = []
    for key in draw(st.lists(_KEYS, max_size=4)):
        nested = depth < 2 and draw(st.booleans())
        value = draw(_objects(depth + 1)) if nested else json.dumps(draw(_LEAVES))
        if draw(st.booleans()):
            value = f"[{value}]"
        members.append(f"{json.dumps(key)}{draw(st.sampled_from([':', ' : ']))}{value}")
    return "{" + ", ".join(members) + "}"


@settings(max_examples=500, deadline=None)
@given(_objects())
def test_a_strict_line_read_by_counting_colons_is_the_hooks_reading(text: str) -> None:
    """The line's keys counted against its colons accept only what the hook accepts,
    and read it as the hook does: a repeated key at any depth is still refused."""
    try:
        expected: Any = json.loads(text, object_pairs_hook=textio._unique)
    except textio._DuplicateKeyError as exc:
        expected = ("duplicate", exc.key)
    try:
        got: Any = textio._strict_line(text)
    except textio._DuplicateKeyError as exc:
        got = ("duplicate", exc.key)
    assert got == expected


_LINE_TEXTS = st.one_of(
    _objects(),
    _objects().map(lambda text: f" {text}"),
    _objects().map(lambda text: f"{text} "),
    _objects().map(lambda text: text.replace('"x"', '"\\ud800"').replace('"y:z"', '"\\u00e9"')),
    _objects().map(lambda text: text.replace("1", "NaN").replace("2", "1" * 5000)),
    st.integers(1, 110).map(lambda depth: '{"a": ' + "[" * depth + "]" * depth + "}"),
    st.sampled_from(['{"a": 1}{', '{"a": 1', "[]", "{}", '{"a":"\x01"}', "\ufeff{}", '{"a": 1}x']),
)


@settings(max_examples=1000, deadline=None)
@given(text=_LINE_TEXTS, strict=st.booleans())
def test_a_usual_line_is_read_as_load_json_reads_every_line(text: str, strict: bool) -> None:
    """`parse_json_object` gives what `load_json` gives for any line, strict or not: the
    same object, or the same error (a key twice, nesting too deep, a lone surrogate, a
    number too long, text after the object), whether its own reading took the line or
    left it."""

    def outcome(read: Any) -> Any:
        try:
            value = read()
        except InputError as exc:
            return ("error", str(exc))
        return ("value", value) if isinstance(value, dict) else ("not an object", value)

    expected = outcome(lambda: textio.load_json(text, "f.jsonl", 3, strict=strict))
    got = outcome(lambda: textio.parse_json_object(text, "f.jsonl", 3, strict=strict))
    if expected[0] == "not an object":
        assert got[0] == "error" and "expected a JSON object" in got[1]
    else:
        assert repr(got) == repr(expected)  # repr: NaN is not equal to itself
    usual = textio.usual_json_object(text, strict)
    assert usual is None or ("value", usual) == got or repr(("value", usual)) == repr(got)
