"""Inert GitHub Markdown: every value a rendering prints, escaped, clipped, and linked
only where a link is meant.

A report can come from another job (a `workflow_run` reads it from an artifact a
pull request built), so every value in it is treated as untrusted text.
"""

from __future__ import annotations

import functools
import re
from dataclasses import dataclass

from llm_eval.docs_address import Docs

FIELD_MAX_CHARS = 400
"""Any one value is clipped to this many characters before it is escaped."""

# GitHub links `@name`, `#12`, `GH-12`, `owner/repo#12`, URLs and e-mail addresses in
# the text of the rendered HTML, after entities and backslash escapes are decoded, so
# neither `\@` nor `&#64;` stops a ping. An invisible zero-width joiner right after
# `@` or `#` (or inside `://`, `www.`, `GH-`) breaks every one of those patterns in the
# raw text and in the rendered text alike, and keeps the text readable. It goes only
# where GitHub would link: an `@` after a word character (`recall@5`) is no mention
# unless it reads as an e-mail address, and `#` links only before digits, at the start
# of a word or after `owner/repo`. Ids and commands are code spans, where nothing links.
_ZWJ = "\u200d"
_LINKABLE = re.compile(
    r"(?<!\w)@|@(?=[\w-]+\.\w)|(?:\b[\w.-]+/[\w.-]+|(?<!\w))#(?=\d)"
    r"|(?<=:)(?=//)|(?<=www)(?=\.)|(?<=gh-)(?=\d)",
    re.IGNORECASE,
)
_LAYOUT = re.compile("[\t\n\r\u2028\u2029]+")
"""Line breaks and tabs: a value is shown on one line, so they become a space."""
_HIDDEN = re.compile("[\x00-\x1f\x7f\u202a-\u202e\u2066-\u2069\u200e\u200f\u061c]")
"""Other control characters, and bidirectional controls, which can make text read
differently from what it is: shown as escapes, so the reader sees they are there."""
_HTML = {"&": "&amp;", "<": "&lt;", ">": "&gt;"}
_HTML_SPECIAL = re.compile("[&<>]")
_MARKDOWN_SPECIAL = re.compile(r"[\\`*_\[\]|~$]")


def visible(text: str) -> str:
    """`text` on one line with nothing hidden in it, the rule of every rendering a
    reviewer reads (the comment, the dashboard): line breaks and tabs become a space,
    other control characters and bidirectional controls their escape (`\\x1b`,
    `\\u202e`)."""
    return _HIDDEN.sub(_escape, _LAYOUT.sub(" ", text))


def _escape(match: re.Match[str]) -> str:
    code = ord(match.group())
    return f"\\x{code:02x}" if code < 0x100 else f"\\u{code:04x}"


def escape_markdown(text: object) -> str:
    """`text` as inert GitHub Markdown: one line, no markup, no HTML, nothing linked.

    Line breaks and tabs become spaces (a table cell stays one cell), other control
    characters and bidirectional controls visible escapes (`visible`), the text is
    clipped to `FIELD_MAX_CHARS`, `& < >` become HTML entities,
    ``\\ ` * _ [ ] | ~ $`` get a backslash, and mentions, issue references and URLs
    get a zero-width joiner (see `_LINKABLE`).
    """
    return _escaped(clip(str(text), FIELD_MAX_CHARS))


@functools.lru_cache(maxsize=1 << 14)
def _escaped(text: str) -> str:
    """`escape_markdown` of a clipped string; kept (a clipped key holds no long value),
    as a report's values recur (metric and gate names, figures), and a comment is
    rendered again while it is fitted under GitHub's size limit."""
    line = visible(text)
    line = _HTML_SPECIAL.sub(lambda m: _HTML[m.group()], line)
    line = _MARKDOWN_SPECIAL.sub(lambda m: "\\" + m.group(), line)
    return _LINKABLE.sub(lambda m: m.group() + _ZWJ, line)


class Code(str):
    """A value the templates print as a code span (ids, commands): copyable as is."""


class Parts(tuple[object, ...]):
    """A value printed piece by piece: a sentence with a link inside it."""


@dataclass(frozen=True, slots=True)
class Link:
    """A value the templates print as a Markdown link; plain text when the URL is unsafe."""

    text: str | Code
    url: str | None
    title: str | None = None
    """Shown on hover (GitHub keeps a link's title): a one-line definition."""


@dataclass(frozen=True, slots=True)
class Links:
    """Where the reader can go from the comment; all unknown outside GitHub Actions."""

    run: str | None = None
    artifact: str | None = None
    blob: str | None = None
    """`https://github.com/OWNER/REPO/blob/SHA/`: gold files at the PR's head commit."""
    head_sha: str | None = None
    """The pull request's head commit (a pull_request run checks out a merge commit)."""
    dashboard: str | None = None
    """The published dashboard (`LLM_EVAL_DASHBOARD_URL`), when one is configured."""
    docs: Docs | None = None
    """The documentation (`llm_eval.docs_address`): metric names link to their
    definitions; None where no address is known."""


NO_LINKS = Links()
"""No address known: nothing is linked."""
_SAFE_URL = re.compile(r"https?://[^\s()<>\[\]`\\\"']+")


def code_span(text: object) -> str:
    """`text` as an inline code span: one line, nothing hidden (`visible`), fenced with more
    backticks than it contains, so nothing in it is markup or linked. `|` is escaped:
    GFM splits table cells on it even inside code, and shows `\\|` there as `|`
    (backslashes right before it are doubled so the pipe stays escaped)."""
    line = visible(clip(str(text), FIELD_MAX_CHARS))
    line = re.sub(r"(\\*)\|", lambda m: m.group(1) * 2 + "\\|", line)
    longest = max((len(run) for run in re.findall("`+", line)), default=0)
    fence = "`" * (longest + 1)
    pad = " " if line.startswith("`") or line.endswith("`") else ""
    return f"{fence}{pad}{line}{pad}{fence}"


def finalize(value: object) -> str:
    """How a template prints a value: a link, a code span or escaped text."""
    if isinstance(value, Link):
        text = finalize(value.text)
        if value.url is None or not _SAFE_URL.fullmatch(value.url):
            return text
        title = _UNQUOTED.sub(" ", clip(value.title, FIELD_MAX_CHARS)) if value.title else ""
        return f'[{text}]({value.url} "{title}")' if title else f"[{text}]({value.url})"
    if isinstance(value, Parts):
        return "".join(finalize(part) for part in value)
    return code_span(value) if isinstance(value, Code) else escape_markdown(value)


_UNQUOTED = re.compile(r'["\\\x00-\x1f\x7f]+')
"""What cannot stand in a link's double-quoted title as it is."""


def clip(text: str, max_chars: int) -> str:
    """`text`, cut to `max_chars` with an ellipsis when longer."""
    return text if len(text) <= max_chars else text[: max_chars - 1] + "…"
