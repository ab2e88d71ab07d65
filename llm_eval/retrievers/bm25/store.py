"""Reading the corpus into an index, and the index cache on disk.

The index is cached under `<cache_dir>/bm25/<key>`, where the key covers the corpus
bytes, the index settings, the bm25s version and the index format below.
"""

from __future__ import annotations

import contextlib
import functools
import json
import shutil
import tempfile
from collections.abc import Callable, Iterable, Sequence
from pathlib import Path
from typing import Any

import numpy as np

from llm_eval.corpus import field_text
from llm_eval.corpus_io import count_documents, iter_corpus
from llm_eval.digest import digest
from llm_eval.errors import InputError
from llm_eval.retrievers.bm25.analyzer import Analyzer
from llm_eval.retrievers.bm25.index import Index, SavedModel, Vocabulary, build_model
from llm_eval.retrievers.bm25.settings import BM25Config, bm25s_folder
from llm_eval.textio import (
    TEMP_SUFFIX,
    file_digest,
    open_regular,
    read_json_file,
    sweep_stale_temporaries,
    temporary_prefix,
    write_atomic,
)

INDEX_FORMAT = 2
"""Bump when the analysis or the cache layout changes, so old caches are not reused."""
_DOC_IDS_FILE = "doc_ids.json"
_TEXTS_FILE = "texts.utf8"
"""Every document's `text`, UTF-8, one after the other in index order; where each one
ends is in `_TEXT_ENDS_FILE`. A warm run reads the texts of the documents it returns
from here instead of parsing the whole corpus file again."""
_TEXT_ENDS_FILE = "text_ends.npy"
_NONOCCURRENCE_METHODS = ("bm25l", "bm25+")
"""The methods whose saved index has a non-occurrence array (bm25s's
`methods_requiring_nonoccurrence`)."""


def index_key(corpus: Path, config: BM25Config) -> str:
    """A digest of the corpus bytes, the settings and the index format."""
    settings = [
        config.k1,
        config.b,
        config.method,
        config.stemmer,
        config.stopwords,
        config.fields,
        _bm25s_version(),
        INDEX_FORMAT,
    ]
    return digest([file_digest(corpus), settings])


def _bm25s_version() -> str:
    """bm25s's version, from its `bm25s-<version>.dist-info` folder beside the package
    (the layout every wheel install has), which costs a warm gate nothing; else from
    importlib.metadata, whose import alone is 12 ms of CPU."""
    found = list(bm25s_folder().parent.glob("bm25s-*.dist-info"))
    if len(found) == 1:
        return found[0].name.removeprefix("bm25s-").removesuffix(".dist-info")
    from importlib.metadata import version

    return version("bm25s")


_PROGRESS_EVERY = 1000
"""Documents analysed between two calls of the progress callback."""


def index_corpus(
    corpus: Path,
    config: BM25Config,
    analyzer: Analyzer,
    progress: Callable[[int, int], None] | None = None,
) -> Index:
    """Read and index the corpus; an empty corpus is an InputError. `progress` is told
    (documents analysed, documents in all) as the corpus is read."""
    doc_ids, documents, terms = analysed_corpus(corpus, config, analyzer, progress)
    model = build_model(documents, len(terms), config)
    model.vocab_dict = terms
    return Index.of(model, doc_ids)


_ANALYSED: dict[tuple[Any, ...], tuple[list[str], list[list[int]], dict[str, int]]] = {}
"""The last corpus analysed, by `analysed_corpus`'s key."""


def analysed_corpus(
    corpus: Path,
    config: BM25Config,
    analyzer: Analyzer,
    progress: Callable[[int, int], None] | None = None,
) -> tuple[list[str], list[list[int]], dict[str, int]]:
    """The corpus's doc ids, each document as term ids, and the terms by id. Kept for
    the next index of the same corpus bytes, fields and analysis: the variants of a
    sweep over k1, b or the method analyse the corpus once. Read only by callers."""
    key = (file_digest(corpus), config.fields, config.stemmer, config.stopwords)
    if key not in _ANALYSED:
        _ANALYSED.clear()  # one corpus's analysis at a time
        _ANALYSED[key] = _analyse(corpus, config, analyzer, progress)
    return _ANALYSED[key]


def _analyse(
    corpus: Path,
    config: BM25Config,
    analyzer: Analyzer,
    progress: Callable[[int, int], None] | None,
) -> tuple[list[str], list[list[int]], dict[str, int]]:
    vocabulary = Vocabulary(analyzer)
    doc_ids: list[str] = []
    documents: list[list[int]] = []
    total = count_documents(corpus) if progress is not None else 0
    for document in iter_corpus(corpus):
        documents.append(vocabulary.add(field_text(document, config.fields)))
        doc_ids.append(document.doc_id)
        if progress is not None and len(doc_ids) % _PROGRESS_EVERY == 0:
            progress(len(doc_ids), total)
    if progress is not None:
        progress(len(doc_ids), len(doc_ids))
    if not doc_ids:
        raise InputError("the corpus has no documents", path=corpus)
    return doc_ids, documents, vocabulary.ids


def load_index(folder: Path) -> Index | None:
    """The index cached in `folder`, or None when it is missing or unreadable.

    The files `bm25s.BM25.save` wrote are read here as `bm25s.BM25.load` reads them,
    without importing bm25s: it imports numba and scipy where they are installed, which
    costs a warm run more than everything else it does."""
    if not folder.is_dir():
        return None
    try:
        model = _read_model(folder)
        doc_ids = read_json_file(folder / _DOC_IDS_FILE)
    except Exception:  # damaged files make numpy and json raise assorted errors
        return None
    consistent = (
        isinstance(doc_ids, list)
        and all(isinstance(d, str) for d in doc_ids)
        and len(doc_ids) == model.scores["num_docs"]
        and len(model.scores["indptr"]) == len(model.vocab_dict) + 1
    )
    return Index.of(model, doc_ids) if consistent else None


