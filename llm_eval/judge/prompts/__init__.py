"""The judge's prompt templates: package data, versioned, each citing what it implements.

A template file has a header (`name`, `version`, `implements`), then a `--- system`
and a `--- user` part whose `{placeholders}` are filled in. The name and version are
part of every call's cache key, so editing a prompt means bumping its version.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from functools import cache
from importlib import resources

from llm_eval.endpoints.client import Message

_PLACEHOLDER = re.compile(r"\{(\w+)\}")


@dataclass(frozen=True, slots=True)
class Prompt:
    """One template."""

    name: str
    version: int
    implements: str
    system: str
    user: str

    @property
    def key(self) -> str:
        """`chunk_relevance@1`: what the cache key records of the prompt."""
        return f"{self.name}@{self.version}"

    def messages(self, **values: str) -> list[Message]:
        """The system and user messages with the placeholders filled in."""

        # One pass, so that a value holding `{passage}` is never filled in again.
        def fill(text: str) -> str:
            return _PLACEHOLDER.sub(lambda m: values.get(m.group(1), m.group(0)), text)

        return [Message("system", fill(self.system)), Message("user", fill(self.user))]


@cache
def prompt(name: str) -> Prompt:
    """The template `name` from the package's data."""
    text = resources.files(__name__).joinpath(f"{name}.txt").read_text(encoding="utf-8")
    header, _, rest = text.partition("--- system\n")
    system, _, user = rest.partition("--- user\n")
    fields = dict(line.split(": ", 1) for line in header.strip().splitlines())
    return Prompt(
        fields["name"], int(fields["version"]), fields["implements"], system.strip(), user.strip()
    )
