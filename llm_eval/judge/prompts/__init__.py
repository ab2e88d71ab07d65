"""The judge's prompt templates: package data, versioned, each citing what it implements.

A template file has a header (`name`, `version`, `implements`), then a `--- system`
and a `--- user` part whose `{placeholders}` are filled in, then a `--- schema` part:
the JSON schema of the answer (its placeholders filled in too), sent as
`response_format` where the endpoint accepts it. The name and version are part of
every call's cache key, so editing a prompt means bumping its version; the schema is
in the key as it is.

A header `system: judging` takes the system part from `judging.txt` instead. The
prompts that judge one query's results all do, and fill their user part in the same
order: what every call of the query shares first (the question, then the context),
then the task, then what is the call's own (a passage, statements, the expected
answer). The calls of a query then begin with the same long text, a prefix that
endpoints with prompt caching can reuse (OpenAI's automatic caching, vLLM's and
llama.cpp's prefix caching).
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass
from functools import cache
from importlib import resources
from typing import Any

from llm_eval.endpoints.chat import Message

_PLACEHOLDER = re.compile(r"\{(\w+)\}")


@dataclass(frozen=True, slots=True)
class Prompt:
    """One template."""

    name: str
    version: int
    implements: str
    system: str
    user: str
    schema_text: str
    """The answer's JSON schema, with placeholders."""

    @property
    def key(self) -> str:
        """`chunk_relevance@1`: what the cache key records of the prompt."""
        return f"{self.name}@{self.version}"

    def messages(self, **values: str) -> list[Message]:
        """The system and user messages with the placeholders filled in."""
        return [
            Message("system", _fill(self.system, values)),
            Message("user", _fill(self.user, values)),
        ]

    def schema(self, **values: str) -> dict[str, Any]:
        """The JSON schema of the answer, with the placeholders filled in."""
        filled = json.loads(_fill(self.schema_text, values))
        assert isinstance(filled, dict)
        return filled


def _fill(text: str, values: dict[str, str]) -> str:
    """Placeholders replaced in one pass, so that a value holding `{passage}` is never
    filled in again."""
    return _PLACEHOLDER.sub(lambda m: values.get(m.group(1), m.group(0)), text)


@cache
def prompt(name: str) -> Prompt:
    """The template `name` from the package's data."""
    text = _read(f"{name}.txt")
    header, _, rest = text.partition("--- ")
    fields = dict(line.split(": ", 1) for line in header.strip().splitlines())
    system, _, rest = ("--- " + rest).partition("--- user\n")
    system = system.removeprefix("--- system\n")
    if "system" in fields:
        system = _read(f"{fields['system']}.txt")
    user, _, schema = rest.partition("--- schema\n")
    return Prompt(
        fields["name"],
        int(fields["version"]),
        fields["implements"],
        system.strip(),
        user.strip(),
        schema.strip(),
    )


def _read(file: str) -> str:
    return resources.files(__name__).joinpath(file).read_text(encoding="utf-8")
