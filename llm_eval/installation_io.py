"""Where this copy of llm-eval was installed from: PEP 610's `direct_url.json`, which
pip writes into the installed distribution's metadata for an install from a URL. A
`git+` install records the repository's URL and the commit it checked out; an install
from the index, a folder or an editable checkout records no commit."""

from __future__ import annotations

import json
from importlib import metadata
from typing import Any

from llm_eval import DISTRIBUTION
from llm_eval.docs_address import Installed


def installed_source(distribution: str = DISTRIBUTION) -> Installed | None:
    """The repository and commit `distribution` was installed from by git, else None."""
    try:
        text = metadata.distribution(distribution).read_text("direct_url.json")
    except metadata.PackageNotFoundError:
        return None
    if not text:
        return None
    try:
        return parse_direct_url(json.loads(text))
    except ValueError:
        return None  # a broken file says nothing about where the copy came from


def parse_direct_url(record: Any) -> Installed | None:
    """The `Installed` of a parsed `direct_url.json`, None unless it is a git install."""
    if not isinstance(record, dict):
        return None
    url, vcs = record.get("url"), record.get("vcs_info")
    if not isinstance(url, str) or not isinstance(vcs, dict) or vcs.get("vcs") != "git":
        return None
    commit, requested = vcs.get("commit_id"), vcs.get("requested_revision")
    if not isinstance(commit, str) or not commit:
        return None
    return Installed(url, commit, requested if isinstance(requested, str) else None)
