"""`${NAME}` and `${NAME:-default}` in config values, read from the environment.

As in a POSIX shell, `${NAME:-default}` gives the default when NAME is unset or
empty; `${NAME}` with NAME unset is an error naming the variable and the setting that
uses it, never a silent empty string. A `$` not followed by `{` is kept as written.
Forms a shell has but this reading does not (a `${` inside a default, a `${` never
closed) are refused rather than kept as text. Values are never echoed in errors.

A value that reaches a URL, a request header, a path or a CI step output must be one
line: `line_break` finds what would split it.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from typing import Any

from llm_eval.errors import InputError

PLACEHOLDER = re.compile(r"\$\{([^}]*)\}")
_NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")
_LINE_BREAKING = re.compile("[\n\r\x00]")
_SHOWN = {"\n": "a line break", "\r": "a carriage return", "\x00": "a NUL character"}


def line_break(text: str) -> str | None:
    """Why `text` cannot stand as one line where it goes (a URL, a header, a path, a
    `name=value` step output): the first line break, carriage return or NUL it holds,
    with its place but not the text itself (which may be a secret); None when it has
    none."""
    found = _LINE_BREAKING.search(text)
    if found is None:
        return None
    return f"holds {_SHOWN[found.group()]} (at character {found.start() + 1}); it must be one line"


def expand_environment(template: str, environ: Mapping[str, str], used_by: str, key: str) -> str:
    """`template` with each `${NAME}` / `${NAME:-default}` replaced from `environ`;
    InputError (naming the variable and `used_by`, at `key`) for a malformed reference
    or an unset variable without a default."""

    def value(match: re.Match[str]) -> str:
        name, has_default, default = match.group(1).partition(":-")
        if not _NAME.fullmatch(name):
            raise InputError(
                f"${{{match.group(1)}}} is not a variable reference (write ${{NAME}} or "
                f"${{NAME:-default}}; used by {used_by})",
                key=key,
            )
        if "${" in default:
            raise InputError(
                f"${{{match.group(1)}}}: a ${{...}} inside a default is not supported (write "
                f"${{NAME}} or ${{NAME:-default}} with a plain default; used by {used_by})",
                key=key,
            )
        found = environ.get(name)
        if has_default:
            return found if found else default
        if found is None:
            raise InputError(f"environment variable {name} is not set (used by {used_by})", key=key)
        return found

    expanded = PLACEHOLDER.sub(value, template)
    if "${" in PLACEHOLDER.sub("", template):
        raise InputError(
            f"a ${{ is never closed (write ${{NAME}} or ${{NAME:-default}}; used by {used_by})",
            key=key,
        )
    return expanded


def expand_nested(value: Any, environ: Mapping[str, str], key: str) -> Any:
    """`value` with `expand_environment` applied to every string in it, also inside
    mappings and lists (their keys are kept as written); an error names the key path of
    the string (`init.model_path`, `python_path[1]`)."""
    if isinstance(value, str):
        return expand_environment(value, environ, f"the {key} setting", key)
    if isinstance(value, dict):
        return {name: expand_nested(item, environ, f"{key}.{name}") for name, item in value.items()}
    if isinstance(value, list):
        return [expand_nested(item, environ, f"{key}[{index}]") for index, item in enumerate(value)]
    return value
