"""Where the documentation of this llm-eval is read, so that a report links only to
pages that exist: `LLM_EVAL_DOCS_URL` when set (empty: no links); in the GitHub Action,
the action's own repository at the ref it was used at; otherwise the repository and
commit this copy was installed from (PEP 610's `direct_url.json` of a `git+` install);
when none of them is known, no link, never a placeholder host.

A repository's pages are its Markdown sources (`docs/reference/metrics.md`), which
GitHub shows; a site (`LLM_EVAL_DOCS_URL`) is MkDocs' built pages
(`reference/metrics/#recall-at-k`). Nothing here reads a file or the environment: the
caller gives both.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass

DOCS_URL_ENV = "LLM_EVAL_DOCS_URL"
"""The documentation's address (a fork's site, a mirror); set empty, no links."""
_GITHUB = re.compile(r"(?:git\+)?https://github\.com/([\w.-]+/[\w.-]+?)(?:\.git)?/?")
_ACTION_PATH = re.compile(r".*/_actions/([\w.-]+/[\w.-]+)/([^/]+)/?")
"""The runner's checkout of a used action: `…/_actions/OWNER/REPO/REF`."""


@dataclass(frozen=True, slots=True)
class Installed:
    """Where this copy of llm-eval was installed from, by PEP 610's `direct_url.json`."""

    url: str
    """The repository as pip was given it: `https://github.com/OWNER/REPO`, `file:///…`."""
    commit: str
    """The commit pip checked out (`vcs_info.commit_id`)."""
    requested_revision: str | None = None
    """The tag, branch or commit written after `@`, when one was."""

    @property
    def github_repository(self) -> str | None:
        """`OWNER/REPO` when installed from GitHub, else None."""
        return github_repository(self.url)


@dataclass(frozen=True, slots=True)
class Docs:
    """The documentation's address, and whether its pages are a built site or the
    Markdown sources in a repository."""

    base: str
    """Ends with `/`: the site's root, or the repository's `…/blob/COMMIT/docs/`."""
    sources: bool = False

    def page(self, path: str, anchor: str) -> str:
        """The page `path` (`reference/metrics`) at `anchor`. A source page is linked
        without the anchor: the reference tables that hold the anchors are generated
        when the site is built, so the Markdown source has none to jump to."""
        if self.sources:
            return f"{self.base}{path}.md"
        return f"{self.base}{path}/#{anchor}"


def github_repository(url: str) -> str | None:
    """`OWNER/REPO` of a `https://github.com/OWNER/REPO(.git)` URL, else None."""
    match = _GITHUB.fullmatch(url)
    return match.group(1) if match else None


def docs_address(environ: Mapping[str, str], installed: Installed | None) -> Docs | None:
    """The documentation of this llm-eval (see the module's docstring), or None."""
    if DOCS_URL_ENV in environ:
        site = environ[DOCS_URL_ENV].strip()
        return Docs(site if site.endswith("/") else site + "/") if site else None
    action = _action(environ)
    if action is not None:
        repository, ref = action
        server = (environ.get("GITHUB_SERVER_URL") or "https://github.com").rstrip("/")
        return Docs(f"{server}/{repository}/blob/{ref}/docs/", sources=True)
    if installed is not None and installed.github_repository is not None:
        repository = installed.github_repository
        return Docs(f"https://github.com/{repository}/blob/{installed.commit}/docs/", True)
    return None


def _action(environ: Mapping[str, str]) -> tuple[str, str] | None:
    """The action's repository and ref: `GITHUB_ACTION_REPOSITORY` and
    `GITHUB_ACTION_REF`, or, where the runner leaves those empty (the steps of a
    composite action), the `_actions/OWNER/REPO/REF` folder it checked the action out
    into (`GITHUB_ACTION_PATH`). A local action (`uses: ./`) has neither."""
    repository = environ.get("GITHUB_ACTION_REPOSITORY", "")
    ref = environ.get("GITHUB_ACTION_REF", "")
    if repository and ref:
        return repository, ref
    match = _ACTION_PATH.fullmatch(environ.get("GITHUB_ACTION_PATH", ""))
    return (match.group(1), match.group(2)) if match else None
