"""The embedding retriever's vector store: a run embeds only the texts no batch file
holds, a killed run keeps the batches it finished, a damaged file is embedded again,
and the work shows as progress lines in documents.

Most tests drive `corpus_matrix` with an embedder that counts the texts it is given;
one kills a real `llm-eval retrieve` process (a stand-in model that stops answering
after a set number of batches, so the kill waits for files, never for time); the
`real_model` ones use all-MiniLM-L6-v2.
"""

from __future__ import annotations

import hashlib
import io
import itertools
import json
import os
import signal
import subprocess
import sys
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from llm_eval.corpus import Document, field_text
from llm_eval.endpoints import local
from llm_eval.endpoints.client import EndpointFailed
from llm_eval.errors import ExternalError
from llm_eval.progress import Progress
from llm_eval.retrievers import RetrieverContext, embedding, retriever_kind
from llm_eval.retrievers.embedding import Embedding, corpus_matrix, read_corpus
from llm_eval.retrievers.vector_store import VectorStore, text_key

ROWS = 10
"""Vectors a batch file holds in these tests (`BATCH_FILE_ROWS`)."""
STEP = 4


def vector(text: str) -> list[float]:
    """A fixed, non-zero vector for each text."""
    seed = int.from_bytes(hashlib.sha256(text.encode()).digest()[:8], "little")
    return np.random.default_rng(seed).normal(size=8).tolist()  # type: ignore[no-any-return]


class Counting:
    """An embedder that counts the texts and calls it answers; it fails every call
    after the first `answers` (a run stopped part way)."""

    def __init__(self, answers: int | None = None) -> None:
        self.texts: list[str] = []
        self.calls = 0
        self.answers = answers

    def embed(self, texts: Sequence[str]) -> list[list[float]]:
        if self.answers is not None and self.calls >= self.answers:
            raise EndpointFailed("http 503: stopped")
        self.calls += 1
        self.texts.extend(texts)
        return [vector(t) for t in texts]


def documents(count: int, edited: int | None = None) -> list[dict[str, str]]:
    return [
        {
            "_id": f"d{n}",
            "title": f"Title {n}",
            "text": f"passage {n} about topic {n % 7}" + (" (edited)" if n == edited else ""),
        }
        for n in range(count)
    ]


def write(path: Path, rows: list[dict[str, str]]) -> Path:
    path.write_text("".join(json.dumps(r) + "\n" for r in rows))
    return path


def written(document: Document) -> str:
    return field_text(document, ["title", "text"])


