"""`llm-eval gold review CANDIDATES --tier A`: a person accepts, edits or rejects each
drafted question before it may gate.

For each candidate not decided yet the terminal shows the question, its tags, the
chunk it was written from (its labels) and the top 5 BM25 results, then asks:

    [a]ccept  [e]dit  [t]ags  [l]abels  [r]eject  [s]kip  [q]uit

Accepting appends the question, with `reviewed: true`, to the gold file of the chosen
tier (or `--to FILE`), atomically. Every decision is appended to a sidecar file
(`CANDIDATES.review.jsonl`), so a review stopped at any point (`q`, Ctrl-D, a closed
terminal) resumes where it stopped. Input is read line by line, so a script can drive
it (`printf 'a\\nr\\n' | llm-eval gold review …`).
"""

from __future__ import annotations

import json
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from llm_eval.commands.gold_growth import neighbours_of
from llm_eval.config import EvalConfig
from llm_eval.config_io import load_config
from llm_eval.corpus import Document, iter_corpus
from llm_eval.errors import InputError
from llm_eval.gold import GoldQuery
from llm_eval.gold_io import iter_gold_file, load_gold
from llm_eval.output import plural, wrap
from llm_eval.textio import append_atomic, iter_lines, parse_json_object

SHOWN = 5
SNIPPET = 160
MENU = "[a]ccept  [e]dit  [t]ags  [l]abels  [r]eject  [s]kip  [q]uit"


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
    files = [Path(s.path) for s in config.gold if s.tier == tier]
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
    listed: list[str] = field(default_factory=list)
    """The documents numbered on screen; it only grows, so numbers stay put."""

    @property
    def question(self) -> str:
        return str(self.record["query"])


def _snippet(document: Document | None, doc_id: str) -> str:
    if document is None:
        return f"{doc_id}  (not in the corpus)"
    text = " ".join(document.text.split())
    text = text if len(text) <= SNIPPET else text[: SNIPPET - 1] + "…"
    title = f"{document.title}: " if document.title else ""
    return f"{doc_id}  {title}{text}"


def review(
    candidates: Path,
    config_path: Path,
    *,
    tier: str | None,
    to: Path | None,
    ask: Callable[[str], str | None],
    say: Callable[[str], None],
    width: int = 80,
) -> str:
    """Go through the undecided candidates; the closing summary.

    `ask(prompt)` returns the line typed, or None when the input has ended."""
    config = load_config(config_path)
    if to is None and tier is None:
        raise InputError("say where accepted questions go: --tier TIER or --to FILE")
    target = to if to is not None else gold_file_of(config, str(tier))
    into_tier = tier or _tier_of(config, target)
    if config.corpus is None:
        raise InputError("review shows the corpus's passages: add `corpus:`", path=config.path)
    pending_records = _records(candidates)
    sidecar = decisions_path(candidates)
    decided = _decided(sidecar)
    present = {q.query_id for q in load_gold(config.gold).queries}
    if target.is_file():
        present |= {q.query_id for q in iter_gold_file(target, into_tier)}
    pending = [(q, r) for q, r in pending_records if q.query_id not in decided]
    documents = {d.doc_id: d for d in iter_corpus(config.corpus)}
    counts = {"accepted": 0, "rejected": 0, "skipped": 0}
    opening = (
        f"{plural(len(pending_records), 'candidate', 'candidates')} in {candidates}: "
        f"{len(decided)} decided before, {len(pending)} to review; accepted ones go to "
        f"{target} (tier {into_tier})."
    )
    say("\n".join(wrap(opening, width, "")))
    stopped = False
    for number, (query, record) in enumerate(pending, 1):
        draft = Draft(dict(record), query, dict(query.relevant))
        outcome = _one(draft, number, len(pending), config, documents, ask, say, width)
        if outcome == "quit":
            stopped = True
            break
        if outcome == "skip":
            counts["skipped"] += 1
            continue
        if outcome == "accept":
            if draft.record["query_id"] in present:
                raise InputError(
                    f"query_id {draft.record['query_id']!r} is already in the gold set",
                    path=candidates,
                )
            _append(target, _accepted(draft, into_tier))
            present.add(draft.record["query_id"])
        decision = {"accept": "accepted", "reject": "rejected"}[outcome]
        counts[decision] += 1
        _append(sidecar, {"query_id": query.query_id, "decision": decision, "to": str(target)})
    left = len(pending) - sum(counts.values())
    summary = (
        f"Accepted {counts['accepted']} into {target}, rejected {counts['rejected']}, "
        f"skipped {counts['skipped']}; {left} not reached"
        + ("" if not (left or counts["skipped"]) else " (run the same command to go on)")
        + ("." if not stopped else ", stopped on request.")
    )
    return "\n".join(wrap(summary, width, ""))


