"""Your own Python retriever, called in process.

    retriever:
      kind: python
      target: my_rag.search:Retriever     # module:function, or module:Class
      init: {index: indexes/main}         # keyword arguments of the class, once;
                                          # strings may read ${VAR} / ${VAR:-default}
      python_path: [src]                  # folders added to sys.path
      concurrency: 4                      # threads; default 1

The target is called as `target(query_text, top_k)` (a class: instantiated once, then
`instance.retrieve(query_text, top_k)`) and returns its hits best first, each a dict
or an object with `doc_id` and optionally `score`, `text`, `document` and `page`; or
`{"results": hits, "answer": "…"}` with the answer the RAG system generated from them
(judged for faithfulness and answer relevance).
An exception raised for one query is recorded as that query's error
(`ValueError: …`) and counted by error_rate; the others go on.
"""

from __future__ import annotations

import contextlib
import importlib
import inspect
import os
import sys
import time
from collections.abc import Callable, Iterable, Iterator, Mapping
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

from llm_eval.digest import digest
from llm_eval.errors import ExternalError, InputError
from llm_eval.retrievers import RetrieverContext, RetrieverKind
from llm_eval.retrievers.pool import (
    CACHE_KEY,
    Hits,
    PooledRetriever,
    QueryFailed,
    Search,
    check_concurrency,
    ranked_result,
    resolved_cache_key,
)
from llm_eval.settings import Setting
from llm_eval.textio import file_digest

# --- settings -------------------------------------------------------------------------


def check_target(value: Any) -> str | None:
    """`module:attribute`, both dotted names."""
    module, _, attribute = value.partition(":") if isinstance(value, str) else ("", "", "")
    names = [*module.split("."), *attribute.split(".")]
    if not all(name.isidentifier() for name in names):
        return f"must be module:function or module:Class (e.g. my_rag.search:run), got {value!r}"
    return None


def check_init(value: Any) -> str | None:
    """Keyword arguments: a mapping with identifier keys. The values are never shown:
    they may hold secrets read from the environment."""
    if not isinstance(value, dict):
        return f"must be a mapping of keyword arguments, got {type(value).__name__}"
    for name in value:
        if not str(name).isidentifier():
            return f"{name!r} is not a keyword argument name (letters, digits, _)"
    return None


def check_python_path(value: Any) -> str | None:
    """A list of folders."""
    if not isinstance(value, list) or not all(isinstance(p, str) and p for p in value):
        return f"must be a list of folders, got {value!r}"
    return None


SETTINGS: Mapping[str, Setting] = {
    "target": Setting(
        None,
        check_target,
        "module:function, or module:Class with a retrieve method; called with (query_text, top_k).",
        required=True,
    ),
    "init": Setting({}, check_init, "Keyword arguments of the class, instantiated once."),
    "python_path": Setting(
        [], check_python_path, "Folders added to sys.path, so the target can be imported."
    ),
    "concurrency": Setting(1, check_concurrency, "Threads calling the target at once."),
    "cache_key": CACHE_KEY,
}


@dataclass(frozen=True, slots=True)
class PythonSettings:
    """The checked settings of the python kind (`SETTINGS` says what each one means)."""

    target: str
    """`module:function` or `module:Class`."""
    init: Mapping[str, object] = field(repr=False)
    """The class's keyword arguments; never shown: they may hold secrets read from the
    environment."""
    python_path: tuple[str, ...]
    concurrency: int
    cache_key: str | None
    """As written: its `${ENV_VAR}` are read when the cache's key is made."""

    @classmethod
    def from_checked(cls, values: Mapping[str, Any]) -> PythonSettings:
        """The record of checked settings (`RetrieverKind.checked`: every one present)."""
        return cls(
            target=values["target"],
            init=values["init"],
            python_path=tuple(values["python_path"]),
            concurrency=values["concurrency"],
            cache_key=values["cache_key"],
        )


# --- loading the target (I/O) ---------------------------------------------------------


def add_to_path(folders: Iterable[str]) -> None:
    """Put the folders first on sys.path (relative to the working directory)."""
    for folder in reversed(list(folders)):
        path = Path(folder)
        if not path.is_dir():
            raise InputError(f"no such folder: {folder}", key="python_path")
        entry = str(path.resolve())
        if entry not in sys.path:
            sys.path.insert(0, entry)
    importlib.invalidate_caches()  # the folders may have gained modules since the last import


def import_target(target: str) -> tuple[Any, Any]:
    """The module and the object `module:attribute` names."""
    module_name, _, attribute = target.partition(":")
    try:
        module = importlib.import_module(module_name)
    except ModuleNotFoundError as exc:
        missing = exc.name or ""
        if module_name != missing and not module_name.startswith(missing + "."):
            raise _raised("importing " + module_name, exc) from exc  # one of its imports
        raise InputError(
            f"cannot import {module_name!r}: {exc} (add its folder to python_path)", key="target"
        ) from None
    except Exception as exc:
        raise _raised("importing " + module_name, exc) from exc
    found: Any = module
    for name in attribute.split("."):
        if not hasattr(found, name):
            raise InputError(f"{module_name} has no attribute {attribute!r}", key="target")
        found = getattr(found, name)
    return module, found


