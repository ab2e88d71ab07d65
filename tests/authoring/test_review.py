"""`llm-eval gold review` as a person meets it: in a real terminal of 80×24 (a pty),
with readline, screens cleared, Ctrl-D and Ctrl-C; and driven by a script through a pipe.

The terminal tests wait for the text they expect to appear; the timeout only stops a
test that would otherwise hang.
"""

from __future__ import annotations

import fcntl
import json
import os
import re
import select
import shutil
import signal
import struct
import subprocess
import sys
import termios
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import Any

import pytest
from conftest import Cli

from llm_eval import defaults, output
from llm_eval.commands import review as review_module
from llm_eval.commands.review import CLEAR, MENU, _about, parse_command, review
from llm_eval.corpus import Document

REPO = Path(__file__).resolve().parents[2]
CONFIG = defaults.CONFIG
GOLD_A = "gold/python-docs-A.jsonl"
SIDECAR = "cand.jsonl.review.jsonl"
CANDIDATES = [
    {
        "query_id": "syn-1",
        "query": "How do I check that a condition holds only while debugging?",
        "tags": ["howto"],
        "relevant": {"topic:assert#0": 1},
    },
    {
        "query_id": "syn-2",
        "query": "How do I make a random token in hexadecimal for a password reset link?",
        "tags": ["security"],
        "relevant": {"secrets.token_hex#0": 1},
    },
    {
        "query_id": "syn-3",
        "query": "How do I order a pizza with Python?",
        "tags": [],
        "is_rejection": True,
    },
]
RUN = "import sys; from llm_eval.cli import main; sys.exit(main(sys.argv[1:]))"
ANSI = re.compile(r"\x1b\[[0-9;?]*[A-Za-z]|\x1b[=>]|[\r\x07]")


# --- the pure parts ------------------------------------------------------------------


@pytest.mark.parametrize(
    ("answer", "command"),
    [
        ("a", "accept"),
        ("accept", "accept"),
        ("  Accept ", "accept"),
        ("R", "reject"),
        ("tags", "tags"),
        ("?", "help"),
        ("help", "help"),
        ("u", "undo"),
        ("thowto, builtins", None),  # once ran tags: only the first letter was read
        ("looks good", None),  # once ran labels
        ("acc", None),  # no prefixes
        ("a b", None),
        ("", None),
    ],
)
def test_an_answer_is_a_whole_command_word_or_key(answer: str, command: str | None) -> None:
    assert parse_command(answer) == command


def test_the_menu_fits_80_columns() -> None:
    assert len(MENU) <= 80


@pytest.mark.parametrize(
    ("document", "about"),
    [
        (  # the title is the id's name and the text starts with it: said once, by the id
            Document(
                "random.normalvariate#0",
                "random.normalvariate",
                "random.normalvariate(mu)\n\nNormal.",
            ),
            "(mu) Normal.",
        ),
        (Document("zip#0", "zip", "zipfile is not zip"), "zipfile is not zip"),
        (
            Document("topic:assert#0", "The assert statement", "Assert statements are"),
            "The assert statement: Assert statements are",
        ),
        (Document("x#1", "", "  spaced\n\ntext "), "spaced text"),
        (None, "(not in the corpus)"),
    ],
)
def test_a_document_line_names_its_id_once(document: Document | None, about: str) -> None:
    doc_id = document.doc_id if document else "gone#0"
    assert _about(document, doc_id) == about


# --- in a terminal -------------------------------------------------------------------


@pytest.fixture(scope="module")
def demo(shared_demo: Path, demo_indexes: Path) -> Path:
    """The demo's config and gold set with three candidates and its BM25 index."""
    root = shared_demo
    shutil.copytree(demo_indexes, root / ".llm-eval" / "cache", dirs_exist_ok=True)
    lines = [
        {**c, "tier": "candidate", "source": "synthetic", "reviewed": False} for c in CANDIDATES
    ]
    (root / "cand.jsonl").write_text("".join(json.dumps(c) + "\n" for c in lines))
    piped = _review_piped(root, "q\n")
    assert piped.returncode == 0, piped.stderr
    return root


