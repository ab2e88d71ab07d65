"""`llm-eval metrics`: every registered metric, how it is written, what it measures, and
for a plugin's metric the distribution it comes from."""

from __future__ import annotations

from llm_eval.metrics import Family, families
from llm_eval.output import wrap

_SOURCES = {
    "relevance": "From the gold set's relevance labels (also `llm-eval evaluate`):",
    "rejection": "From rejection queries (gold queries with no relevant document):",
    "context": "From the corpus-versions sidecar (stale and conflicting documents):",
    "ranking": "From the returned ranking itself (its scores, its order against the grades):",
    "judged": "From a judge model (`judge:` in the config; gated only with `judged: true`):",
    "service": "From what each query cost (aggregates over a slice, never paired):",
}
_UNITS = {
    "share": "a percentage",
    "score": "a score from 0 to 1",
    "ratio": "a decimal",
    "ms": "milliseconds",
}


def _entry(family: Family, width: int) -> list[str]:
    better = "higher" if family.higher_is_better else "lower"
    text = f"{family.description}; {_UNITS[family.unit]}, {better} is better"
    if family.source != "built-in":
        text += f"; from the plugin {family.source}"
    return [f"  {family.usage()}", *("    " + line for line in wrap(text, width - 4, ""))]


def metric_table(width: int = 80) -> str:
    """The metrics grouped by where their values come from, a short entry each."""
    blocks = []
    for kind, heading in _SOURCES.items():
        lines = [heading]
        for family in families():
            if family.kind == kind:
                lines += _entry(family, width)
        blocks.append("\n".join(lines))
    return "\n\n".join(blocks)
