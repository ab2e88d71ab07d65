"""`llm-eval init`: a working setup in an empty repository.

Writes the config, the ship criteria (each with the JSON Schema an editor completes
and checks it by, beside it), a starter corpus and gold set (twelve passages
about llm-eval itself and fourteen questions on them, two of them rejection
questions: replace both with your own), the four GitHub workflows (the gate on pull
requests, its comment for forks, the baseline refresh, the dashboard on GitHub Pages),
then computes the baseline,
so that `llm-eval gate` runs at once. It never overwrites a file unless `--force`.

The workflows are this repository's own (package data kept equal to
`.github/workflows/` by a test), with the action and the package pointed at
`--source OWNER/REPO@COMMIT`. Without `--source`, the commit this llm-eval was
installed from by git from GitHub (PEP 610's `direct_url.json`); a tag or branch given
is resolved to its commit at GitHub (`git ls-remote`), or refused with the reason:
what the workflows pin must not move.
"""

from __future__ import annotations

import contextlib
import json
import re
from importlib import resources
from pathlib import Path

from llm_eval import DISTRIBUTION
from llm_eval.beir_io import CORPUS, iter_beir_queries
from llm_eval.defaults import BEIR_SPLIT
from llm_eval.docs_address import Installed
from llm_eval.errors import InputError
from llm_eval.gitinfo import RemoteError, remote_refs
from llm_eval.installation_io import installed_source
from llm_eval.output import wrap
from llm_eval.textio import read_text, require_file, written_together
from llm_eval.wording.english import listed, plural

SCAFFOLD = "llm_eval.scaffold"
FILES = {
    "config/llm-eval.yaml": "llm-eval.yaml",
    "config/ship-criteria.yaml": "ship-criteria.yaml",
    "config/llm-eval.schema.json": "schemas/llm-eval.schema.json",
    "config/ship-criteria.schema.json": "schemas/ship-criteria.schema.json",
    "gold/corpus.jsonl": "corpus.jsonl",
    "gold/gold-A.jsonl": "gold-A.jsonl",
    ".github/workflows/retrieval-gate.yml": "workflows/retrieval-gate.yml",
    ".github/workflows/retrieval-gate-comment.yml": "workflows/retrieval-gate-comment.yml",
    ".github/workflows/baseline-refresh.yml": "workflows/baseline-refresh.yml",
    ".github/workflows/dashboard.yml": "workflows/dashboard.yml",
}
GATE_WORKFLOW = ".github/workflows/retrieval-gate.yml"
DEFAULT_SOURCE = "OWNER/llm-eval@main"
"""What the workflows name when this llm-eval was not installed from GitHub by git."""
_SOURCE = re.compile(r"[\w.-]+/[\w.-]+@[\w./-]+")
_COMMIT = re.compile(r"[0-9a-f]{40}")


def default_source(installed: Installed | None) -> str:
    """`OWNER/REPO@COMMIT` of the GitHub repository and commit this llm-eval was
    installed from by git; `DEFAULT_SOURCE` when that is not known."""
    if installed is None or installed.github_repository is None:
        return DEFAULT_SOURCE
    if not _COMMIT.fullmatch(installed.commit):
        return DEFAULT_SOURCE
    return f"{installed.github_repository}@{installed.commit}"


def pinned_source(source: str) -> tuple[str, str | None]:
    """`source` with its ref a full commit, and what was resolved (`tag v0.1.0`): a tag
    or branch is looked up at `https://github.com/OWNER/REPO` with `git ls-remote`; one
    that cannot be is an InputError saying why."""
    if not _SOURCE.fullmatch(source):
        raise InputError(f"--source must look like OWNER/REPO@COMMIT, got {source!r}")
    repo, ref = source.split("@", 1)
    if _COMMIT.fullmatch(ref):
        return source, None
    url = f"https://github.com/{repo}"
    refuse = f"--source {source}: the workflows pin a full commit sha, and {ref!r} is not one"
    try:
        refs = remote_refs(url, ref)
    except RemoteError as exc:
        raise InputError(
            f"{refuse}; it could not be resolved (git ls-remote {url}: {exc}): give "
            f"--source {repo}@<full commit sha>"
        ) from None
    for name, kind in (
        (f"refs/tags/{ref}^{{}}", "tag"),
        (f"refs/tags/{ref}", "tag"),
        (f"refs/heads/{ref}", "branch"),
    ):
        if name in refs:
            return f"{repo}@{refs[name]}", f"{kind} {ref}"
    raise InputError(
        f"{refuse}, nor a tag or branch of {url}: give --source {repo}@<full commit sha>"
    )


