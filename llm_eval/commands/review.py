"""`llm-eval gold review CANDIDATES --tier A`: a person accepts, edits or rejects each
drafted question before it may gate.

Each candidate not decided yet gets a screen of its own, fitted to the terminal (80×24
is enough): the question, its tags, the documents labelled relevant (marked `*`) and
BM25's top 5 for the question, numbered, each id shown once. An answer is a whole
command word or its single key, in any case:

    a accept  r reject  e edit  t tags  l labels  s skip  u undo  q quit  ? help

Anything else, a prefix included, is refused with a hint: "looks good" must never run
`labels`, nor "thowto, builtins" `tags`. `edit`, `tags` and `labels` put the current
value on the input line to change (readline, on a terminal; elsewhere the value is
shown and an empty answer keeps it).

A candidate whose query_id the gold set already has could never join it under that
id: it is left out, named with its file and line in the first notice and the summary.

Accepting appends the question, with `reviewed: true`, to the gold file of the chosen
tier (or `--to FILE`); each accept and reject is appended to a sidecar
(`CANDIDATES.review.jsonl`). The two lines are written together, both or neither
(`textio.write_together`), so a review stopped at any point resumes where it
stopped. `undo` takes back the session's last accept, reject or skip, its lines in
both files included, and shows that candidate again. The closing summary
says how the review ended (all done, `q`, the input ended, Ctrl-C), counts the
decisions and names the next command: after an accept, `llm-eval baseline refresh`,
since the gate refuses a gold set that differs from its baseline (exit 3).

Input is read line by line, so a script can drive it
(`printf 'a\\nr\\n' | llm-eval gold review …`); the screen is cleared only on a terminal.
"""

from __future__ import annotations

import json
import re
import shutil
import sys
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Protocol

from llm_eval import defaults
from llm_eval.authoring.neighbours import neighbours_of
from llm_eval.config import EvalConfig
from llm_eval.config_io import load_config
from llm_eval.corpus import Document
from llm_eval.corpus_io import iter_corpus
from llm_eval.errors import InputError
from llm_eval.gold import GoldQuery
from llm_eval.gold_io import iter_gold_file, load_gold
from llm_eval.output import wrap
from llm_eval.textio import (
    append_together,
    encodable,
    iter_lines,
    parse_json_object,
    read_text,
    write_together,
)
from llm_eval.wording.english import plural

SHOWN = 5
"""BM25's results shown under the labelled documents."""
MOST_LINES = 3
"""Lines a document gets at most, when the screen has room."""
CLEAR = "\x1b[H\x1b[2J"
"""Cursor home, erase the screen (ANSI)."""


@dataclass(frozen=True, slots=True)
class Command:
    """One answer the prompt understands: its word or its key."""

    name: str
    key: str
    does: str


COMMANDS = (
    Command("accept", "a", "add it to the gold file with reviewed: true"),
    Command("reject", "r", "leave it out of the gold set"),
    Command("edit", "e", "change the question (it is put on the input line)"),
    Command("tags", "t", "change the tags, comma-separated"),
    Command("labels", "l", "which listed documents are relevant, by number"),
    Command("skip", "s", "decide later: the next run shows it again"),
    Command("undo", "u", "take back the last accept, reject or skip"),
    Command("quit", "q", "stop; the decisions made are kept"),
    Command("help", "?", "this list"),
)
_NAMES = {c.name: c.name for c in COMMANDS} | {c.key: c.name for c in COMMANDS}
MENU = "  ".join(f"{c.key} {c.name}" for c in COMMANDS)
HELP = [f"{c.key} {c.name:<7} {c.does}" for c in COMMANDS]


def parse_command(answer: str) -> str | None:
    """The command a whole answer names, by its word or its key in any case; None for
    anything else. No prefixes: an answer that is not exactly a command runs nothing."""
    return _NAMES.get(answer.strip().lower())


class Console(Protocol):
    """The review's screen and keyboard."""

    def size(self) -> tuple[int, int]:
        """Columns and rows to fit a screen in."""

    def show(self, screen: Sequence[str], notice: Sequence[str]) -> None:
        """A candidate's screen, then the notice about the last answer."""

    def say(self, text: str) -> None:
        """A line below the screen."""

    def ask(self, prompt: str, value: str = "") -> str | None:
        """The line typed after `prompt`, starting from `value` to edit (an empty answer
        keeps it where the line cannot be edited); None when the input has ended."""


