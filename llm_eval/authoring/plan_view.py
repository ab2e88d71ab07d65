"""`llm-eval gold plan` as terminal text and as plan.json."""

from __future__ import annotations

import json
import math
from collections.abc import Sequence
from typing import Any

from llm_eval.authoring.corpus_coverage import BY_IDS
from llm_eval.authoring.plan import Need
from llm_eval.metrics import parse_metric
from llm_eval.output import render_table, wrap
from llm_eval.power import MOST_QUERIES
from llm_eval.wording.english import listed, plural
from llm_eval.wording.gates import drop_size, power_statement


def plan_text(needs: Sequence[Need], catch: float, width: int = 80, areas_by: str = BY_IDS) -> str:
    """The table and, per scope that falls short, what to write (and, when the corpus's
    ids name no groups, how its areas were made)."""
    rows = []
    for need in needs:
        metric = need.gate.metric
        rows.append(
            [
                need.gate.name,
                need.scope.label(),
                str(need.n),
                drop_size(metric, need.drop),
                drop_size(metric, need.target),
                f"> {MOST_QUERIES:,}" if need.needed is None else str(need.needed),
                str(need.more) if need.more else "-",
            ]
        )
    header = ["gate", "scope", "n", "caught now", "target", "needs", "more"]
    short = [n for n in needs if n.more]
    intro = (
        f"Each gated scope should catch a drop of {catch:g}× its gate's limit 4 times in 5 "
        "(the gate's own test, as `llm-eval gate` and `gold stats` say it), with at least "
        "min_n questions."
    )
    lines = [*wrap(intro, width, ""), ""]
    for need in needs:
        if need.power is not None and need.scope == need.gate.scope:
            lines += wrap(
                power_statement(need.gate, need.scope.label(), need.power) + ".", width, "  "
            )
    lines += ["", render_table(header, rows), ""]
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
    if areas_by != BY_IDS:
        lines += ["", *wrap(f"Areas group documents by {areas_by}.", width, "")]
    lines.append("")
    lines += wrap(
        "`llm-eval gold synthesize --n N` drafts questions for these areas (with --tag "
        "for a tag); `llm-eval gold review` lets a person accept them into a tier.",
        width,
        "",
    )
    return "\n".join(lines)


def plan_json(needs: Sequence[Need], catch: float, areas_by: str = BY_IDS) -> str:
    """The plan, for tools (and for a person who wants every section)."""

    def number(value: float) -> float | None:
        return None if math.isnan(value) or math.isinf(value) else value

    document: dict[str, Any] = {
        "catch": catch,
        "areas_by": areas_by,
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
