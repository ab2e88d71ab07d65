"""`llm-eval gold coverage` and `llm-eval gold plan`: what the gold set covers of the
corpus, and how many questions each gated scope needs and where to write them.

Neither needs a baseline. Coverage lists every label naming a document the corpus
lacks (which `gold validate` stops at, first one only).
"""

from __future__ import annotations

import functools
import json
import math
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from llm_eval.config import EvalConfig
from llm_eval.corpus import Document, iter_corpus
from llm_eval.coverage import Coverage, SectionCoverage, coverage
from llm_eval.english import listed, plural
from llm_eval.errors import InputError
from llm_eval.gold import GoldQuery
from llm_eval.gold_plan import Need, plan
from llm_eval.inputs import Inputs
from llm_eval.metrics import parse_metric
from llm_eval.output import render_table, wrap
from llm_eval.pipeline import load_inputs
from llm_eval.retrievers import Retriever, RetrieverContext, retriever_kind
from llm_eval.textio import write_atomic
from llm_eval.wording import delta

NEIGHBOURS = 10
"""A document is near a question when it is among the question's top 10 by BM25."""


def corpus_documents(config: EvalConfig) -> list[Document]:
    """The configured corpus; InputError without one."""
    if config.corpus is None:
        raise InputError(
            "coverage needs the corpus: add `corpus:` (BEIR JSONL) to the config",
            path=config.path,
        )
    return list(iter_corpus(config.corpus))


@functools.lru_cache(maxsize=4)
def _default_bm25(corpus: Path, cache: Path) -> Retriever:
    """BM25 with default settings over the corpus, built (or read from its cache) once."""
    return retriever_kind("bm25").create({}, RetrieverContext(corpus, cache))


def lexical_neighbours(
    config: EvalConfig, queries: Sequence[GoldQuery], k: int = NEIGHBOURS
) -> dict[str, tuple[str, ...]]:
    """Each question's top k documents by BM25 with default settings."""
    assert config.corpus is not None
    run = _default_bm25(config.corpus, config.output / "cache").retrieve(queries, k)
    return {q: answer.doc_ids for q, answer in run.queries.items()}


def neighbours_of(config: EvalConfig, text: str, k: int) -> tuple[str, ...]:
    """The top k documents by default BM25 for one question's text."""
    query = GoldQuery("asked", text, "", (), (), True, None, None, "", 0)
    return lexical_neighbours(config, [query], k).get("asked", ())


def measure_coverage(inputs: Inputs) -> tuple[list[Document], Coverage]:
    """The corpus and the gold set's coverage of it."""
    documents = corpus_documents(inputs.config)
    queries = inputs.gold.queries
    return documents, coverage(documents, queries, lexical_neighbours(inputs.config, queries))


def _percent(part: int, whole: int) -> str:
    return f"{100 * part / whole:.1f}%" if whole else "n/a"


def coverage_text(found: Coverage, width: int = 80, shown: int = 12) -> str:
    """The terminal summary."""
    lines = [
        f"Corpus: {plural(found.documents, 'document', 'documents')} in "
        f"{plural(len(found.sections), 'section', 'sections')} and "
        f"{plural(len(found.areas), 'area', 'areas')}. Labelled as relevant by a "
        f"question: {found.labelled} ({_percent(found.labelled, found.documents)}); near a "
        f"question (labelled, or in its top {NEIGHBOURS} by BM25): {found.near} "
        f"({_percent(found.near, found.documents)}). No question near: "
        f"{found.documents - found.near} ({found.uncovered_share * 100:.1f}%).",
    ]
    untouched = found.untouched_sections
    lines.append(
        f"Sections no question is near: {len(untouched)} of {len(found.sections)}"
        + (f" ({sum(s.documents for s in untouched)} documents)." if untouched else ".")
    )
    wrapped = [w for line in lines for w in wrap(line, width, "")]
    rows = [
        [
            s.name[:36],
            str(s.documents),
            str(s.labelled),
            str(s.near),
            _percent(s.near, s.documents),
            str(s.questions),
        ]
        for s in found.areas[:shown]
    ]
    header = ["area (most uncovered first)", "docs", "labelled", "near", "share", "questions"]
    table = render_table(header, rows)
    more = len(found.areas) - shown
    tail = [f"… {more} more areas, and every section, in coverage.json"] if more > 0 else []
    tag_rows = [
        [
            t.tag,
            str(t.questions),
            ", ".join(f"{k} {v}" for k, v in t.tiers.items()),
            ", ".join(t.areas[:3]) or "-",
        ]
        for t in found.tags
    ]
    tags = render_table(["tag (fewest first)", "questions", "tiers", "main areas"], tag_rows)
    missing = [
        f"{m.path}:{m.line}: relevant.{m.doc_id}: not in the corpus ({m.query_id})"
        for m in found.missing
    ]
    missing_text = (
        [f"Labels naming documents the corpus lacks: {len(missing)}", *missing]
        if missing
        else ["Every label names a document of the corpus."]
    )
    return "\n".join([*wrapped, "", table, *tail, "", tags, "", *missing_text])


