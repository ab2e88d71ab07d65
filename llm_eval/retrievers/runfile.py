"""A precomputed run file as the retriever, for pipelines that produce their own results.

    retriever: {kind: run, path: runs/latest.jsonl}   # JSONL or TREC, told apart by default

The same as `llm-eval gate --run runs/latest.jsonl`, but from the config: the run is
used as it is (its latencies and errors included). A `path` with glob characters
(`runs/build-*.jsonl`) names one run file per build of a retriever built several
times, in sorted order: each is one build's answers (`builds:`).
"""

from __future__ import annotations

import glob
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, get_args

from llm_eval.environment import line_break
from llm_eval.errors import InputError
from llm_eval.gold import GoldQuery
from llm_eval.retrievers import BatchRetriever, RetrieverContext, RetrieverKind
from llm_eval.runs import Run, RunFormat
from llm_eval.runs_io import load_run
from llm_eval.settings import Setting

FORMATS: tuple[str, ...] = get_args(RunFormat)


def check_path(value: Any) -> str | None:
    """A non-empty path."""
    if not isinstance(value, str) or not value.strip():
        return f"must be the path of a run file, got {value!r}"
    return line_break(value)


def check_format(value: Any) -> str | None:
    """One of the run formats."""
    if value not in FORMATS:
        return f"must be one of {', '.join(map(repr, FORMATS))}, got {value!r}"
    return None


SETTINGS: Mapping[str, Setting] = {
    "path": Setting(
        None,
        check_path,
        "The run file (relative to the working directory); a glob names one file per build.",
        True,
    ),
    "format": Setting("auto", check_format, "jsonl, trec, or auto (told apart by the first line)."),
}


@dataclass(frozen=True, slots=True)
class RunFileSettings:
    """The checked settings of the run kind."""

    path: Path
    """The run file, relative to the working directory."""
    run_format: RunFormat

    @classmethod
    def from_checked(cls, values: Mapping[str, Any]) -> RunFileSettings:
        """The record of checked settings (`RetrieverKind.checked`: every one present)."""
        return cls(Path(values["path"]), values["format"])


def is_pattern(path: Path) -> bool:
    """Whether the path is a glob naming several files."""
    return glob.has_magic(str(path))


def run_files(path: Path) -> list[Path]:
    """The run files a `path` names: itself, or a glob's matches in sorted order
    (InputError naming the key when it matches none)."""
    if not is_pattern(path):
        return [path]
    found = sorted(Path(p) for p in glob.glob(str(path)))  # noqa: PTH207 (absolute patterns too)
    if not found:
        raise InputError(f"{str(path)!r} matches no run file", key="path")
    return found


@dataclass(frozen=True, slots=True)
class RunFileRetriever(BatchRetriever):
    """Answers with what a run file holds: the build's own file when `path` is a glob."""

    path: Path
    run_format: RunFormat
    build: int = 0

    def answer_all(self, queries: Sequence[GoldQuery], top_k: int) -> Run:
        """The run file's results, as they are (like `--run`)."""
        files = run_files(self.path)
        if self.build >= len(files) and len(files) > 1:
            raise InputError(
                f"{self.build + 1} builds need as many run files; {str(self.path)!r} "
                f"matches {len(files)}",
                key="path",
            )
        file = files[min(self.build, len(files) - 1)]
        return load_run(file, self.run_format, query_ids=(q.query_id for q in queries))


def build(settings: RunFileSettings, context: RetrieverContext) -> RunFileRetriever:
    """The retriever for these settings (the file is read when it retrieves)."""
    return RunFileRetriever(settings.path, settings.run_format, context.build)


def answers_file(settings: RunFileSettings) -> Path:
    """The run file: the answers are its content."""
    return settings.path


KIND = RetrieverKind(
    name="run",
    description="A precomputed run file (JSONL or TREC), used as it is.",
    record=RunFileSettings.from_checked,
    build=build,
    settings=SETTINGS,
    answers_file=answers_file,
    depends_on=lambda settings, root: run_files(answers_file(settings)),
    deterministic=lambda settings: not is_pattern(settings.path),
    builds_held=lambda settings: (
        len(run_files(settings.path)) if is_pattern(settings.path) else None
    ),
    elsewhere=lambda settings: "a run file, with recorded latencies",
)
