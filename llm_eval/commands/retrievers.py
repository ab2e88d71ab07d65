"""`llm-eval retrievers`: every retriever kind, and the settings `retriever:` takes."""

from __future__ import annotations

import json

from llm_eval.output import wrap
from llm_eval.retrievers import RetrieverKind, retriever_kinds


def _kind(kind: RetrieverKind, width: int) -> list[str]:
    needs = " Needs `corpus` in the config." if kind.needs_corpus else ""
    lines = wrap(f"kind: {kind.name} — {kind.description}{needs}", width, "  ")
    for name, setting in kind.settings.items():
        given = "required" if setting.required else f"default {json.dumps(setting.default)}"
        lines += wrap(f"  {name} ({given}): {setting.help}", width, "      ")
    return lines


def retriever_list(width: int = 80) -> str:
    """The kinds with their settings, each setting's default and what it does."""
    blocks = ["\n".join(_kind(kind, width)) for kind in retriever_kinds()]
    footer = (
        "Every kind also takes max_error_rate (default 0): the share of queries that may "
        "fail; and builds (default 1): how many times the retriever is built, each build "
        "answering every query, so that the gate's test holds the variance between builds "
        "(bm25 and embedding answer the same at every build)."
    )
    return "\n\n".join([*blocks, "\n".join(wrap(footer, width, ""))])
