"""Declared settings: what a config section may hold, checked once when it is read.

A retriever kind, a model endpoint (judge, embeddings) and any other configurable
part declares its settings as a table of `Setting`s; `checked_settings` fills in the
defaults, reads `${VAR}` / `${VAR:-default}` where a setting allows it, and raises
InputError naming the bad key. Nothing here reads a file.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

from llm_eval.environment import expand_environment
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
    environ: bool = False
    """A text value reads `${NAME}` / `${NAME:-default}` from the environment when the
    config is loaded (endpoints and model names, which differ between a laptop and CI)."""


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
    settings: Mapping[str, Any], declared: Mapping[str, Setting]
) -> dict[str, Any]:
    """Every declared setting, given or default, checked; InputError naming a bad one."""
    unknown = sorted(set(settings) - set(declared))
    if unknown:
        raise InputError(f"unknown setting (valid: {', '.join(declared)})", key=unknown[0])
    values: dict[str, Any] = {}
    for name, setting in declared.items():
        if setting.required and name not in settings:
            raise InputError(f"missing required key {name!r}")
        value = settings.get(name, setting.default)
        if setting.environ and isinstance(value, str):
            value = expand_environment(value, os.environ, f"the {name} setting", name)
        values[name] = value
        reason = setting.check(value)
        if reason is not None:
            raise InputError(reason, key=name)
    return values