@pytest.fixture
def project(demo: Path, tmp_path: Path) -> Path:
    shutil.copytree(demo, tmp_path, dirs_exist_ok=True)
    return tmp_path


class Terminal:
    """The command in a real pseudo-terminal of 80×24 that is its controlling terminal."""

    def __init__(
        self, cwd: Path, *args: str, columns: int = 80, rows: int = 24, run: str = RUN
    ) -> None:
        self.master, slave = os.openpty()
        fcntl.ioctl(slave, termios.TIOCSWINSZ, struct.pack("HHHH", rows, columns, 0, 0))
        env = {k: v for k, v in os.environ.items() if k not in ("COLUMNS", "LINES")}
        self.process = subprocess.Popen(
            [sys.executable, "-c", run, "gold", "review", *args],
            cwd=cwd,
            stdin=slave,
            stdout=slave,
            stderr=slave,
            env={**env, "TERM": "xterm"},
            preexec_fn=_controlling_terminal,
        )
        os.close(slave)
        self.output = ""
        self.read_to = 0

    def expect(self, text: str, timeout: float = 60) -> str:
        """Read until `text` appears after what was expected before; the plain text read."""
        while (found := _plain(self.output).find(text, self.read_to)) < 0:
            ready, _, _ = select.select([self.master], [], [], timeout)
            if not ready:
                raise AssertionError(f"{text!r} did not appear; the screen:\n{self.screen()}")
            try:
                chunk = os.read(self.master, 65536)
            except OSError:  # the process is gone and its terminal closed
                chunk = b""
            if not chunk:
                raise AssertionError(f"{text!r} never appeared; it printed:\n{self.screen()}")
            self.output += chunk.decode("utf-8", "replace")
        start, self.read_to = self.read_to, found + len(text)
        return _plain(self.output)[start : self.read_to]

    def answer(self, keys: str, then: str = "\n> ") -> str:
        """Type `keys` (Enter included) and read until `then`: the next prompt."""
        os.write(self.master, keys.encode())
        return self.expect(then)

    def screen(self) -> str:
        """The last screen drawn, as plain text."""
        return _plain(self.output.rsplit(CLEAR, 1)[-1])

    def screens(self) -> list[list[str]]:
        """Each screen drawn, as its lines down to the prompt it ends with."""
        drawn = []
        for part in self.output.split(CLEAR)[1:]:
            screen, _, _ = _plain(part).partition("\n> ")
            drawn.append([*screen.split("\n"), "> "])
        return drawn

    def finish(self, timeout: float = 60) -> tuple[int, str]:
        """The exit code, and the plain text printed after the last expected one."""
        while select.select([self.master], [], [], timeout)[0]:
            try:
                chunk = os.read(self.master, 65536)
            except OSError:  # the process is gone and its terminal closed
                break
            if not chunk:
                break
            self.output += chunk.decode("utf-8", "replace")
        code = self.process.wait(timeout=timeout)
        os.close(self.master)
        return code, _plain(self.output)[self.read_to :]


def _controlling_terminal() -> None:
    os.setsid()
    fcntl.ioctl(0, termios.TIOCSCTTY, 0)


def _plain(text: str) -> str:
    return ANSI.sub("", text).replace("\b", "")


@pytest.fixture
def terminal(project: Path) -> Iterator[Terminal]:
    opened = Terminal(project, "cand.jsonl", "--tier", "A")
    yield opened
    if opened.process.poll() is None:
        opened.process.kill()
        opened.process.wait()


def _lines(path: Path) -> list[dict[str, Any]]:
    return [json.loads(line) for line in path.read_text().splitlines()]


