"""Output formats: one Protocol, one module per format, one registry.

Every format renders the report dict (`docs/report-json.md`) alone. A format is a
module here that defines `FORMAT`, named in `_FORMATS` (the one registry, as
`llm_eval.retrievers` keeps its kinds). `llm-eval gate --format NAME` prints a format
on stdout, and every gate run writes the formats that have a `filename` to the output
folder.
"""

from __future__ import annotations

import importlib
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Protocol

from llm_eval.errors import InputError

if TYPE_CHECKING:
    from llm_eval.formats._markup import Links


@dataclass(frozen=True, slots=True)
class RenderOptions:
    """What a rendering may adapt to besides the report."""

    width: int = 80
    """Columns of the terminal (text)."""
    coloured: bool = False
    """ANSI colour (text)."""
    ascii: bool = False
    """Spell symbols in ASCII before laying out (text), so columns stay aligned on a
    terminal that cannot show them."""
    links: Links | None = None
    """Links to the repository and the CI run (Markdown); None: none."""
    extra: Mapping[str, Any] = field(default_factory=dict)


class Format(Protocol):
    """A rendering of a gate report."""

    @property
    def name(self) -> str:
        """What `--format` calls it: its module's name."""
        ...

    @property
    def description(self) -> str:
        """A few words for `--help`."""
        ...

    @property
    def filename(self) -> str | None:
        """The file every gate run writes it to in the output folder; None: only on
        request (`--format`)."""
        ...

    def render(self, report: Mapping[str, Any], options: RenderOptions) -> str:
        """The report in this format."""
        ...


_FORMATS: dict[str, str] = {
    "json": "json",
    "junit": "junit",
    "markdown": "markdown",
    "text": "text",
}
"""Format name → the module of `llm_eval.formats` that defines its `FORMAT`; imported
only when the format is asked for, so `--help` loads none of them."""


def format_names() -> tuple[str, ...]:
    """The registered formats, without importing them (for `--help`)."""
    return tuple(_FORMATS)


def get_format(name: str) -> Format:
    """The format called `name`; an unknown name is an error listing the valid ones."""
    module = _FORMATS.get(name)
    if module is None:
        raise InputError(f"unknown format {name!r}; valid formats: {', '.join(format_names())}")
    found: Format = importlib.import_module(f"{__name__}.{module}").FORMAT
    assert found.name == name, f"{module}.py defines the format {found.name!r}"
    return found


def written_formats() -> list[Format]:
    """The formats every gate run writes to its output folder."""
    return [f for f in map(get_format, format_names()) if f.filename is not None]