class TerminalConsole:
    """stdin and stdout: on a terminal, screens cleared and values edited in place with
    readline; piped, plain lines with each screen printed once and each answer echoed."""

    def __init__(self) -> None:
        # A line that is not UTF-8 comes through (as lone surrogates), to be refused and
        # asked again, rather than failing the read and losing the input after it.
        reconfigure = getattr(sys.stdin, "reconfigure", None)
        if reconfigure is not None:
            reconfigure(errors="surrogateescape")
        self.clears = sys.stdout.isatty()
        self.editing = self.clears and sys.stdin.isatty() and _readline() is not None
        self._last: list[str] = []

    def size(self) -> tuple[int, int]:
        columns, rows = shutil.get_terminal_size((80, 24))
        return columns, rows

    def show(self, screen: Sequence[str], notice: Sequence[str]) -> None:
        if self.clears:
            lines, start = [*screen, *notice], CLEAR
        else:
            lines, start = [*([] if screen == self._last else ["", *screen]), *notice], ""
        sys.stdout.write(start + "".join(f"{line}\n" for line in lines))
        sys.stdout.flush()
        self._last = list(screen)

    def say(self, text: str) -> None:
        sys.stdout.write(text + "\n")
        sys.stdout.flush()

    def ask(self, prompt: str, value: str = "") -> str | None:
        if value and not self.editing:
            self.say(f"Now: {value}")
            prompt = f"{prompt.rstrip(': ')} (Enter keeps it): "
        readline = _readline() if self.editing and value else None
        if readline is not None:
            readline.set_startup_hook(lambda: readline.insert_text(value))
        try:
            answer = input(prompt)
        except EOFError:
            return None
        finally:
            if readline is not None:
                readline.set_startup_hook()
        if not sys.stdin.isatty():
            # What a script answered, so that its transcript reads (bytes that are not
            # UTF-8 shown escaped: they are refused next).
            self.say(answer.encode("utf-8", "backslashreplace").decode("utf-8"))
        return answer if answer.strip() or self.editing else value or answer


def _readline() -> Any:
    """The readline module, where Python has one (not on Windows)."""
    try:
        import readline
    except ImportError:  # pragma: no cover - platforms without readline
        return None
    return readline


def decisions_path(candidates: Path) -> Path:
    """The sidecar that records each decision."""
    return candidates.with_name(candidates.name + ".review.jsonl")


def _decided(path: Path) -> dict[str, str]:
    if not path.is_file():
        return {}
    found = {}
    for line, text in iter_lines(path):
        record = parse_json_object(text, path, line)
        found[str(record.get("query_id"))] = str(record.get("decision"))
    return found


def gold_file_of(config: EvalConfig, tier: str) -> Path:
    """The one gold file of the config that holds tier `tier`."""
    files = [
        Path(s.path) for s in config.gold if s.tier == tier and s.split is None and s.qrels is None
    ]
    if len(files) != 1:
        held = ", ".join(sorted({str(s.tier) for s in config.gold}))
        reason = "no gold file" if not files else f"{len(files)} gold files"
        raise InputError(
            f"{reason} of the config holds tier {tier!r} (tiers: {held}); name the file with --to",
            path=config.path,
        )
    return files[0]


@dataclass
class Draft:
    """A candidate as the reviewer changes it."""

    record: dict[str, Any]
    query: GoldQuery
    labels: dict[str, int] = field(default_factory=dict)
    top: tuple[str, ...] = ()
    """BM25's top results for `top_of`, the question when they were found."""
    top_of: str = ""

    @property
    def question(self) -> str:
        return str(self.record["query"])

    @property
    def listed(self) -> list[str]:
        """The documents on screen, numbered from 1: the labelled ones, then BM25's."""
        return list(dict.fromkeys([*self.labels, *self.top]))

    @property
    def edited(self) -> bool:
        """The question, its tags or its labels differ from the candidate's."""
        tags = list(self.query.tags)
        return (self.question, self.record.get("tags") or [], self.labels) != (
            self.query.query,
            tags,
            dict(self.query.relevant),
        )