def test_garbage_is_refused_and_words_or_keys_run_commands(
    terminal: Terminal, project: Path
) -> None:
    terminal.expect("Candidate 1 of 3: syn-1")
    terminal.expect("\n> ")
    refused = terminal.answer("thowto, builtins\r")
    assert "'thowto, builtins' is not a command." in refused
    assert "Tags: howto\n" in terminal.screen()  # the tags are as they were
    assert "'looks good' is not a command." in terminal.answer("looks good\r")
    assert "'acc' is not a command." in terminal.answer("acc\r")
    assert "Tags, comma-separated: howto" in terminal.answer("TAGS\r", then="howto")
    terminal.answer("\r")
    helped = terminal.answer("?\r")
    assert "u undo    take back the last accept, reject or skip" in helped
    assert "Accepted syn-1 into gold/python-docs-A.jsonl." in terminal.answer("accept\r")
    assert "Rejected syn-2." in terminal.answer("r\r")
    terminal.answer("q\r", then="Stopped with q.")
    code, _ = terminal.finish()
    assert code == 0
    assert [d["decision"] for d in _lines(project / SIDECAR)] == ["accepted", "rejected"]


def test_edit_tags_and_labels_put_the_current_value_on_the_line(
    terminal: Terminal, project: Path
) -> None:
    terminal.expect("\n> ")
    terminal.answer("e\r", then="Question: ")
    question = CANDIDATES[0]["query"]
    assert terminal.expect(str(question)) == str(question)  # on the line, to edit
    terminal.answer("\x7f" * len("debugging?") + "in debug mode?\r")
    edited = "How do I check that a condition holds only while in debug mode?"
    assert f"Question: {edited}\n" in terminal.screen()
    terminal.answer("t\r", then="Tags, comma-separated: howto")
    terminal.answer(", debugging\r")
    terminal.answer("l\r", then="Relevant, by number (e.g. 1 3): 1")
    terminal.answer(" 3\r")
    labelled = re.findall(r"^\*(\d)\. (\S+)", terminal.screen(), re.MULTILINE)
    assert [n for n, _ in labelled] == ["1", "2"]
    terminal.answer("a\r")
    terminal.answer("q\r", then="Stopped with q.")
    code, said = terminal.finish()
    assert code == 0
    added = _lines(project / GOLD_A)[-1]
    assert added["query"] == edited and added["tags"] == ["howto", "debugging"]
    assert list(added["relevant"]) == [doc for _, doc in labelled]
    assert added["reviewed"] is True and added["tier"] == "A"
    assert "Accepted 1 into gold/python-docs-A.jsonl (1 edited)" in said.replace("\n", " ")


def test_accept_and_reject_confirm_and_undo_takes_them_back(
    terminal: Terminal, project: Path
) -> None:
    gold_before = (project / GOLD_A).read_text()
    terminal.expect("\n> ")
    assert "Nothing to undo" in terminal.answer("u\r")
    said = terminal.answer("a\r")
    assert "Accepted syn-1 into gold/python-docs-A.jsonl. u undoes it." in said
    assert "Candidate 2 of 3: syn-2" in said
    assert _lines(project / GOLD_A)[-1]["query_id"] == "syn-1"
    undone = terminal.answer("undo\r")
    assert "Candidate 1 of 3: syn-1" in undone
    assert "Undone: syn-1 is back; its line is gone from gold/python-docs-A.jsonl." in undone
    assert (project / GOLD_A).read_text() == gold_before
    assert (project / SIDECAR).read_text() == ""
    assert "Rejected syn-1. u undoes it." in terminal.answer("r\r")
    assert "Skipped syn-2: the next run shows it again. u undoes it." in terminal.answer("s\r")
    assert "Undone: syn-2 is back; it is no longer skipped." in terminal.answer("u\r")
    assert "Undone: syn-1 is back; it is no longer rejected." in terminal.answer("u\r")
    assert (project / SIDECAR).read_text() == ""
    assert "Nothing to undo" in terminal.answer("u\r")
    terminal.answer("q\r", then="Stopped with q.")
    code, said = terminal.finish()
    assert code == 0
    assert "Nothing accepted in this session: the gold set is as it was." in said.replace("\n", " ")
    assert (project / GOLD_A).read_text() == gold_before