def _group_json(group: SectionCoverage) -> dict[str, Any]:
    return {
        "name": group.name,
        "documents": group.documents,
        "labelled": group.labelled,
        "near": group.near,
        "questions": group.questions,
    }


def coverage_json(found: Coverage) -> str:
    """Everything, for tools."""
    document = {
        "documents": found.documents,
        "labelled": found.labelled,
        "near": found.near,
        "uncovered_share": found.uncovered_share,
        "neighbours": NEIGHBOURS,
        "areas": [_group_json(s) for s in found.areas],
        "sections": [_group_json(s) for s in found.sections],
        "tags": [
            {
                "tag": t.tag,
                "questions": t.questions,
                "tiers": dict(t.tiers),
                "areas": list(t.areas),
            }
            for t in found.tags
        ],
        "missing_labels": [
            {"query_id": m.query_id, "path": m.path, "line": m.line, "doc_id": m.doc_id}
            for m in found.missing
        ],
    }
    return json.dumps(document, indent=2, ensure_ascii=False) + "\n"


def run_coverage(config_path: Path, criteria_path: Path, out: Path | None, width: int) -> str:
    """Measure, write coverage.json, return the terminal text."""
    inputs = load_inputs(config_path, criteria_path)
    _, found = measure_coverage(inputs)
    path = out or inputs.config.output / "coverage.json"
    write_atomic(path, coverage_json(found))
    return f"{coverage_text(found, width)}\n\nWrote {path}"


# --- plan -----------------------------------------------------------------------------


def _drop(metric: str, value: float) -> str:
    if math.isnan(value):
        return "n/a"
    if math.isinf(value):
        return "none"
    return delta(metric, value).lstrip("+")


def plan_text(needs: Sequence[Need], catch: float, width: int = 80) -> str:
    """The table and, per scope that falls short, what to write."""
    rows = []
    for need in needs:
        metric = need.gate.metric
        rows.append(
            [
                need.gate.name,
                need.scope.label(),
                str(need.n),
                _drop(metric, need.drop),
                _drop(metric, need.target),
                str(need.needed),
                str(need.more) if need.more else "-",
            ]
        )
    header = ["gate", "scope", "n", "caught now", "target", "needs", "more"]
    short = [n for n in needs if n.more]
    intro = (
        f"Each gated scope should catch a drop of {catch:g}× its gate's limit 4 times in 5 "
        "(the gate's own test, before churn), with at least min_n questions."
    )
    lines = [*wrap(intro, width, ""), "", render_table(header, rows), ""]
    if not short:
        lines.append("Every gated scope has the questions it needs.")
        return "\n".join(lines)
    lines.append(f"To write ({plural(len(short), 'scope', 'scopes')} short):")
    for need in short:
        where = need.scope.label()
        regions = listed(list(need.areas), 3) if need.areas else "any area"
        tier = f" in tier {need.scope.tier}" if need.scope.tier else ""
        text = (
            f"- {need.more} for {where} ({need.gate.name}, {parse_metric(need.gate.metric).label})"
            f"{tier}, about: {regions}"
        )
        lines += wrap(text, width, "  ")
    lines.append("")
    lines += wrap(
        "`llm-eval gold synthesize --n N` drafts questions for these areas (with --tag "
        "for a tag); `llm-eval gold review` lets a person accept them into a tier.",
        width,
        "",
    )
    return "\n".join(lines)


def plan_json(needs: Sequence[Need], catch: float) -> str:
    """The plan, for tools (and for a person who wants every section)."""

    def number(value: float) -> float | None:
        return None if math.isnan(value) or math.isinf(value) else value

    document: dict[str, Any] = {
        "catch": catch,
        "scopes": [
            {
                "gate": n.gate.name,
                "metric": n.gate.metric,
                "scope": n.scope.key(),
                "tier": n.scope.tier,
                "tags": list(n.scope.tags),
                "n": n.n,
                "detectable_drop": number(n.drop),
                "target_drop": number(n.target),
                "needed": n.needed,
                "more": n.more,
                "areas": list(n.areas),
            }
            for n in needs
        ],
    }
    return json.dumps(document, indent=2, ensure_ascii=False) + "\n"


def make_plan(inputs: Inputs, catch: float) -> list[Need]:
    """The plan for the loaded inputs."""
    _, found = measure_coverage(inputs)
    return plan(inputs.criteria, inputs.gold.queries, found, catch)


def run_plan(
    config_path: Path, criteria_path: Path, catch: float, out: Path | None, width: int
) -> str:
    """Plan, write plan.json, return the terminal text."""
    if not catch > 1:
        raise InputError(f"--catch must be above 1 (a multiple of the limit), got {catch:g}")
    inputs = load_inputs(config_path, criteria_path)
    needs = make_plan(inputs, catch)
    path = out or inputs.config.output / "plan.json"
    write_atomic(path, plan_json(needs, catch))
    return f"{plan_text(needs, catch, width)}\n\nWrote {path}"