def scaffold_text(name: str) -> str:
    """A file of the package's scaffold."""
    return resources.files(SCAFFOLD).joinpath(name).read_text(encoding="utf-8")


def point_workflow(text: str, source: str) -> str:
    """This repository's workflow with the action and the package taken from `source`
    (`OWNER/REPO@REF`) instead of the checkout."""
    text = re.sub(
        r"      # In your repository: uses: [^\n]*\n      - uses: \./\n",
        f"      - uses: {source}\n",
        text,
    )
    # The comment workflow checks out this repository's default branch to install it;
    # elsewhere one install step from the pinned source does that.
    text = re.sub(
        r"      # The base repository's default branch: trusted code\.[^\n]*\n"
        r"(      #[^\n]*\n)*"
        r"      - uses: actions/checkout@[^\n]*\n"
        r"        with:\n"
        r"          persist-credentials: false\n",
        "",
        text,
    )
    text = re.sub(r"      # In your repository: pip install [^\n]*\n", "", text)
    return text.replace("--quiet .\n", f'--quiet "{requirement(source)}"\n')


def requirement(source: str) -> str:
    """The pip requirement that installs llm-eval from `source` (`OWNER/REPO@REF`)."""
    repo, ref = source.split("@", 1)
    return f"{DISTRIBUTION} @ git+https://github.com/{repo}.git@{ref}"


def sharded_gate(shards: int) -> str:
    """The gate workflow that retrieves in `shards` matrix jobs, each uploading its part,
    and gates from the parts in one job."""
    listed = "[" + ", ".join(str(i) for i in range(1, shards + 1)) + "]"
    text = scaffold_text("workflows/retrieval-gate-sharded.yml")
    return text.replace("{shard_list}", listed).replace("{shards}", str(shards))


def _ignoring_output(path: Path) -> str:
    """.gitignore's text keeping the output folder (reports, caches) out of git."""
    old = read_text(path) if path.is_file() else ""
    if any(line.strip().strip("/") == ".llm-eval" for line in old.splitlines()):
        return old
    return old + ("\n" if old and not old.endswith("\n") else "") + ".llm-eval/\n"


def beir_texts(root: Path, folder: Path, split: str) -> tuple[dict[str, str], str]:
    """The files `init --from-beir` writes (config, criteria, workflows) and a line on
    the gold set; the folder's split is read first, so a bad one writes nothing."""
    queries = list(iter_beir_queries(folder, split))
    if not queries:
        raise InputError(f"split {split!r} has no query with a relevant document", path=folder)
    require_file(folder / CORPUS)
    where = folder.resolve()
    if where.is_relative_to(root.resolve()):
        where = where.relative_to(root.resolve())
    config = (
        scaffold_text("beir-llm-eval.yaml")
        .replace("{folder}", json.dumps(where.as_posix()))
        .replace("{split}", json.dumps(split))
        .replace("{corpus}", json.dumps((where / CORPUS).as_posix()))
    )
    texts = {
        "config/llm-eval.yaml": config,
        "config/ship-criteria.yaml": scaffold_text("beir-ship-criteria.yaml"),
    }
    texts |= {
        name: scaffold_text(FILES[name])
        for name in FILES
        if name.startswith(".github/") or name.endswith(".schema.json")
    }
    told = f"the {plural(len(queries), 'query', 'queries')} of {where.as_posix()}, split {split}"
    if where.is_absolute():
        told += " (outside the repository: CI will not find it there)"
    return texts, told


