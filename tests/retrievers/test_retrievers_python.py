"""The python retriever with real functions and classes, in modules written to tmp_path."""

from __future__ import annotations

import hashlib
import importlib
import sys
import textwrap
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from conftest import Cli
from servers import Project, write_project

from llm_eval.runs import RankedResult
from llm_eval.runs_io import load_run

# Every test writes its own module under a name of its own: modules are imported once
# per process, and a second test must not get the first one's module from sys.modules.
SEARCH = """\
import re
import threading

CALLS = []
THREADS = set()


def words(text):
    return set(re.findall(r"\\w+", text.lower()))


DOCS = {
    "builtins.sorted#0": "sorted returns a new sorted list from the items in iterable key",
    "stdtypes-list#4": "list sort sorts the list in place key reverse",
    "dict.get#0": "get returns the value for key if key is in the dictionary else default",
}


def rank(query, top_k):
    found = sorted(DOCS, key=lambda d: (-len(words(query) & words(DOCS[d])), d))
    return [(d, float(len(words(query) & words(DOCS[d])))) for d in found][:top_k]
"""


@pytest.fixture
def src(tmp_path: Path) -> Iterator[Path]:
    folder = tmp_path / "src"
    folder.mkdir()
    saved = list(sys.path)
    yield folder
    sys.path[:] = saved


def module_name(request: pytest.FixtureRequest) -> str:
    return "retriever_" + hashlib.sha256(request.node.nodeid.encode()).hexdigest()[:12]


def write_module(src: Path, name: str, body: str) -> None:
    (src / f"{name}.py").write_text(SEARCH + textwrap.dedent(body), encoding="utf-8")


def project_for(tmp_path: Path, src: Path, target: str, **settings: Any) -> Project:
    retriever = {"kind": "python", "target": target, "python_path": [str(src)], **settings}
    return write_project(tmp_path, retriever, queries=6)


def retrieve(project: Project, cli: Cli, *args: str) -> tuple[int, str]:
    """`llm-eval retrieve` on the project: the exit code and stdout and stderr together."""
    code, out, err = cli(
        "retrieve", "--config", project.config, "--out", project.root / "run.jsonl", *args
    )
    return code, out + err


def test_a_function_returning_dicts(
    tmp_path: Path, src: Path, request: pytest.FixtureRequest, cli: Cli
) -> None:
    name = module_name(request)
    write_module(
        src,
        name,
        """
        def search(query, top_k):
            CALLS.append((query, top_k))
            return [{"doc_id": d, "score": s, "text": DOCS[d]} for d, s in rank(query, top_k)]
        """,
    )
    project = project_for(tmp_path, src, f"{name}:search")
    code, out, _ = cli("gate", "--config", project.config, "--criteria", project.criteria)
    assert code == 0
    assert "llm-eval gate: PASS" in out
    module = importlib.import_module(name)
    assert sorted(module.CALLS) == sorted((text, 10) for text in project.texts)
    assert project.report()["queries"]["failed"] == {}

    assert retrieve(project, cli, "--no-cache")[0] == 0
    run = load_run(project.root / "run.jsonl")
    first = run.queries[project.queries[0]["query_id"]]
    expected = [RankedResult(d, s, module.DOCS[d]) for d, s in module.rank(project.texts[0], 10)]
    assert list(first.results) == expected
    assert first.latency_ms is not None


def test_a_class_instantiated_once_with_init_and_objects_as_hits(
    tmp_path: Path, src: Path, request: pytest.FixtureRequest, cli: Cli
) -> None:
    name = module_name(request)
    write_module(
        src,
        name,
        """
        from dataclasses import dataclass

        INSTANCES = []


        @dataclass
        class Hit:
            doc_id: str
            score: float
            document: str
            page: int


        class Retriever:
            def __init__(self, prefix, pages=1):
                INSTANCES.append(self)
                self.prefix = prefix
                self.pages = pages

            def retrieve(self, query, top_k):
                THREADS.add(threading.current_thread().name)
                for doc_id, score in rank(query, top_k):  # a generator is fine too
                    yield Hit(self.prefix + doc_id, score, "manual.pdf", self.pages)
        """,
    )
    init = {"prefix": "x:", "pages": 3}
    project = project_for(tmp_path, src, f"{name}:Retriever", init=init, concurrency=3)
    code, out = retrieve(project, cli)
    assert code == 0, out
    module = importlib.import_module(name)
    assert len(module.INSTANCES) == 1
    run = load_run(project.root / "run.jsonl")
    (first, *_) = run.queries[project.queries[0]["query_id"]].results
    assert first == RankedResult("x:builtins.sorted#0", first.score, None, "manual.pdf", 3)
    assert module.THREADS and all(t.startswith("llm-eval-retrieve") for t in module.THREADS)


