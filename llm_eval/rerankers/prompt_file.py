"""A reranking prompt: a text file with `{query}` and `{document}`, checked when read.

    reranker: {type: llm, prompt: prompts/rerank-minimal.txt, ...}

The whole file is the user message. `{query}` and `{document}` are filled in, and
`{scale}` with how to answer on the configured scale (appended after the text when
the file has no `{scale}`). Any other `{word}` is an error naming the file and its
line, as is a file without `{query}` or `{document}` (naming the file, not the config
that points at it). Other braces (a JSON example) are text. The file's digest is part
of the score cache's key and of the baseline's retriever fingerprint, so a prompt
edited is a retriever changed.
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


def prompt_problem(text: str) -> tuple[str, int | None] | None:
    """Why a template cannot be used, with the line at fault when one is (an unknown
    placeholder's first), or None."""
    found = set(_PLACEHOLDER.findall(text))
    missing = [name for name in REQUIRED if name not in found]
    if missing:
        return f"the prompt has no {{{missing[0]}}} placeholder", None
    unknown = sorted(found - set(REQUIRED) - set(OPTIONAL))
    if unknown:
        first = text.index(f"{{{unknown[0]}}}")
        reason = (
            f"unknown placeholder {{{unknown[0]}}} in the prompt "
            "(valid: {query}, {document}, {scale})"
        )
        return reason, text.count("\n", 0, first) + 1
    return None


def read_prompt(path: str) -> RerankPrompt:
    """The prompt file at `path` (relative to the working directory), checked. A file
    that cannot be read is an InputError at the key `prompt` (the config's value is at
    fault); a text that cannot be used names the file itself (`path`, and the line)."""
    try:
        text = Path(path).read_text(encoding="utf-8")
    except FileNotFoundError:
        raise InputError(f"no such prompt file: {path}", key="prompt") from None
    except (OSError, UnicodeDecodeError) as exc:
        raise InputError(f"cannot read the prompt file {path}: {exc}", key="prompt") from None
    problem = prompt_problem(text)
    if problem is not None:
        reason, line = problem
        raise InputError(reason, path=path, line=line)
    return RerankPrompt(path, text, digest(text))