def test_each_candidate_gets_a_cleared_screen_that_fits_80_by_24(terminal: Terminal) -> None:
    terminal.expect("\n> ")
    terminal.answer("?\r")  # the longest notice
    terminal.answer("a\r")
    terminal.answer("a\r")  # the rejection question
    terminal.answer("q\r", then="Stopped with q.")
    terminal.finish()
    screens = terminal.screens()
    assert len(screens) == 4
    assert [s[0] for s in screens] == [
        "Candidate 1 of 3: syn-1",
        "Candidate 1 of 3: syn-1",
        "Candidate 2 of 3: syn-2",
        "Candidate 3 of 3: syn-3",
    ]
    for screen in screens:
        assert len(screen) <= 24, "\n".join(screen)
        assert max(len(line) for line in screen) <= 80, "\n".join(screen)
        assert screen[-2] == MENU
    # Each document says its id once (it used to be id, title and the text's start);
    # a dotted or prefixed name is not a word its text would use.
    blocks = [b for s in screens for b in re.split(r"\n(?=[* ]\d\. )", "\n".join(s))[1:]]
    names = [b.split()[1].rsplit("#", 1)[0] for b in blocks]
    assert any(name.count(".") > 1 for name in names)
    for name, block in zip(names, blocks, strict=True):
        assert block.count(name) == 1 or not re.search(r"[.:]", name), block
    assert "*1. secrets.token_hex#0  (nbytes=None) Return a random text string" in "\n".join(
        screens[2]
    )


def test_without_readline_edit_shows_the_value_and_enter_keeps_it(project: Path) -> None:
    without = "import sys; sys.modules['readline'] = None; " + RUN
    terminal = Terminal(project, "cand.jsonl", "--tier", "A", run=without)
    terminal.expect("\n> ")
    said = terminal.answer("e\r", then="Question (Enter keeps it): ")
    assert f"Now: {CANDIDATES[0]['query']}" in said
    terminal.answer("\r")
    terminal.answer("t\r", then="Tags, comma-separated (Enter keeps it): ")
    terminal.answer("howto, asserts\r")
    terminal.answer("a\r")
    terminal.answer("q\r", then="Stopped with q.")
    assert terminal.finish()[0] == 0
    added = _lines(project / GOLD_A)[-1]
    assert (added["query"], added["tags"]) == (CANDIDATES[0]["query"], ["howto", "asserts"])


def test_a_short_terminal_still_fits(project: Path) -> None:
    terminal = Terminal(project, "cand.jsonl", "--tier", "A", columns=60, rows=14)
    terminal.expect("\n> ")
    terminal.answer("q\r", then="Stopped with q.")
    terminal.finish()
    [screen] = terminal.screens()
    assert len(screen) <= 14 and max(len(line) for line in screen) <= 60, "\n".join(screen)
    assert any(line.endswith("more; a taller window shows them") for line in screen)


def test_the_input_ending_is_said_and_the_next_command_named(
    terminal: Terminal, project: Path, monkeypatch: pytest.MonkeyPatch, cli: Cli
) -> None:
    terminal.expect("\n> ")
    terminal.answer("a\r")
    os.write(terminal.master, b"\x04")  # Ctrl-D on an empty line
    code, said = terminal.finish()
    assert code == 0
    text = " ".join(said.split())
    assert "The input ended. 1 decision kept in cand.jsonl.review.jsonl." in text
    assert "stopped on request" not in text
    assert (
        "Accepted 1 into gold/python-docs-A.jsonl, rejected 0, skipped 0; 2 not reached: "
        "run the same command to review the rest."
    ) in text
    assert (
        "Next: llm-eval baseline refresh, then commit gold/python-docs-A.jsonl and "
        "gold/baseline.json. Until then `llm-eval gate` stops with exit 3"
    ) in text
    # What the summary says holds: the gate stops until the baseline is refreshed.
    monkeypatch.chdir(project)
    assert cli("gate")[0] == 3
    assert cli("baseline", "refresh")[0] == 0
    assert cli("gate")[0] == 0