@dataclass(frozen=True, slots=True)
class Decision:
    """What the session did with one candidate, and the lines it wrote, for undo."""

    index: int
    draft: Draft
    outcome: str
    """accepted, rejected or skipped."""
    sidecar_line: str | None
    gold_line: str | None


class _Ended(Exception):
    """The reviewer stopped: `q`, the input ended, or Ctrl-C."""

    def __init__(self, how: str) -> None:
        super().__init__(how)
        self.how = how


ENDINGS = {
    "done": "Every candidate is decided.",
    "quit": "Stopped with q.",
    "eof": "The input ended.",
    "interrupt": "Interrupted (Ctrl-C).",
}


def review(
    candidates: Path,
    config_path: Path,
    *,
    tier: str | None,
    to: Path | None,
    console: Console,
) -> str:
    """Go through the undecided candidates; the closing summary."""
    config = load_config(config_path)
    if to is None and tier is None:
        raise InputError("say where accepted questions go: --tier TIER or --to FILE")
    target = to if to is not None else gold_file_of(config, str(tier))
    into_tier = tier or _tier_of(config, target)
    if config.corpus is None:
        raise InputError("review shows the corpus's passages: add `corpus:`", path=config.path)
    session = Session(config, candidates, target, into_tier, console)
    try:
        session.run()
        how = "done"
    except _Ended as ended:
        how = ended.how
    width, _ = console.size()
    return "\n".join(
        line for text in session.summary(how, config_path) for line in wrap(text, width, "")
    )