def _load_array(path: Path) -> Any:
    """A saved numpy array, read only from a regular file (never a FIFO's wait)."""
    with open_regular(path) as handle:
        return np.load(handle, allow_pickle=False)


def _read_model(folder: Path) -> SavedModel:
    params = read_json_file(folder / "params.index.json")
    vocab = read_json_file(folder / "vocab.index.json")
    scores = {
        name: _load_array(folder / f"{name}.csc.index.npy")
        for name in ("data", "indices", "indptr")
    }
    scores["num_docs"] = int(params["num_docs"])
    nonoccurrence = None
    if params["method"] in _NONOCCURRENCE_METHODS:
        nonoccurrence = _load_array(folder / "nonoccurrence_array.index.npy")
    if not isinstance(vocab, dict):
        raise TypeError("the vocabulary is not an object")
    return SavedModel(scores, vocab, nonoccurrence)


def save_index(index: Index, folder: Path, corpus: Path) -> None:
    """Write the index to a temporary folder beside `folder`, then rename it into place.

    A crash leaves either no `folder` or a complete one, never half an index; the
    staging folder a killed process leaves is removed by the next `open_index`.
    """
    folder.parent.mkdir(parents=True, exist_ok=True)
    staging = Path(
        tempfile.mkdtemp(
            prefix=temporary_prefix(folder.name), suffix=TEMP_SUFFIX, dir=folder.parent
        )
    )
    try:
        index.model.save(str(staging), show_progress=False)
        write_atomic(staging / _DOC_IDS_FILE, json.dumps(index.doc_ids, ensure_ascii=False))
        save_texts(corpus, index.doc_ids, staging)
        # Jobs sharing the cache (the shards of a run) may build the same index at once:
        # one another process has put in place is kept, never removed while it is read.
        if load_index(folder) is not None:
            return
        shutil.rmtree(folder, ignore_errors=True)  # an unreadable index being replaced
        staging.rename(folder)
    except OSError:
        if load_index(folder) is None:  # unless another process just saved the same index
            raise
    finally:
        shutil.rmtree(staging, ignore_errors=True)


def open_index(
    corpus: Path,
    config: BM25Config,
    analyzer: Analyzer,
    cache: Path,
    progress: Callable[[int, int], None] | None = None,
) -> tuple[Index, Path]:
    """The cached index of this corpus and these settings, building it on a miss (told
    to `progress` in documents), and its folder in the cache."""
    folder = cache / index_key(corpus, config)
    sweep_stale_temporaries(cache)
    index = load_index(folder)
    if index is None:
        index = index_corpus(corpus, config, analyzer, progress)
        with contextlib.suppress(OSError):  # the cache only saves time; a full disk is no error
            save_index(index, folder, corpus)
    return index, folder


def read_texts(corpus: Path, doc_ids: set[str]) -> dict[str, str]:
    """The `text` of the given documents, read from the corpus (one pass, when any)."""
    if not doc_ids:
        return {}
    texts = {d.doc_id: d.text for d in iter_corpus(corpus) if d.doc_id in doc_ids}
    missing = doc_ids - texts.keys()
    if missing:
        raise InputError(
            f"document {min(missing)!r} was indexed but is no longer in the corpus", path=corpus
        )
    return texts


def save_texts(corpus: Path, doc_ids: Sequence[str], folder: Path) -> None:
    """Write the documents' texts beside their index (`_TEXTS_FILE`): one more pass
    over the corpus, when the index is built."""
    ends = np.zeros(len(doc_ids), dtype=np.int64)
    written = 0
    with (folder / _TEXTS_FILE).open("wb") as out:
        for number, document in enumerate(iter_corpus(corpus)):
            if number >= len(doc_ids) or document.doc_id != doc_ids[number]:
                raise OSError("the corpus changed while it was indexed")
            data = document.text.encode("utf-8")
            out.write(data)
            written += len(data)
            ends[number] = written
    np.save(folder / _TEXT_ENDS_FILE, ends, allow_pickle=False)


@functools.lru_cache(maxsize=64)
def _text_ends(path: str, mtime_ns: int, size: int) -> Any:
    """The text offsets file, read once while it is unchanged (by time and size): an
    experiment's variants ask for a few texts at a time, query by query."""
    return _load_array(Path(path))


def texts_of(folder: Path, corpus: Path, index: Index, numbers: Iterable[int]) -> dict[str, str]:
    """The `text` of the documents at these index positions: from the texts saved beside
    the index when they are there and whole, else read from the corpus."""
    wanted = sorted(set(numbers))
    try:
        stat = (folder / _TEXT_ENDS_FILE).stat()
        ends = _text_ends(str(folder / _TEXT_ENDS_FILE), stat.st_mtime_ns, stat.st_size)
        if ends.shape != (len(index.doc_ids),) or ends.dtype != np.int64:
            raise ValueError("the text offsets do not match the index")
        with open_regular(folder / _TEXTS_FILE) as texts:
            if texts.seek(0, 2) != (int(ends[-1]) if ends.size else 0):
                raise ValueError("the texts do not match their offsets")
            found = {}
            for number in wanted:
                start = int(ends[number - 1]) if number else 0
                texts.seek(start)
                data = texts.read(int(ends[number]) - start)
                found[index.doc_ids[number]] = data.decode("utf-8")
            return found
    except (OSError, InputError, ValueError, IndexError, UnicodeDecodeError):
        return read_texts(corpus, {index.doc_ids[n] for n in wanted})