def _tier_of(config: EvalConfig, target: Path) -> str:
    for source in config.gold:
        if Path(source.path) == target and source.tier:
            return source.tier
    raise InputError(f"{target} is not a gold file of the config with a tier; add --tier")


def _records(path: Path) -> list[tuple[GoldQuery, dict[str, Any]]]:
    """The candidates, checked as gold lines, with their raw records."""
    queries = list(iter_gold_file(path, "candidate"))
    records = [parse_json_object(text, path, line) for line, text in iter_lines(path)]
    return list(zip(queries, records, strict=True))


def _one(
    draft: Draft,
    number: int,
    total: int,
    config: EvalConfig,
    documents: dict[str, Document],
    ask: Callable[[str], str | None],
    say: Callable[[str], None],
    width: int,
) -> str:
    """Show one candidate and act on answers until it is decided, skipped or quit."""
    while True:
        say("\n".join(_show(draft, number, total, config, documents, width)))
        answer = ask("> ")
        if answer is None:
            return "quit"
        choice = answer.strip().lower()[:1]
        if choice == "a":
            if not draft.labels and not draft.query.is_rejection:
                say("It has no relevant document: label one ([l]) or reject it.")
                continue
            return "accept"
        if choice == "r":
            return "reject"
        if choice == "s":
            return "skip"
        if choice == "q":
            return "quit"
        if choice == "e":
            text = ask("Question: ")
            if text is None:
                return "quit"
            if text.strip():
                draft.record["query"] = " ".join(text.split())
        elif choice == "t":
            text = ask("Tags, comma-separated (empty: none): ")
            if text is None:
                return "quit"
            draft.record["tags"] = [t.strip() for t in text.split(",") if t.strip()]
        elif choice == "l":
            text = ask("Relevant: numbers from the list above (e.g. 1 3): ")
            if text is None:
                return "quit"
            picked = _picked(text, draft.listed)
            if picked is None:
                say(f"Give numbers from 1 to {len(draft.listed)}, separated by spaces.")
            else:
                draft.labels = {d: draft.labels.get(d, 1) for d in picked}
        else:
            say(MENU)


def _show(
    draft: Draft,
    number: int,
    total: int,
    config: EvalConfig,
    documents: dict[str, Document],
    width: int,
) -> list[str]:
    """The screen of one candidate; `draft.listed` grows by what it numbers."""
    top = neighbours_of(config, draft.question, SHOWN)
    draft.listed[:] = list(dict.fromkeys([*draft.listed, *draft.labels, *top]))
    listed = draft.listed
    tags = ", ".join(draft.record.get("tags") or []) or "none"
    kind = "rejection question (nothing in the corpus should answer it)"
    lines = [
        "",
        f"Candidate {number} of {total}: {draft.record['query_id']}",
        *wrap(f"Question: {draft.question}", width, "  "),
        f"Tags: {tags}" + ("" if draft.labels or not draft.query.is_rejection else f"; {kind}"),
        "Documents (* = labelled relevant; the rest are BM25's top results):",
    ]
    for i, doc_id in enumerate(listed, 1):
        mark = "*" if doc_id in draft.labels else " "
        lines += wrap(f"{mark}{i}. {_snippet(documents.get(doc_id), doc_id)}", width, "     ")
    lines.append(MENU)
    return lines


def _picked(text: str, listed: Sequence[str]) -> list[str] | None:
    picked = []
    for part in text.replace(",", " ").split():
        if not part.isdigit() or not 1 <= int(part) <= len(listed):
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


def _append(path: Path, record: dict[str, Any]) -> None:
    """One JSON line added to the end of a file, atomically (the file is rewritten)."""
    append_atomic(path, json.dumps(record, ensure_ascii=False) + "\n")