def init(
    root: Path,
    *,
    source: str | None = None,
    force: bool = False,
    width: int = 80,
    beir: Path | None = None,
    split: str = BEIR_SPLIT,
    shards: int | None = None,
) -> str:
    """Write the setup into `root` (from a BEIR folder's split when `beir` is given),
    compute its baseline; the terminal text. `source` (`OWNER/REPO@REF`) defaults to
    where this llm-eval was installed from (`default_source`); with `shards`, the gate
    workflow retrieves in that many matrix jobs (`sharded_gate`)."""
    given = source
    source, resolved = (
        pinned_source(source) if source is not None else (default_source(installed_source()), None)
    )
    texts = {name: scaffold_text(data) for name, data in FILES.items()}
    told = None
    if beir is not None:
        texts, told = beir_texts(root, beir, split)
    if shards is not None:
        texts[GATE_WORKFLOW] = sharded_gate(shards)
    present = [name for name in texts if (root / name).exists()]
    if present and not force:
        raise InputError(
            f"{listed(present, 3)} already exist in {root}; nothing was written "
            "(--force overwrites them)"
        )
    changes = []
    for name, text in texts.items():
        if name.startswith(".github/"):
            text = point_workflow(text, source)
        changes.append((root / name, text))
    changes.append((root / ".gitignore", _ignoring_output(root / ".gitignore")))
    from llm_eval.commands.baseline import refresh

    # All or nothing: a failure half-way (a read-only folder, a folder where .gitignore
    # goes, a baseline that cannot be written) leaves the repository as it was.
    with written_together(changes), contextlib.chdir(root):
        refreshed = refresh(
            config_path=Path("config/llm-eval.yaml"),
            criteria_path=Path("config/ship-criteria.yaml"),
            force=True,
        )
    # .gitignore is one of the files written, listed first.
    lines = [f"Wrote {len(texts) + 1} files and gold/baseline.json in {root}:"]
    lines.append("  .gitignore (.llm-eval/, the reports and caches)")
    lines += [f"  {name}" for name in texts]
    lines.append("")
    if refreshed.sight is not None:
        lines += [*wrap(refreshed.sight + ".", width, ""), ""]
    if told is not None:
        lines += [*wrap(f"The gold set (tier A): {told}.", width, ""), ""]
    steps = [
        "Next: `llm-eval gate` runs the gate against this baseline (bm25 over the "
        "folder's corpus). Put your retriever in config/llm-eval.yaml and run `llm-eval "
        "baseline refresh`; `llm-eval retrieve --format trec --out run.trec` writes a "
        "TREC run file for other tools."
        if beir is not None
        else "Next: `llm-eval gate` runs the gate on the starter gold set. Then put your corpus "
        "in gold/corpus.jsonl and your retriever in config/llm-eval.yaml, and grow the "
        "gold set: `llm-eval gold coverage`, `llm-eval gold plan`, `llm-eval gold "
        "synthesize` and `llm-eval gold review` (docs/tutorials/your-repository.md: From an "
        "empty repository to a gated gold set); `llm-eval baseline refresh` when it is yours.",
    ]
    if source == DEFAULT_SOURCE:
        steps.append(
            "The workflows name the action and package as OWNER/llm-eval@main (this "
            "llm-eval was not installed from a commit on GitHub): run init with --source "
            "OWNER/REPO@<full commit sha> (or edit them) to pin your copy."
        )
    elif resolved is not None:
        commit = source.split("@", 1)[1]
        steps.append(f"--source {given}: {resolved} is commit {commit}; the workflows pin it.")
    elif given is None:
        steps.append(
            f"The workflows take the action and package from {source}, the commit this "
            "llm-eval was installed from."
        )
    if shards is not None:
        steps.append(
            f"{GATE_WORKFLOW} retrieves in {shards} jobs, each uploading its part of the run "
            "(`llm-eval retrieve --shard I/N`), and gates from the parts in one more."
        )
    for step in steps:
        lines += wrap(step, width, "")
    return "\n".join(lines)
