"""Markdown renderings of `report.json` for people: `report.md`, the job summary, the PR comment.

The layout lives in `templates/*.j2`, the report's numbers in words in
`_markdown_view.py` and `_markdown_tables.py`. This module renders them, escapes every
value a template prints (`escape_markdown`), and shortens the body to GitHub's size
limits: the query drill-down goes first, then the tag table. jinja2 is imported on
first use, so `llm-eval --help` stays fast.

A report can come from another job (a `workflow_run` reads it from an artifact a
pull request built), so every value in it is treated as untrusted text.
"""

from __future__ import annotations

import contextlib
import functools
import re
from collections.abc import Callable, Mapping
from typing import TYPE_CHECKING, Any

from llm_eval.formats import RenderOptions
from llm_eval.formats._fit import fitted
from llm_eval.formats._markdown_view import CHANGES_SHOWN, report_view
from llm_eval.formats._markup import NO_LINKS, Links, finalize

if TYPE_CHECKING:
    import jinja2


COMMENT_MARKER = "<!-- llm-eval:retrieval-gate -->"
"""First line of the PR comment; `llm-eval comment` finds its own comment by it."""
MARKER_ID = re.compile(r"[A-Za-z0-9][A-Za-z0-9_.-]{0,63}")
"""An id that tells apart several gates posting on one pull request (a config matrix)."""


def comment_marker(marker_id: str | None = None) -> str:
    """`COMMENT_MARKER`, or one of its own for the gate named `marker_id`."""
    if not marker_id:
        return COMMENT_MARKER
    if not MARKER_ID.fullmatch(marker_id):
        raise ValueError(f"not a comment id: {marker_id!r} (letters, digits, . _ -)")
    return f"<!-- llm-eval:retrieval-gate:{marker_id} -->"


COMMENT_MAX_CHARS = 65_000
"""GitHub refuses comments over 65,536 characters."""
SUMMARY_MAX_BYTES = 1_000_000
"""GitHub takes at most 1 MiB (1,048,576 bytes) of job summary from one step."""


def render_markdown(report: Mapping[str, Any], links: Links = NO_LINKS) -> str:
    """The Markdown report (`report.md`, the job summary), under 1 MiB."""
    return _fitted(
        "report.md.j2", report, links, lambda text: len(text.encode()) <= SUMMARY_MAX_BYTES
    )


def render_comment(
    report: Mapping[str, Any], links: Links = NO_LINKS, marker_id: str | None = None
) -> str:
    """The PR comment: the Markdown report under its marker, under GitHub's limit."""
    marker = comment_marker(marker_id) + "\n"
    room = COMMENT_MAX_CHARS - len(marker)
    return marker + _fitted("report.md.j2", report, links, lambda text: len(text) <= room)


def _fitted(
    template: str, report: Mapping[str, Any], links: Links, fits: Callable[[str], bool]
) -> str:
    """Render, shortening the drill-down first and then the tag table until `fits`."""
    view = report_view(report, links)
    tags = max((len(table["rows"]) for table in view["tag_tables"]), default=0)

    def attempt(changes: int, tag_rows: int) -> str:
        return (
            _environment()
            .get_template(template)
            .render(view, changes_shown=changes, tags_shown=tag_rows)
        )

    return fitted(attempt, CHANGES_SHOWN, tags, fits)


@functools.cache
def _environment() -> jinja2.Environment:
    import jinja2

    return jinja2.Environment(
        loader=jinja2.PackageLoader("llm_eval", "templates"),
        bytecode_cache=_bytecode_cache(),
        # HTML autoescaping does not cover Markdown; `finalize` runs `escape_markdown` on
        # every `{{ … }}` a template prints, so no field can be left unescaped by mistake.
        # Markup lives only in the templates' literal text.
        autoescape=False,
        finalize=finalize,
        undefined=jinja2.StrictUndefined,
        trim_blocks=True,
        lstrip_blocks=True,
        keep_trailing_newline=True,
    )


def _bytecode_cache() -> jinja2.BytecodeCache | None:
    """Jinja's cache of compiled templates in a folder of the user's own under the
    system's temporary folder (compiling the report's template is about a twentieth of
    a warm gate); none where that folder cannot be made or used safely."""
    import jinja2

    class Quiet(jinja2.FileSystemBytecodeCache):
        """A template that cannot be cached is compiled each time, never an error."""

        def dump_bytecode(self, bucket: jinja2.bccache.Bucket) -> None:
            with contextlib.suppress(OSError):
                super().dump_bytecode(bucket)

        def load_bytecode(self, bucket: jinja2.bccache.Bucket) -> None:
            with contextlib.suppress(OSError, ValueError, EOFError):
                super().load_bytecode(bucket)

    try:
        return Quiet()
    except (OSError, RuntimeError):
        return None


class Markdown:
    """report.md: the PR comment's body as a file."""

    name = "markdown"
    description = "report.md: the PR comment's Markdown (GitHub-flavoured)"
    filename = "report.md"

    def render(self, report: Mapping[str, Any], options: RenderOptions) -> str:
        """`render_markdown` with the options' links."""
        return render_markdown(report, options.links or NO_LINKS)


FORMAT = Markdown()
