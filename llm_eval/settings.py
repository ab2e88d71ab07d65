"""Declared settings: what a config section may hold, checked once when it is read.

A retriever kind, a model endpoint (judge, embeddings) and any other configurable
part declares its settings as a table of `Setting`s; `checked_settings` fills in the
defaults, reads `${VAR}` / `${VAR:-default}` in every string of a setting (also nested
in mappings and lists) from the environment its caller passes, unless the setting reads
them where it is used, and raises InputError naming the bad key. Nothing here reads a
file or the process's environment.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

from llm_eval.environment import expand_nested
from llm_eval.errors import InputError
from llm_eval.finite import is_finite_number


@dataclass(frozen=True, slots=True)
class Setting:
    """One configurable setting (of a retriever kind, a model endpoint, ...)."""

    default: Any
    check: Callable[[Any], str | None]
    """Returns the reason a value is invalid, or None when it is fine."""
    help: str
    required: bool = False
    """The config must give it (the default is not used)."""
    environ: bool = True
    """Every string in the value (also nested in mappings and lists) reads `${NAME}` /
    `${NAME:-default}` from the environment when the config is loaded (endpoints, model
    folders, a python retriever's `init`: what differs between a laptop and CI). False
    for a value read where it is used instead: a secret (api_key, headers, cache_key),
    which so never enters the settings, their fingerprints or a report; a template with
    placeholders of its own (a request body's `${query}`)."""


Check = Callable[[Any], "str | None"]
"""A setting's check: the reason a value is invalid, or None."""


def number_check(low: float, high: float | None = None, positive: bool = False) -> Check:
    """A finite number from `low` (to `high`), above 0 too when `positive`."""

    def check(value: Any) -> str | None:
        ok = is_finite_number(value) and value >= low and (high is None or value <= high)
        ok = ok and (not positive or value > 0)
        bounds = f"from {low:g} to {high:g}" if high is not None else f">= {low:g}"
        return None if ok else f"must be a number {bounds}, got {value!r}"

    return check


def whole_check(low: int, high: int) -> Check:
    """A whole number from `low` to `high`."""

    def check(value: Any) -> str | None:
        ok = isinstance(value, int) and not isinstance(value, bool) and low <= value <= high
        return None if ok else f"must be a whole number from {low} to {high}, got {value!r}"

    return check


def checked_settings(
    settings: Mapping[str, Any],
    declared: Mapping[str, Setting],
    read: frozenset[str] = frozenset(),
    *,
    environ: Mapping[str, str],
) -> dict[str, Any]:
    """Every declared setting, given or default, checked; InputError naming a bad one.
    `${VAR}` is read from `environ` (the caller's `os.environ`). The settings named in
    `read` had their variables read already (a variant's, taken from the base
    retriever): a `${` in a variable's value is text, never read again."""
    unknown = sorted(set(settings) - set(declared))
    if unknown:
        raise InputError(f"unknown setting (valid: {', '.join(declared)})", key=unknown[0])
    values: dict[str, Any] = {}
    for name, setting in declared.items():
        if setting.required and name not in settings:
            raise InputError(f"missing required key {name!r}")
        value = settings.get(name, setting.default)
        if setting.environ and name not in read:
            value = expand_nested(value, environ, name)
        values[name] = value
        reason = setting.check(value)
        if reason is not None:
            raise InputError(reason, key=name)
    return values