class Session:
    """One sitting of the review: the candidates left, the decisions made, the screen."""

    def __init__(
        self, config: EvalConfig, candidates: Path, target: Path, tier: str, console: Console
    ) -> None:
        assert config.corpus is not None
        self.config = config
        self.target = target
        self.tier = tier
        self.console = console
        self.sidecar = decisions_path(candidates)
        decided = _decided(self.sidecar)
        records = _records(candidates)
        self.present = {q.query_id for q in load_gold(config.gold).queries}
        if target.is_file():
            self.present |= {q.query_id for q in iter_gold_file(target, tier)}
        undecided = [(n, q, r) for n, q, r in records if q.query_id not in decided]
        # A candidate whose id the gold set has can never join it under that id: it is
        # left out, named with its line, rather than shown to be rejected or skipped.
        self.taken = [
            f"{candidates}:{n} ({q.query_id})"
            for n, q, _ in undecided
            if q.query_id in self.present
        ]
        self.pending = [(q, r) for _, q, r in undecided if q.query_id not in self.present]
        self.documents = {d.doc_id: d for d in iter_corpus(config.corpus)}
        self.history: list[Decision] = []
        self.notice = [
            f"{plural(len(records), 'candidate', 'candidates')} in {candidates}: "
            f"{len(decided)} decided before, {len(self.pending)} to review; accepted ones "
            f"go to {target} (tier {tier}).",
            *self._taken_note(),
        ]

    def _taken_note(self) -> list[str]:
        """The candidates left out because their id is in the gold set, in one line."""
        if not self.taken:
            return []
        named = ", ".join(self.taken[:3]) + (
            f" and {len(self.taken) - 3} more" if len(self.taken) > 3 else ""
        )
        return [
            f"Left out {plural(len(self.taken), 'candidate', 'candidates')} whose id is "
            f"already in the gold set: {named}. Give "
            f"{'it' if len(self.taken) == 1 else 'each'} a new query_id to review "
            f"{'it' if len(self.taken) == 1 else 'them'}."
        ]

    def run(self) -> None:
        """Show each candidate and act on answers, to the end or until `_Ended`."""
        index, draft = 0, None
        while index < len(self.pending):
            draft = draft or self._draft(index)
            command = self._command(draft, index)
            if command == "undo":
                if undone := self._undo():
                    index, draft = undone.index, undone.draft
                continue
            outcome = _ACTIONS[command](self, draft)
            if outcome is not None:
                self._decide(index, draft, outcome)
                index, draft = index + 1, None

    def _draft(self, index: int) -> Draft:
        query, record = self.pending[index]
        return Draft(dict(record), query, dict(query.relevant))

    def _command(self, draft: Draft, index: int) -> str:
        """Ask until the answer is a command; `quit` ends the session."""
        while True:
            self._show(draft, index)
            answer = self._ask("> ")
            command = parse_command(answer)
            if command == "quit":
                raise _Ended("quit")
            if command == "help":
                self.notice = HELP
            elif command is None:
                shown = answer.strip()
                self.notice = [
                    (f"{shown!r} is not a command. " if shown else "")
                    + "Type a word or its key: a accept, r reject, e edit, ? help."
                ]
            else:
                self.notice = []
                return command

    def _ask(self, prompt: str, value: str = "") -> str:
        """The line typed; asked again while it is not UTF-8 text, which no file can hold."""
        while True:
            try:
                answer = self.console.ask(prompt, value)
            except KeyboardInterrupt:
                self.console.say("")
                raise _Ended("interrupt") from None
            if answer is None:
                self.console.say("")
                raise _Ended("eof")
            if encodable(answer):
                return answer
            self.console.say(
                "That line is not UTF-8 text (check the terminal's encoding): type it again."
            )

    def _show(self, draft: Draft, index: int) -> None:
        if draft.top_of != draft.question:
            draft.top = neighbours_of(self.config, draft.question, SHOWN)
            draft.top_of = draft.question
        width, height = self.console.size()
        notice = [line for text in self.notice for line in wrap(text, width, "  ")]
        head = _head(draft, index + 1, len(self.pending), width)
        menu = wrap(MENU, width, "")
        rows = height - len(head) - 1 - len(notice) - len(menu) - 1  # a blank, the prompt
        documents = _documents(draft, self.documents, width, rows)
        self.console.show([*head, *documents, ""], [*notice, *menu])

    # --- actions: each returns the decision, or None to stay on the candidate ----------

    def accept(self, draft: Draft) -> str | None:
        if not draft.labels and not draft.query.is_rejection:
            self.notice = ["It has no relevant document: label one (l) or reject it (r)."]
            return None
        if draft.record["query_id"] in self.present:
            self.notice = [
                f"{draft.record['query_id']} is already in the gold set: reject or skip it."
            ]
            return None
        return "accepted"

    def reject(self, draft: Draft) -> str | None:
        return "rejected"

    def skip(self, draft: Draft) -> str | None:
        return "skipped"

    def edit(self, draft: Draft) -> str | None:
        text = " ".join(self._ask("Question: ", draft.question).split())
        if text and text != draft.question:
            draft.record["query"] = text
        return None

    def tags(self, draft: Draft) -> str | None:
        now = ", ".join(draft.record.get("tags") or [])
        text = self._ask("Tags, comma-separated: ", now)
        draft.record["tags"] = list(dict.fromkeys(t.strip() for t in text.split(",") if t.strip()))
        return None

    def labels(self, draft: Draft) -> str | None:
        listed = draft.listed
        now = " ".join(str(number) for number in range(1, len(draft.labels) + 1))
        picked = _picked(self._ask("Relevant, by number (e.g. 1 3): ", now), listed)
        if picked is None:
            self.notice = [f"Give numbers from 1 to {len(listed)}, separated by spaces."]
        else:
            draft.labels = {d: draft.labels.get(d, 1) for d in picked}
        return None

    # --- decisions ------------------------------------------------------------------------

    def _decide(self, index: int, draft: Draft, outcome: str) -> None:
        query_id = draft.record["query_id"]
        gold_line = sidecar_line = None
        if outcome == "accepted":
            gold_line = _json_line(_accepted(draft, self.tier))
        if outcome != "skipped":
            record = {"query_id": query_id, "decision": outcome, "to": str(self.target)}
            sidecar_line = _json_line(record)
        # Both lines or neither: a gold line without its decision would be offered again
        # and refused as already present; the gold line goes first, as the harmless one.
        lines = [(self.target, gold_line), (self.sidecar, sidecar_line)]
        append_together([(path, line) for path, line in lines if line is not None])
        if gold_line is not None:
            self.present.add(query_id)
        self.history.append(Decision(index, draft, outcome, sidecar_line, gold_line))
        confirmed = {
            "accepted": f"Accepted {query_id} into {self.target}.",
            "rejected": f"Rejected {query_id}.",
            "skipped": f"Skipped {query_id}: the next run shows it again.",
        }
        self.notice = [f"{confirmed[outcome]} u undoes it."]

    def _undo(self) -> Decision | None:
        """Take back the last decision of this session, in the files too."""
        if not self.history:
            self.notice = ["Nothing to undo: no decision made in this session yet."]
            return None
        last = self.history[-1]
        query_id = last.draft.record["query_id"]
        # The reverse of the order written, so a stop in between leaves what a stop
        # between the two writes of the decision would.
        changes = [(self.sidecar, last.sidecar_line), (self.target, last.gold_line)]
        rewritten = [(path, _without_line(path, line)) for path, line in changes if line]
        if any(text is None for _, text in rewritten):
            self.notice = [f"Cannot undo: {query_id}'s line was changed by someone else."]
            return None
        write_together([(path, text or "") for path, text in rewritten])
        self.history.pop()
        self.present.discard(query_id)
        taken_back = {
            "accepted": f"its line is gone from {self.target}",
            "rejected": "it is no longer rejected",
            "skipped": "it is no longer skipped",
        }
        self.notice = [f"Undone: {query_id} is back; {taken_back[last.outcome]}."]
        return last

    def summary(self, how: str, config_path: Path) -> list[str]:
        """How the review ended, what was decided, and what to run next."""
        count = {o: sum(d.outcome == o for d in self.history) for o in _OUTCOMES}
        edited = sum(d.outcome == "accepted" and d.draft.edited for d in self.history)
        kept = count["accepted"] + count["rejected"]
        left = len(self.pending) - len(self.history)
        ending = (
            ENDINGS[how]
            if how != "done" or not self.taken
            else "Every candidate that can join is decided."
        )
        if how != "done":
            ending += f" {plural(kept, 'decision', 'decisions')} kept in {self.sidecar}."
        go_on = "run the same command to review the rest" if left or count["skipped"] else ""
        decided = (
            f"Accepted {count['accepted']} into {self.target}"
            + (f" ({edited} edited)" if edited else "")
            + f", rejected {count['rejected']}, skipped {count['skipped']}; {left} not reached"
            + (f": {go_on}." if go_on else ".")
        )
        return [ending, decided, *self._taken_note(), self._next(count["accepted"], config_path)]

    def _next(self, accepted: int, config_path: Path) -> str:
        if not accepted:
            return "Nothing accepted in this session: the gold set is as it was."
        if self.target not in {Path(s.path) for s in self.config.gold}:
            return f"{self.target} is not a gold file of the config: nothing gates on it yet."
        option = "" if config_path == defaults.CONFIG else f" --config {config_path}"
        return (
            f"Next: llm-eval baseline refresh{option}, then commit {self.target} and "
            f"{self.config.baseline}. Until then `llm-eval gate{option}` stops with exit 3: the "
            "gold set differs from the baseline's."
        )