def test_the_class_gets_init_with_environment_variables_read(
    tmp_path: Path,
    src: Path,
    request: pytest.FixtureRequest,
    cli: Cli,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """`${EMBEDDING_MODEL}` reaches the class as the variable's value, also in a nested
    mapping and a list; a `$` that opens no `${` is passed as written."""
    name = module_name(request)
    write_module(
        src,
        name,
        """
        GIVEN = []


        class Retriever:
            def __init__(self, **init):
                GIVEN.append(init)

            def retrieve(self, query, top_k):
                return [{"doc_id": d, "score": s} for d, s in rank(query, top_k)]
        """,
    )
    monkeypatch.setenv("EMBEDDING_MODEL", str(tmp_path / "models" / "e5"))
    monkeypatch.setenv("PASSWORD", "pa${ss}word")  # read once: its `${` is text
    monkeypatch.delenv("REPLICA", raising=False)
    init = {
        "password": "${PASSWORD}",
        "model_path": "${EMBEDDING_MODEL}",
        "index": {"hosts": ["${REPLICA:-replica.internal}", "$HOST"], "price": "$5"},
    }
    project = project_for(tmp_path, src, f"{name}:Retriever", init=init)
    code, out = retrieve(project, cli)
    assert code == 0, out
    given = importlib.import_module(name).GIVEN
    assert given == [
        {
            "password": "pa${ss}word",
            "model_path": str(tmp_path / "models" / "e5"),
            "index": {"hosts": ["replica.internal", "$HOST"], "price": "$5"},
        }
    ]


def test_an_exception_for_one_query_is_that_query_error(
    tmp_path: Path, src: Path, request: pytest.FixtureRequest, cli: Cli
) -> None:
    name = module_name(request)
    write_module(
        src,
        name,
        """
        def search(query, top_k):
            if "sort" in query:
                raise ValueError(f"no index for {query[:10]!r}")
            if "dict" in query:
                raise KeyError()
            return [{"doc_id": d, "score": s} for d, s in rank(query, top_k)]
        """,
    )
    project = project_for(tmp_path, src, f"{name}:search", max_error_rate=0.5)
    code, out = retrieve(project, cli)
    assert code == 0, out
    run = load_run(project.root / "run.jsonl")
    assert run.failed() == {
        "a-001": "ValueError: no index for 'How do I s'",
        "a-002": "ValueError: no index for 'sorted() v'",
        "a-003": "KeyError",
    }
    assert all(run.queries[q].results for q in ("a-004", "a-005", "a-006"))

    project = project_for(tmp_path, src, f"{name}:search")
    assert retrieve(project, cli) == (
        4,
        "llm-eval: error: retriever failed on 3 of 6 queries (50% > max_error_rate 0%): "
        "2 ValueError, 1 KeyError; the causes: 1 of 6 queries: ValueError: no index for "
        "'How do I s'; 1 of 6 queries: ValueError: no index for 'sorted() v'\n",
    )


@pytest.mark.parametrize(
    ("returned", "error"),
    [
        ("None", "malformed result: expected a list of hits, got NoneType"),
        ("{'doc_id': 'a'}", "malformed result: expected a list of hits, got dict"),
        (
            "[{'score': 1}]",
            "malformed result: hits[0].doc_id missing or not a non-empty string, got None",
        ),
        (
            "[{'doc_id': 'a', 'score': float('nan')}]",
            "malformed result: hits[0].score must be a finite number, got nan",
        ),
        ("[{'doc_id': 3, 'page': 2}]", None),
        ("{'results': [{'doc_id': 3, 'page': 2}], 'answer': 'Use sorted().'}", None),
        ("{'results': [{'doc_id': 3, 'page': 2}]}", None),  # no answer: none
        (
            "{'results': [{'doc_id': 3, 'page': 2}], 'answer': 42}",
            "malformed result: answer must be text, got int",
        ),
    ],
)
def test_what_the_target_returns_is_checked(
    tmp_path: Path,
    src: Path,
    request: pytest.FixtureRequest,
    cli: Cli,
    returned: str,
    error: str | None,
) -> None:
    name = module_name(request)
    write_module(src, name, f"def search(query, top_k):\n    return {returned}\n")
    project = project_for(tmp_path, src, f"{name}:search", max_error_rate=1)
    assert retrieve(project, cli)[0] == 0
    run = load_run(project.root / "run.jsonl")
    answer = run.queries[project.queries[0]["query_id"]]
    assert answer.error == error
    if error is None:
        assert answer.results == (RankedResult("3", page=2),)
        assert answer.answer == ("Use sorted()." if "'answer'" in returned else None)


@pytest.mark.parametrize(
    ("target", "settings", "code", "message"),
    [
        (
            "nosuch_module_xyz:search",
            {},
            3,
            "{config}:5: retriever.target: cannot import 'nosuch_module_xyz': No module named "
            "'nosuch_module_xyz' (add its folder to python_path)",
        ),
        (
            "{name}:missing",
            {},
            3,
            "{config}:5: retriever.target: {name} has no attribute 'missing'",
        ),
        (
            "{name}:DOCS",
            {},
            3,
            "{config}:5: retriever.target: {name}:DOCS is not a function or a class",
        ),
        (
            "{name}:search",
            {"init": {"a": 1}},
            3,
            "{config}:9: retriever.init: is only for a class target",
        ),
        (
            "{name}:Broken",
            {},
            4,
            "the python retriever raised RuntimeError: no index at /nowhere while creating "
            "{name}:Broken",
        ),
        (
            "{name}:NoMethod",
            {},
            3,
            "{config}:5: retriever.target: class {name}:NoMethod has no retrieve method",
        ),
        (
            "bad target",
            {},
            3,
            "{config}:5: retriever.target: must be module:function or module:Class (e.g. "
            "my_rag.search:run), got 'bad target'",
        ),
    ],
)
def test_a_target_that_cannot_be_used_is_an_error_before_any_query(
    tmp_path: Path,
    src: Path,
    request: pytest.FixtureRequest,
    cli: Cli,
    target: str,
    settings: dict[str, Any],
    code: int,
    message: str,
) -> None:
    name = module_name(request)
    write_module(
        src,
        name,
        """
        def search(query, top_k):
            return []


        class Broken:
            def __init__(self):
                raise RuntimeError("no index at /nowhere")

            def retrieve(self, query, top_k):
                return []


        class NoMethod:
            pass
        """,
    )
    project = project_for(tmp_path, src, target.format(name=name), **settings)
    got, out = retrieve(project, cli)
    assert got == code
    assert out == "llm-eval: error: " + message.format(config=project.config, name=name) + "\n"


def test_python_path_must_exist(tmp_path: Path, cli: Cli) -> None:
    project = project_for(tmp_path, tmp_path / "missing", "m:f")
    assert retrieve(project, cli) == (
        3,
        f"llm-eval: error: {project.config}:7: retriever.python_path: no such folder: "
        f"{tmp_path / 'missing'}\n",
    )


def test_the_cache_sees_edits_to_the_target_module(
    tmp_path: Path, src: Path, request: pytest.FixtureRequest, cli: Cli
) -> None:
    name = module_name(request)
    body = "def search(query, top_k):\n    CALLS.append(query)\n    return [{'doc_id': 'd'}]\n"
    write_module(src, name, body)
    project = project_for(tmp_path, src, f"{name}:search")
    assert retrieve(project, cli, "--cache")[0] == 0
    assert (
        "6 of 6 queries answered from the retrieval cache" in retrieve(project, cli, "--cache")[1]
    )
    module = importlib.import_module(name)
    assert len(module.CALLS) == 6

    write_module(src, name, body + "# edited\n")
    assert len(project.cache_entries()) == 6
    assert "retrieval cache" not in retrieve(project, cli, "--cache")[1]
    assert len(project.cache_entries()) == 12


def test_the_gate_asks_the_retriever_every_time_unless_told_to_cache(
    tmp_path: Path, src: Path, request: pytest.FixtureRequest, cli: Cli
) -> None:
    """A broken ranking must never be hidden behind answers cached while it worked."""
    name = module_name(request)
    body = "def search(query, top_k):\n    CALLS.append(query)\n    return [{'doc_id': 'd'}]\n"
    write_module(src, name, body)
    project = project_for(tmp_path, src, f"{name}:search")
    for _ in range(2):
        code, out = retrieve(project, cli)
        assert code == 0
        assert "retrieval cache" not in out
    assert len(importlib.import_module(name).CALLS) == 12
    assert project.cache_entries() == []


def test_with_the_cache_on_an_edit_anywhere_in_the_package_is_seen(
    tmp_path: Path, src: Path, request: pytest.FixtureRequest, cli: Cli
) -> None:
    package = src / module_name(request)
    package.mkdir()
    (package / "__init__.py").write_text("")
    (package / "ranking.py").write_text("def order(docs):\n    return docs\n")
    (package / "api.py").write_text(
        "from .ranking import order\nCALLS = []\n"
        "def search(query, top_k):\n    CALLS.append(query)\n"
        "    return order([{'doc_id': 'a'}, {'doc_id': 'b'}])\n"
    )
    project = project_for(tmp_path, src, f"{package.name}.api:search")
    assert retrieve(project, cli, "--cache")[0] == 0
    assert "6 of 6 queries answered" in retrieve(project, cli, "--cache")[1]
    # The ranking is reversed in a module the target only imports.
    (package / "ranking.py").write_text("def order(docs):\n    return docs[::-1]\n")
    assert "retrieval cache" not in retrieve(project, cli, "--cache")[1]


def test_the_cache_key_setting_is_part_of_the_key(
    tmp_path: Path,
    src: Path,
    request: pytest.FixtureRequest,
    cli: Cli,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    name = module_name(request)
    write_module(src, name, "def search(query, top_k):\n    return [{'doc_id': 'd'}]\n")
    project = project_for(tmp_path, src, f"{name}:search", cache_key="index-${INDEX_VERSION}")
    monkeypatch.setenv("INDEX_VERSION", "1")
    assert retrieve(project, cli, "--cache")[0] == 0
    assert "6 of 6 queries answered" in retrieve(project, cli, "--cache")[1]
    monkeypatch.setenv("INDEX_VERSION", "2")
    assert "retrieval cache" not in retrieve(project, cli, "--cache")[1]
    monkeypatch.delenv("INDEX_VERSION")
    code, out = retrieve(project, cli, "--cache")
    assert code == 3
    assert "environment variable INDEX_VERSION is not set (used by the cache_key setting)" in out