class Scripted:
    """A console that answers from a list and raises what it is given (Ctrl-C's
    KeyboardInterrupt: in a pty, a signal can land in another thread of the process)."""

    def __init__(self, *answers: str | BaseException) -> None:
        self.answers = list(answers)
        self.printed: list[str] = []

    def size(self) -> tuple[int, int]:
        return 80, 24

    def show(self, screen: Sequence[str], notice: Sequence[str]) -> None:
        self.printed += [*screen, *notice]

    def say(self, text: str) -> None:
        self.printed.append(text)

    def ask(self, prompt: str, value: str = "") -> str | None:
        answer = self.answers.pop(0)
        if isinstance(answer, BaseException):
            raise answer
        return answer


def test_ctrl_c_ends_the_review_keeping_the_decisions(
    project: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(project)
    console = Scripted("r", KeyboardInterrupt())
    summary = review(Path("cand.jsonl"), CONFIG, tier="A", to=None, console=console)
    assert summary.replace("\n", " ").startswith(
        "Interrupted (Ctrl-C). 1 decision kept in cand.jsonl.review.jsonl. Accepted 0"
    )
    assert [d["decision"] for d in _lines(project / SIDECAR)] == ["rejected"]


def test_answers_that_are_no_command_neither_search_nor_wrap_whole_documents(
    project: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # 1,000 unrecognised answers took 32 s when each searched again, and each screen
    # wrapped every listed document whole to show three lines of it.
    monkeypatch.chdir(project)
    searched: list[str] = []
    wrapped: list[int] = []

    def neighbours_of(config: Any, text: str, k: int) -> tuple[str, ...]:
        searched.append(text)
        return ("topic:assert#0", "long#0")

    def wrap(text: str, width: int, indent: str = "  ") -> list[str]:
        wrapped.append(len(text))
        return output.wrap(text, width, indent)

    monkeypatch.setattr(review_module, "neighbours_of", neighbours_of)
    monkeypatch.setattr(review_module, "wrap", wrap)
    session_documents = review_module.Session.__init__

    def with_a_long_document(self: Any, *args: Any) -> None:
        session_documents(self, *args)
        self.documents["long#0"] = Document("long#0", "Long", "word " * 200_000)

    monkeypatch.setattr(review_module.Session, "__init__", with_a_long_document)
    console = Scripted(*["looks good"] * 50, "q")
    review(Path("cand.jsonl"), CONFIG, tier="A", to=None, console=console)
    assert searched == [CANDIDATES[0]["query"]]
    assert len(wrapped) > 50 and max(wrapped) < 1_000
    assert "    word word" in "\n".join(console.printed)


def test_the_summary_when_every_candidate_is_decided(terminal: Terminal) -> None:
    terminal.expect("\n> ")
    terminal.answer("r\r")
    terminal.answer("r\r")
    os.write(terminal.master, b"r\r")
    code, said = terminal.finish()
    assert code == 0
    assert said.split("Every candidate is decided.\n", 1)[1].startswith(
        "Accepted 0 into gold/python-docs-A.jsonl, rejected 3, skipped 0; 0 not reached."
    )


def test_a_candidate_whose_id_is_in_the_gold_set_is_left_out_and_named(project: Path) -> None:
    """It could never join under that id (accept refuses it): rather than showing it to
    be rejected or skipped, the review names its line and goes on with the others."""
    taken = _lines(project / GOLD_A)[0]
    clash = {**CANDIDATES[1], "query_id": taken["query_id"], "tier": "candidate"}
    with (project / "cand.jsonl").open("a") as candidates:
        candidates.write(json.dumps(clash) + "\n")
    gold_before = (project / GOLD_A).read_text()
    terminal = Terminal(project, "cand.jsonl", "--tier", "A")
    try:
        first = terminal.expect("\n> ")
        assert "4 candidates in cand.jsonl: 0 decided before, 3 to review" in first
        note = (
            "Left out 1 candidate whose id is already in the gold set: "
            f"cand.jsonl:4 ({taken['query_id']}). Give it a new query_id to review it."
        )
        assert note in " ".join(first.split())
        assert "Candidate 1 of 3: syn-1" in first
        for _ in range(2):
            terminal.answer("a\r")
        os.write(terminal.master, b"a\r")
        code, said = terminal.finish()
    finally:
        if terminal.process.poll() is None:
            terminal.process.kill()
    assert code == 0
    assert "Every candidate that can join is decided." in said
    assert note in " ".join(said.split())
    added = (project / GOLD_A).read_text()[len(gold_before) :]
    assert [json.loads(line)["query_id"] for line in added.splitlines()] == [
        "syn-1",
        "syn-2",
        "syn-3",
    ]
    ids = [row["query_id"] for row in _lines(project / GOLD_A)]
    assert len(ids) == len(set(ids))
    assert taken["query_id"] not in {d["query_id"] for d in _lines(project / SIDECAR)}


# --- through a pipe ------------------------------------------------------------------


def _cli(cwd: Path, *args: str, stdin: str = "") -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "llm_eval.cli", *args],
        cwd=cwd,
        input=stdin,
        capture_output=True,
        text=True,
        check=False,
    )