_OUTCOMES = ("accepted", "rejected", "skipped")
_ACTIONS: dict[str, Callable[[Session, Draft], str | None]] = {
    "accept": Session.accept,
    "reject": Session.reject,
    "skip": Session.skip,
    "edit": Session.edit,
    "tags": Session.tags,
    "labels": Session.labels,
}


def _tier_of(config: EvalConfig, target: Path) -> str:
    for source in config.gold:
        if Path(source.path) == target and source.tier:
            return source.tier
    raise InputError(f"{target} is not a gold file of the config with a tier; add --tier")


def _records(path: Path) -> list[tuple[int, GoldQuery, dict[str, Any]]]:
    """The candidates, checked as gold lines, with their line numbers and raw records; a
    query id on two lines is an error naming both (one decision would stand for two)."""
    queries = list(iter_gold_file(path, "candidate"))
    records = [(line, parse_json_object(text, path, line)) for line, text in iter_lines(path)]
    first: dict[str, int] = {}
    for query, (line, _) in zip(queries, records, strict=True):
        if query.query_id in first:
            raise InputError(
                f"duplicate query_id {query.query_id!r} (first at line {first[query.query_id]})",
                path=path,
                line=line,
                key="query_id",
            )
        first[query.query_id] = line
    return [(line, q, r) for q, (line, r) in zip(queries, records, strict=True)]