@pytest.fixture(autouse=True)
def small_batch_files(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(embedding, "BATCH_FILE_ROWS", ROWS)


def matrix(
    corpus: Path, store: Path, client: Any, progress: Progress | None = None
) -> np.ndarray[Any, Any]:
    read = read_corpus(corpus, written)
    return corpus_matrix(
        corpus, read, Embedding(client, STEP, "stub", progress), VectorStore.open(store), written
    )


def reference(rows: list[dict[str, str]]) -> np.ndarray[Any, Any]:
    vectors = np.array([vector(f"{r['title']} {r['text']}") for r in rows], dtype=np.float32)
    return vectors / np.linalg.norm(vectors, axis=1, keepdims=True)  # type: ignore[no-any-return]


def batch_files(store: Path) -> list[Path]:
    return sorted(store.glob("batch-*.npz"))


def test_a_second_run_embeds_nothing(tmp_path: Path) -> None:
    corpus = write(tmp_path / "corpus.jsonl", documents(45))
    cold = Counting()
    first = matrix(corpus, tmp_path / "store", cold)
    assert len(cold.texts) == 45
    assert cold.calls == 4 * 3 + 2  # 4 files of 10 in steps of 4, 4 and 2; the last of 5
    assert len(batch_files(tmp_path / "store")) == 5
    np.testing.assert_allclose(first, reference(documents(45)), atol=1e-6)
    warm = Counting()
    np.testing.assert_array_equal(matrix(corpus, tmp_path / "store", warm), first)
    assert (warm.texts, warm.calls) == ([], 0)


def test_an_edited_document_is_the_only_one_embedded_again(tmp_path: Path) -> None:
    matrix(write(tmp_path / "corpus.jsonl", documents(45)), tmp_path / "store", Counting())
    edited = documents(45, edited=17)
    corpus = write(tmp_path / "corpus.jsonl", edited)
    again = Counting()
    found = matrix(corpus, tmp_path / "store", again)
    assert again.texts == ["Title 17 passage 17 about topic 3 (edited)"]
    np.testing.assert_allclose(found, reference(edited), atol=1e-6)


def test_moved_and_new_documents_reuse_every_unchanged_text(tmp_path: Path) -> None:
    rows = documents(30)
    matrix(write(tmp_path / "corpus.jsonl", rows), tmp_path / "store", Counting())
    changed = [*reversed(rows[5:]), *documents(33)[30:]]  # 5 gone, the rest moved, 3 new
    again = Counting()
    found = matrix(write(tmp_path / "corpus.jsonl", changed), tmp_path / "store", again)
    assert sorted(again.texts) == [
        f"Title {n} passage {n} about topic {n % 7}" for n in (30, 31, 32)
    ]
    np.testing.assert_allclose(found, reference(changed), atol=1e-6)


def test_a_run_stopped_part_way_keeps_its_finished_batches(tmp_path: Path) -> None:
    corpus = write(tmp_path / "corpus.jsonl", documents(45))
    stopped = Counting(answers=7)  # 2 batch files of 10 take 6 steps; the 8th call fails
    with pytest.raises(ExternalError, match="embedding the corpus failed: http 503: stopped"):
        matrix(corpus, tmp_path / "store", stopped)
    assert len(batch_files(tmp_path / "store")) == 2
    resumed = Counting()
    found = matrix(corpus, tmp_path / "store", resumed)
    assert len(resumed.texts) == 45 - 2 * ROWS
    assert not set(resumed.texts) & set(stopped.texts[: 2 * ROWS])
    np.testing.assert_allclose(found, reference(documents(45)), atol=1e-6)


def _cut(path: Path) -> None:
    path.write_bytes(path.read_bytes()[:100])


def _garbage(path: Path) -> None:
    path.write_bytes(b"not a zip file")


def _not_finite(path: Path) -> None:
    with np.load(path) as batch:
        keys, vectors = batch["keys"], batch["vectors"].copy()
    vectors[3, 0] = np.nan
    with path.open("wb") as out:
        np.savez(out, keys=keys, vectors=vectors)


def _other_dimension(path: Path) -> None:
    with np.load(path) as batch:
        keys, vectors = batch["keys"], batch["vectors"]
    with path.open("wb") as out:
        np.savez(out, keys=keys, vectors=vectors[:, :5])


def _empty(path: Path) -> None:
    path.write_bytes(b"")


@pytest.mark.parametrize("damage", [_cut, _garbage, _not_finite, _other_dimension, _empty])
def test_a_damaged_batch_file_is_embedded_again(tmp_path: Path, damage: Any) -> None:
    corpus = write(tmp_path / "corpus.jsonl", documents(45))
    first = matrix(corpus, tmp_path / "store", Counting())
    damaged = batch_files(tmp_path / "store")[1]
    with np.load(damaged) as batch:
        lost = {key.decode() for key in batch["keys"].tolist()}
    damage(damaged)
    assert VectorStore.open(tmp_path / "store").ignored == 1
    again = Counting()
    np.testing.assert_allclose(matrix(corpus, tmp_path / "store", again), first, atol=1e-6)
    assert {text_key(t).decode() for t in again.texts} == lost
    assert len(again.texts) == ROWS
    assert VectorStore.open(tmp_path / "store").ignored == 0  # written again, whole


def test_progress_lines_in_documents_when_stderr_is_not_a_terminal(tmp_path: Path) -> None:
    corpus = write(tmp_path / "corpus.jsonl", documents(45))
    matrix(corpus, tmp_path / "store", Counting())
    corpus = write(tmp_path / "corpus.jsonl", documents(70))
    now = [100.0]

    class Slow(Counting):
        def embed(self, texts: Sequence[str]) -> list[list[float]]:
            now[0] += 3.0  # each step takes 3 s
            return super().embed(texts)

    stream = io.StringIO()
    matrix(corpus, tmp_path / "store", Slow(), Progress(stream, lambda: now[0], "documents"))
    lines = stream.getvalue().splitlines()
    assert lines[0] == "embedding 25 of 70 documents (45 cached) with stub"
    # Batch files of 10 in steps of 4, 4 and 2, one step every 3 s: the first update
    # ten seconds after the start shows a line (12 s, 14 documents), and so does the last.
    assert lines[1:] == [
        "[###########---------] 14/25 documents  1.2/s  ETA 9s",
        "[####################] 25/25 documents  1.0/s",
    ]


def test_a_short_run_says_nothing(tmp_path: Path) -> None:
    corpus = write(tmp_path / "corpus.jsonl", documents(45))
    stream = io.StringIO()
    matrix(corpus, tmp_path / "store", Counting(), Progress(stream, lambda: 0.0, "documents"))
    assert stream.getvalue() == ""


def test_documents_with_the_same_text_are_embedded_once(tmp_path: Path) -> None:
    rows = documents(3)
    rows.append({**rows[1], "_id": "copy"})
    corpus = write(tmp_path / "corpus.jsonl", rows)
    stream, client, clock = io.StringIO(), Counting(), itertools.count(0, 11)
    progress = Progress(stream, lambda: float(next(clock)), "documents")
    found = matrix(corpus, tmp_path / "store", client, progress)
    assert stream.getvalue().splitlines()[0] == "embedding 4 of 4 documents (0 cached) with stub"
    assert len(client.texts) == 3
    np.testing.assert_array_equal(found[3], found[1])


def test_a_store_of_many_small_files_is_written_again_whole(tmp_path: Path) -> None:
    """Runs that each embedded an edited document leave a file each; once there are
    more than twice the files the corpus needs, and 8, the store is rewritten with only
    the vectors in use."""
    rows = documents(30)
    corpus = write(tmp_path / "corpus.jsonl", rows)
    first = matrix(corpus, tmp_path / "store", Counting())
    for edited in range(12):  # 3 files, then one more a run
        rows[edited]["text"] += " (edited)"
        write(corpus, rows)
        found = matrix(corpus, tmp_path / "store", Counting())
    # After the 12th run's file the store has 3 + 12, more than 2 x 3 + 8: it is
    # written again as 3.
    assert len(batch_files(tmp_path / "store")) == 3
    store = VectorStore.open(tmp_path / "store")
    assert sorted(store.rows) == sorted(text_key(written_text(r)) for r in rows)
    np.testing.assert_allclose(found, reference(rows), atol=1e-6)
    again = Counting()
    np.testing.assert_array_equal(matrix(corpus, tmp_path / "store", again), found)
    assert again.texts == []
    assert not np.allclose(found, first)


def written_text(row: dict[str, str]) -> str:
    return f"{row['title']} {row['text']}"


# --- a real process, killed ---------------------------------------------------------------

STAND_IN = '''
"""A stand-in for sentence-transformers: fixed vectors per text; each call's texts are
logged; after BLOCK_AFTER calls it stops answering (as a model mid-corpus when the
process is killed)."""
import hashlib, os, time
import numpy as np

class SentenceTransformer:
    calls = 0

    def __init__(self, folder, **options):
        pass

    def encode(self, texts, **options):
        SentenceTransformer.calls += 1
        if SentenceTransformer.calls > int(os.environ.get("BLOCK_AFTER", "1000000")):
            while True:
                time.sleep(1)
        with open(os.environ["ENCODED_LOG"], "a") as log:
            log.write(f"{len(texts)}\\n")
        rows = []
        for text in texts:
            seed = int.from_bytes(hashlib.sha256(text.encode()).digest()[:8], "little")
            rows.append(np.random.default_rng(seed).normal(size=8))
        return np.array(rows, dtype=np.float32)
'''


def retrieve(root: Path, **env: str) -> subprocess.Popen[str]:
    args = ["retrieve", "--config", str(root / "llm-eval.yaml"), "--out", str(root / "run.jsonl")]
    code = "import sys; from llm_eval.cli import main; sys.exit(main(sys.argv[1:]))"
    environ = {**os.environ, "PYTHONPATH": str(root / "lib"), **env}
    environ["ENCODED_LOG"] = str(root / "encoded.log")
    return subprocess.Popen(
        [sys.executable, "-c", code, *args],
        env=environ,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
        text=True,
    )


def encoded(root: Path) -> int:
    log = root / "encoded.log"
    texts = sum(int(n) for n in log.read_text().split()) if log.exists() else 0
    log.unlink(missing_ok=True)
    return texts


def test_a_killed_process_keeps_its_batch_files_and_the_next_run_embeds_the_rest(
    tmp_path: Path,
) -> None:
    """600 documents: batch files of 256 texts, the model answering 32 at a time. The
    stand-in stops answering at its 17th call, after the second file; the test kills
    the process once both files are there."""
    (tmp_path / "lib" / "sentence_transformers").mkdir(parents=True)
    (tmp_path / "lib" / "sentence_transformers" / "__init__.py").write_text(STAND_IN)
    (tmp_path / "model").mkdir()
    (tmp_path / "model" / "modules.json").write_text("[]")
    write(tmp_path / "corpus.jsonl", documents(600))
    query = {"query_id": "q1", "query": "Title 3 passage 3 about topic 3", "relevant": ["d3"]}
    (tmp_path / "gold.jsonl").write_text(json.dumps(query) + "\n")
    retriever = {"kind": "embedding", "model_path": str(tmp_path / "model"), "batch_size": 32}
    (tmp_path / "llm-eval.yaml").write_text(
        f"gold: [{tmp_path / 'gold.jsonl'}]\ncorpus: {tmp_path / 'corpus.jsonl'}\n"
        f"output: {tmp_path / 'out'}\nmetrics: [recall@1]\nretriever: {json.dumps(retriever)}\n"
    )
    store = tmp_path / "out" / "cache" / "embedding"
    process = retrieve(tmp_path, BLOCK_AFTER="16")
    deadline = time.monotonic() + 120  # a bound on a broken run, not a measurement
    while len(list(store.glob("*/batch-*.npz"))) < 2:
        assert process.poll() is None, process.communicate()[1]
        assert time.monotonic() < deadline, "no batch file was written"
        time.sleep(0.05)
    assert process.poll() is None  # stopped in the third batch, not finished
    process.send_signal(signal.SIGKILL)
    process.communicate()
    assert process.returncode == -signal.SIGKILL
    assert encoded(tmp_path) == 16 * 32
    assert len(list(store.glob("*/batch-*.npz"))) == 2

    resumed = retrieve(tmp_path)
    _, stderr = resumed.communicate()
    assert resumed.returncode == 0, stderr
    assert encoded(tmp_path) == 88 + 1  # the rest, then the query
    answers = json.loads((tmp_path / "run.jsonl").read_text().splitlines()[0])
    assert answers["results"][0]["doc_id"] == "d3"


# --- the real model ---------------------------------------------------------------------

DOCS = [
    {"_id": f"doc{n}", "title": title, "text": text}
    for n, (title, text) in enumerate(
        [
            ("Sorting", "sorted returns a new sorted list"),
            ("Dictionaries", "a dict maps keys to values"),
            ("Files", "open a file and read its lines"),
            ("Sorting", "list sort sorts in place"),
            ("Threads", "start a thread and join it when done"),
            ("Sockets", "a socket connects to a server over TCP"),
            ("Dates", "datetime parses and formats dates"),
            ("Paths", "pathlib joins and resolves paths"),
            ("JSON", "json loads and dumps objects"),
            ("Regex", "re matches patterns in text"),
            ("Logging", "logging writes records to handlers"),
            ("Tests", "pytest collects and runs test functions"),
        ]
    )
]


def build_minilm(folder: Path, tmp_path: Path) -> Any:
    write(tmp_path / "corpus.jsonl", DOCS)
    context = RetrieverContext(tmp_path / "corpus.jsonl", tmp_path / "cache")
    return retriever_kind("embedding").create({"model_path": str(folder)}, context)


@pytest.mark.real_model
def test_minilm_vectors_from_the_store_are_the_models(
    minilm: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(embedding, "BATCH_FILE_ROWS", 5)
    from sentence_transformers import SentenceTransformer

    model = SentenceTransformer(str(minilm), local_files_only=True)
    texts = [f"{d['title']} {d['text']}" for d in DOCS]
    expected = model.encode(texts, normalize_embeddings=True)
    cold = build_minilm(minilm, tmp_path).searcher.matrix
    np.testing.assert_allclose(cold, expected, atol=1e-5)
    assert len(list((tmp_path / "cache" / "embedding").glob("*/batch-*.npz"))) == 3

    def no_model(folder: str) -> Any:
        raise AssertionError("the model was loaded")

    monkeypatch.setattr(local, "load_model", no_model)
    warm = build_minilm(minilm, tmp_path).searcher.matrix
    np.testing.assert_array_equal(warm, cold)


def test_a_fifo_where_a_batch_file_belongs_is_named_not_waited_on(tmp_path: Path) -> None:
    """Opening a FIFO for reading waits for a writer that never comes: the store is
    opened in a process of its own, the timeout a guard against that wait."""
    store = tmp_path / "store"
    store.mkdir()
    fifo = store / "batch-0123456789abcdef.npz"
    os.mkfifo(fifo)
    code = (
        "import sys; from pathlib import Path\n"
        "from llm_eval.errors import InputError\n"
        "from llm_eval.retrievers.vector_store import VectorStore\n"
        "try:\n"
        "    VectorStore.open(Path(sys.argv[1]))\n"
        "except InputError as exc:\n"
        "    print(exc)\n"
    )
    done = subprocess.run(
        [sys.executable, "-c", code, str(store)],
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert (done.returncode, done.stderr) == (0, "")
    assert done.stdout == f"{fifo}: is a FIFO, expected a regular file\n"
