"""`llm-eval gold coverage` as terminal text and as coverage.json."""

from __future__ import annotations

import json
from typing import Any

from llm_eval.authoring.corpus_coverage import BY_IDS, NEIGHBOURS, Coverage, SectionCoverage
from llm_eval.output import render_table, wrap
from llm_eval.wording.english import plural


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
    if found.areas_by != BY_IDS:
        lines.append(f"Areas group documents by {found.areas_by}.")
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
        "areas_by": found.areas_by,
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