def _head(draft: Draft, number: int, total: int, width: int) -> list[str]:
    """The lines above the documents."""
    tags = ", ".join(draft.record.get("tags") or []) or "none"
    rejection = draft.query.is_rejection and not draft.labels
    kind = "; a rejection question (nothing in the corpus should answer it)" if rejection else ""
    return [
        f"Candidate {number} of {total}: {draft.record['query_id']}",
        *wrap(f"Question: {draft.question}", width, "  "),
        *wrap(f"Tags: {tags}{kind}", width, "  "),
        *wrap("Documents (* = labelled relevant; the others are BM25's top 5):", width, "  "),
    ]


def _documents(draft: Draft, documents: dict[str, Document], width: int, rows: int) -> list[str]:
    """The labelled documents and BM25's top results in `rows` lines at most, numbered as
    listed: each gets the same share (up to `MOST_LINES`), at least its first line."""
    shown = draft.listed
    if not shown:
        return ["  (none: BM25 finds nothing for the question)"]
    fit = shown if rows >= len(shown) else shown[: max(rows - 1, 0)]
    room = rows if fit == shown else rows - 1  # the last row says how many are left out
    each = max(1, min(MOST_LINES, room // max(len(fit), 1)))
    lines = []
    for doc_id in fit:
        mark = "*" if doc_id in draft.labels else " "
        about = _about(documents.get(doc_id), doc_id)
        # Only the lines shown are wrapped, and one more to tell that text was left out:
        # wrapping whole documents took most of the time of each screen drawn.
        text = f"{mark}{shown.index(doc_id) + 1}. {doc_id}  {about}"[: (each + 2) * width]
        lines += _clipped(wrap(text, width, "    "), each, width)
    more = len(shown) - len(fit)
    return lines + ([f"  … {more} more; a taller window shows them"] if more else [])


def _about(document: Document | None, doc_id: str) -> str:
    """What the line says after the document's id, without saying the id again: the
    title when it is more than the id, and the text with a leading repeat of the id's
    name (`difflib.SequenceMatcher(…)`) dropped."""
    if document is None:
        return "(not in the corpus)"
    name = doc_id.rsplit("#", 1)[0]
    title = " ".join(document.title.split())
    text = " ".join(document.text.split())
    if re.match(re.escape(name) + r"(?!\w)", text):
        text = text[len(name) :].lstrip(" :")
    if title in ("", name, doc_id):
        return text
    return f"{title}: {text}" if text else title


def _clipped(lines: list[str], most: int, width: int) -> list[str]:
    """The first `most` lines; an ellipsis at the end when text was left out."""
    if len(lines) <= most:
        return lines
    kept = lines[:most]
    kept[-1] = kept[-1][: width - 1].rstrip() + "…"
    return kept


def _picked(text: str, listed: Sequence[str]) -> list[str] | None:
    picked = []
    for part in text.replace(",", " ").split():
        # ASCII digits only: "²" and "٣" pass str.isdigit, and int() refuses the first.
        if not re.fullmatch("[0-9]+", part) or not 1 <= int(part) <= len(listed):
            return None
        picked.append(listed[int(part) - 1])
    return list(dict.fromkeys(picked))


def _accepted(draft: Draft, tier: str) -> dict[str, Any]:
    record = dict(draft.record)
    record["tier"] = tier
    record["reviewed"] = True
    if draft.labels:
        record["relevant"] = dict(draft.labels)
        record.pop("is_rejection", None)
    else:
        record.pop("relevant", None)
        record["is_rejection"] = True
    return record


def _json_line(record: dict[str, Any]) -> str:
    return json.dumps(record, ensure_ascii=False) + "\n"


def _without_line(path: Path, line: str) -> str | None:
    """The file's text without the last copy of `line`; None when it is not there."""
    lines = read_text(path).splitlines(keepends=True) if path.is_file() else []
    for i in range(len(lines) - 1, -1, -1):
        if lines[i].rstrip("\r\n") == line.rstrip("\n"):
            return "".join(lines[:i] + lines[i + 1 :])
    return None
