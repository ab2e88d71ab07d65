"""A reranking prompt: a text file with `{query}` and `{document}`, checked when read.

    reranker: {type: llm, prompt: prompts/rerank-minimal.txt, ...}

The whole file is the user message. `{query}` and `{document}` are filled in, and
`{scale}` with how to answer on the configured scale (appended after the text when
the file has no `{scale}`). Any other `{word}` is an error, as is a file without
`{query}` or `{document}`: one line naming the file. Other braces (a JSON example) are
text. The file's digest is part of the score cache's key and of the baseline's
retriever fingerprint, so a prompt edited is a retriever changed.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import Path

from llm_eval.digest import digest
from llm_eval.errors import InputError

REQUIRED = ("query", "document")
OPTIONAL = ("scale",)
_PLACEHOLDER = re.compile(r"\{(\w+)\}")


@dataclass(frozen=True, slots=True)
class RerankPrompt:
    """A checked prompt file."""

    path: str
    """As configured."""
    text: str
    digest: str
    """Of the file's text."""

    def filled(self, query: str, document: str, instruction: str) -> str:
        """The user message for one pair (one pass: a query holding `{document}` is
        never filled in again)."""
        text = self.text if "{scale}" in self.text else f"{self.text.rstrip()}\n\n{{scale}}"
        values = {"query": query, "document": document, "scale": instruction}
        return _PLACEHOLDER.sub(lambda m: values.get(m.group(1), m.group(0)), text)


def prompt_problem(text: str) -> str | None:
    """Why a template cannot be used, or None."""
    found = set(_PLACEHOLDER.findall(text))
    missing = [name for name in REQUIRED if name not in found]
    if missing:
        return f"the prompt has no {{{missing[0]}}} placeholder"
    unknown = sorted(found - set(REQUIRED) - set(OPTIONAL))
    if unknown:
        return (
            f"unknown placeholder {{{unknown[0]}}} in the prompt "
            "(valid: {query}, {document}, {scale})"
        )
    return None


def read_prompt(path: str) -> RerankPrompt:
    """The prompt file at `path` (relative to the working directory), checked;
    InputError naming the file and the key `prompt` otherwise."""
    try:
        text = Path(path).read_text(encoding="utf-8")
    except FileNotFoundError:
        raise InputError(f"no such prompt file: {path}", key="prompt") from None
    except (OSError, UnicodeDecodeError) as exc:
        raise InputError(f"cannot read the prompt file {path}: {exc}", key="prompt") from None
    problem = prompt_problem(text)
    if problem is not None:
        raise InputError(f"{path}: {problem}", key="prompt")
    return RerankPrompt(path, text, digest(text))