def _raised(doing: str, exc: BaseException) -> ExternalError:
    return ExternalError(f"the python retriever raised {error_text(exc)} while {doing}")


def error_text(exc: BaseException) -> str:
    """`ValueError: message`, or the type alone when there is no message."""
    message = str(exc)
    return f"{type(exc).__name__}: {message}" if message else type(exc).__name__


def callable_target(target: str, found: Any, init: Mapping[str, object]) -> Callable[..., Any]:
    """The function to call per query: the target, or a new instance's `retrieve`."""
    if not inspect.isclass(found):
        if init:
            raise InputError("is only for a class target", key="init")
        if not callable(found):
            raise InputError(f"{target} is not a function or a class", key="target")
        return found
    if not callable(getattr(found, "retrieve", None)):
        raise InputError(f"class {target} has no retrieve method", key="target")
    try:
        instance: Any = found(**init)
    except Exception as exc:
        raise _raised(f"creating {target}", exc) from exc
    return instance.retrieve


# --- the searcher ---------------------------------------------------------------------


def _field_getter(hit: Any) -> Callable[[str], Any]:
    if isinstance(hit, Mapping):
        return hit.get
    return lambda name: getattr(hit, name, None)


def to_hits(returned: Any, latency_ms: float) -> Hits:
    """The hits the target returned (and its answer), checked; QueryFailed when they are
    not hits."""
    answer = None
    if isinstance(returned, Mapping) and "results" in returned:
        answer = returned.get("answer")
        if answer is not None and not isinstance(answer, str):
            kind = type(answer).__name__
            raise QueryFailed(f"malformed result: answer must be text, got {kind}")
        returned = returned["results"]
    if isinstance(returned, str | bytes | Mapping) or not isinstance(returned, Iterable):
        kind = type(returned).__name__
        raise QueryFailed(f"malformed result: expected a list of hits, got {kind}")
    results = tuple(
        ranked_result(_field_getter(hit), f"hits[{index}]") for index, hit in enumerate(returned)
    )
    return Hits(results, latency_ms, answer)


@dataclass(frozen=True, slots=True)
class PythonSearcher:
    """Calls the user's function for one query."""

    function: Callable[[str, int], Any]

    @contextlib.contextmanager
    def session(self) -> Iterator[Search]:
        """The search function (nothing to open)."""
        yield self.search

    def search(self, query: str, top_k: int) -> Hits:
        """The target's hits; an exception it raises fails the query with its type and message."""
        started, spent = time.perf_counter(), time.process_time()
        try:
            returned = self.function(query, top_k)
            if isinstance(returned, Iterator):
                returned = list(returned)  # a generator runs now: timed, its errors its own
        except Exception as exc:
            raise QueryFailed(error_text(exc)) from exc
        wall = (time.perf_counter() - started) * 1000
        cpu = (time.process_time() - spent) * 1000
        return replace(to_hits(returned, wall), cpu_ms=cpu)


def source_folder(module: Any) -> Path | None:
    """The folder of the top-level package the module belongs to, or None for a module
    that is not in a package (or has no file)."""
    top = sys.modules.get((getattr(module, "__name__", "") or "").partition(".")[0])
    paths = list(getattr(top, "__path__", []) or [])
    return Path(paths[0]) if paths else None


def source_digest(module: Any) -> str | None:
    """A digest of the code the answers depend on: every .py file of the target's
    top-level package (names and contents), or the module's own file outside a package.
    Code outside it (installed libraries, data files) is not seen: that is what the
    retriever's `cache_key` setting is for."""
    folder = source_folder(module)
    if folder is None:
        file = getattr(module, "__file__", None)
        return file_digest(file) if file else None
    files = sorted(p for p in folder.rglob("*.py") if "__pycache__" not in p.parts)
    return digest({str(p.relative_to(folder)): file_digest(p) for p in files})


# --- the kind -------------------------------------------------------------------------


def build(settings: PythonSettings, context: RetrieverContext) -> PooledRetriever:
    """Import the target (from python_path) and, for a class, create its one instance."""
    add_to_path(settings.python_path)
    module, found = import_target(settings.target)
    function = callable_target(settings.target, found, settings.init)
    identity = {
        "kind": "python",
        "target": settings.target,
        "init": settings.init,
        "source": source_digest(module),
        "cache_key": resolved_cache_key(settings.cache_key, os.environ),
    }
    return PooledRetriever(PythonSearcher(function), settings.concurrency, identity)


def depends_on(settings: PythonSettings, root: Path) -> list[Path]:
    """The target's top-level package (or module) inside the repository, found on its
    python_path: what the pre-push hook watches."""
    top = settings.target.partition(":")[0].partition(".")[0]
    found = []
    for base in [*settings.python_path, "."]:
        for candidate in (Path(base) / top, Path(base) / f"{top}.py"):
            if top and (root / candidate).exists() and not candidate.is_absolute():
                found.append(Path(candidate.as_posix().removeprefix("./")))
    return found


KIND = RetrieverKind(
    name="python",
    description="Your own Python function or class, called in process.",
    record=PythonSettings.from_checked,
    build=build,
    settings=SETTINGS,
    depends_on=depends_on,
    fresh_process=True,
    elsewhere=lambda settings: (
        "a python retriever, which may call a service (--latency cpu counts it in)"
    ),
)