def _review_piped(cwd: Path, stdin: str) -> subprocess.CompletedProcess[str]:
    return _cli(cwd, "gold", "review", "cand.jsonl", "--tier", "A", stdin=stdin)


def test_a_script_drives_it_through_a_pipe(project: Path) -> None:
    script = "thowto, builtins\ne\nHow do I assert only in debug mode?\nt\n\nu\na\n"
    result = _review_piped(project, script)
    assert result.returncode == 0, result.stderr
    out = result.stdout
    assert "\x1b" not in out  # no screen clearing, no colour through a pipe
    assert out.count("Candidate 1 of 3: syn-1") == 2  # again only when it changed
    assert "> thowto, builtins\n'thowto, builtins' is not a command." in out
    assert "Now: How do I check that a condition holds only while debugging?" in out
    assert "Tags, comma-separated (Enter keeps it): \n" in out  # the tags are kept
    assert "Nothing to undo" in out
    assert "Accepted syn-1 into gold/python-docs-A.jsonl. u undoes it." in out
    assert "The input ended. 1 decision kept" in out
    added = _lines(project / GOLD_A)[-1]
    assert (added["query"], added["tags"]) == ("How do I assert only in debug mode?", ["howto"])


def test_kill_leaves_the_files_whole(terminal: Terminal, project: Path) -> None:
    terminal.expect("\n> ")
    terminal.answer("a\r")
    terminal.process.send_signal(signal.SIGKILL)
    terminal.process.wait()
    assert _lines(project / SIDECAR) == [
        {"query_id": "syn-1", "decision": "accepted", "to": "gold/python-docs-A.jsonl"}
    ]
    again = _review_piped(project, "q\n")
    assert "1 decided before, 2 to review" in again.stdout.replace("\n", " ")


@pytest.mark.skipif(not Path("/proc/self/task").is_dir(), reason="reads /proc (Linux)")
def test_ctrl_c_reaches_the_prompt_not_a_worker_thread(terminal: Terminal) -> None:
    """SIGINT goes to any thread that does not block it; numpy's BLAS workers would take
    it and the prompt would only see Ctrl-C after the next key. At the prompt, every
    thread but the main one blocks it. (What Ctrl-C then does is
    `test_ctrl_c_ends_the_review_keeping_the_decisions`.)"""
    terminal.expect("\n> ")
    pid = terminal.process.pid
    tasks = list(Path(f"/proc/{pid}/task").iterdir())
    for task in tasks:
        status = (task / "status").read_text()
        blocked = int(re.search(r"^SigBlk:\s*([0-9a-f]+)$", status, re.M)[1], 16)  # type: ignore[index]
        sigint_blocked = bool(blocked & (1 << (signal.SIGINT - 1)))
        assert sigint_blocked == (int(task.name) != pid), task.name
