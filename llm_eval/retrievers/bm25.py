"""BM25 over the configured corpus: the embedded default retriever (bm25s + PyStemmer).

The defaults reproduce the BM25 behind the published BEIR baselines (Pyserini's
"flat" indexes: title and text in one field, Lucene's `BM25Similarity` with
k1=0.9, b=0.4, Lucene's `EnglishAnalyzer`), as closely as bm25s allows:

- Scoring: bm25s's "lucene" method is Lucene's formula (Lucene >= 8, which dropped
  the constant factor k1 + 1 from the numerator):
  idf = ln(1 + (N - df + 0.5) / (df + 0.5)),
  score = sum over query terms of idf * tf / (tf + k1 * (1 - b + b * dl / avgdl)).
  Lucene stores document lengths in one byte (exact below 40 terms, rounded above);
  bm25s uses exact lengths, so long documents score slightly differently. On the
  demo gold set this changes 16% of top-10 lists a little (98% of top-10 documents
  shared with Lucene 8.7); with Lucene's rounding emulated every ranking was identical.
- Tokens: a regular expression close to Lucene's StandardTokenizer (Unicode word
  boundaries, UAX #29): runs of letters, digits and underscores, joined across `.`,
  `:` and apostrophes between letters ("e.g", "os.path", "don't") and across `.`,
  `,`, `;` between digits ("3.14", "1,000"); single characters are tokens.
- Analysis: lower case; a trailing "'s" is removed (EnglishPossessiveFilter);
  stopwords "en" is bm25s's English list, which is exactly Lucene's 33-word
  `ENGLISH_STOP_WORDS_SET`; stemmer "porter" is Snowball's Porter stemmer plus the
  departures of Porter's reference implementation that Lucene's `PorterStemFilter`
  ports ("-bli" -> "-ble", "-logi" -> "-log"). Snowball's "english" (Porter2)
  stems 229 of 9,178 words of the demo corpus differently from Lucene; "porter"
  with these departures agreed with Lucene 8.7 on 84,912 of 84,916 words tested
  (the rest end in "-cced"/"-kking"). As in Lucene, words of one or two characters
  are not stemmed.

Retrieval scores every query from bm25s's precomputed score matrix in one batch,
so that ranking is exact and deterministic: score descending, equal scores by doc id
descending (trec_eval's order), only documents that share a term with the query and
score above zero.

The index is cached under `<cache_dir>/bm25/<key>`, where the key covers the corpus
bytes, the index settings, the bm25s version and this module's index format.
"""

from __future__ import annotations

import contextlib
import json
import math
import re
import shutil
import tempfile
import time
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import bm25s
import numpy as np
import numpy.typing as npt
import Stemmer
from bm25s.stopwords import STOPWORDS_EN

from llm_eval.corpus import Document, iter_corpus
from llm_eval.errors import InputError
from llm_eval.fingerprint import digest, file_digest
from llm_eval.gold import GoldQuery
from llm_eval.retrievers import RetrieverContext, RetrieverKind, Setting
from llm_eval.runs import QueryResults, RankedResult, Run
from llm_eval.textio import (
    TEMP_SUFFIX,
    read_json_file,
    sweep_stale_temporaries,
    temporary_prefix,
    write_atomic,
)

IntArray = npt.NDArray[np.int64]
ScoreArray = npt.NDArray[np.float32]

METHODS = ("lucene", "robertson", "atire", "bm25l", "bm25+")
FIELDS = ("title", "text")
STOPWORD_LISTS: Mapping[str, frozenset[str]] = {"en": frozenset(STOPWORDS_EN)}

_INDEX_FORMAT = 1
"""Bump when the analysis or the cache layout changes, so old caches are not reused."""
_DOC_IDS_FILE = "doc_ids.json"
_MAX_POSTINGS_PER_BATCH = 1 << 21
"""Bounds the memory of one scoring batch (about 50 bytes a posting)."""


# --- settings -------------------------------------------------------------------------


def _check_number(value: Any, low: float, high: float | None) -> str | None:
    bounds = f">= {low:g}" if high is None else f"from {low:g} to {high:g}"
    if (
        isinstance(value, bool)
        or not isinstance(value, int | float)
        or not math.isfinite(value)
        or value < low
        or (high is not None and value > high)
    ):
        return f"must be a number {bounds}, got {value!r}"
    return None


def check_k1(value: Any) -> str | None:
    """k1 is a number >= 0."""
    return _check_number(value, 0.0, None)


def check_b(value: Any) -> str | None:
    """b is a number from 0 to 1."""
    return _check_number(value, 0.0, 1.0)


def check_method(value: Any) -> str | None:
    """One of the bm25s scoring methods."""
    if value not in METHODS:
        return f"must be one of {', '.join(map(repr, METHODS))}, got {value!r}"
    return None


def check_stemmer(value: Any) -> str | None:
    """A Snowball algorithm name known to PyStemmer, or None."""
    if value is None or value in Stemmer.algorithms():
        return None
    names = ", ".join(Stemmer.algorithms())
    return f"must be null or a Snowball stemmer ({names}), got {value!r}"


def check_stopwords(value: Any) -> str | None:
    """A named list, None, or a list of words."""
    if value is None or (isinstance(value, str) and value in STOPWORD_LISTS):
        return None
    if isinstance(value, list | tuple) and all(isinstance(w, str) and w for w in value):
        return None
    names = ", ".join(map(repr, STOPWORD_LISTS))
    return f"must be {names}, null or a list of words (non-empty strings), got {value!r}"


def check_fields(value: Any) -> str | None:
    """A non-empty list of distinct corpus fields."""
    if (
        not isinstance(value, list | tuple)
        or not value
        or any(f not in FIELDS for f in value)
        or len(set(value)) != len(value)
    ):
        return f"must be a non-empty list of distinct fields from 'title', 'text', got {value!r}"
    return None


SETTINGS: Mapping[str, Setting] = {
    "k1": Setting(
        0.9,
        check_k1,
        "Term frequency saturation (Lucene's k1); 0.9 as in Pyserini's BEIR baselines.",
    ),
    "b": Setting(
        0.4,
        check_b,
        "Document length normalisation, 0 (none) to 1 (full); 0.4 as in Pyserini's BEIR runs.",
    ),
    "method": Setting(
        "lucene",
        check_method,
        f"The bm25s scoring variant: {', '.join(METHODS)}. 'lucene' is Lucene's BM25.",
    ),
    "stemmer": Setting(
        "porter",
        check_stemmer,
        "A Snowball stemmer name, or null for none. 'porter' is Lucene's PorterStemFilter "
        "(EnglishAnalyzer); 'english' is Porter2.",
    ),
    "stopwords": Setting(
        "en",
        check_stopwords,
        "'en' (Lucene's English stopword set), null for none, or a list of words.",
    ),
    "fields": Setting(
        ["title", "text"],
        check_fields,
        "Corpus fields indexed, joined with a space: 'title', 'text'.",
    ),
}


@dataclass(frozen=True, slots=True)
class BM25Config:
    """Validated settings of the bm25 retriever (all of them shape the index)."""

    k1: float = 0.9
    b: float = 0.4
    method: str = "lucene"
    stemmer: str | None = "porter"
    stopwords: str | tuple[str, ...] | None = "en"
    """A name from STOPWORD_LISTS, None, or the words (lower case, sorted)."""
    fields: tuple[str, ...] = FIELDS

    @classmethod
    def from_settings(cls, settings: Mapping[str, Any]) -> BM25Config:
        """Fill in defaults and check every value; a bad one raises InputError naming it."""
        unknown = sorted(set(settings) - set(SETTINGS))
        if unknown:
            raise InputError(f"unknown setting (valid: {', '.join(SETTINGS)})", key=unknown[0])
        values = {name: settings.get(name, s.default) for name, s in SETTINGS.items()}
        for name, value in values.items():
            reason = SETTINGS[name].check(value)
            if reason is not None:
                raise InputError(reason, key=name)
        stopwords = values["stopwords"]
        if isinstance(stopwords, list | tuple):
            stopwords = tuple(sorted({w.lower() for w in stopwords}))
        return cls(
            k1=float(values["k1"]),
            b=float(values["b"]),
            method=values["method"],
            stemmer=values["stemmer"],
            stopwords=stopwords,
            fields=tuple(values["fields"]),
        )

    def stopword_set(self) -> frozenset[str]:
        """The words left out of the index and the queries."""
        if self.stopwords is None:
            return frozenset()
        if isinstance(self.stopwords, str):
            return STOPWORD_LISTS[self.stopwords]
        return frozenset(self.stopwords)


# --- analysis -------------------------------------------------------------------------

_LETTER = r"[^\W\d_]"
_TOKEN = re.compile(rf"\w+(?:(?:(?<={_LETTER})[.:'’](?={_LETTER})|(?<=\d)[.,;'’](?=\d))\w+)*")
_POSSESSIVE = ("'s", "’s")
_REFERENCE_PORTER_DEPARTURES = (("bli", "ble"), ("logi", "log"))
"""Step-2 rules of Porter's reference code (and Lucene) that differ from the 1980 paper."""


def porter_measure(stem: str) -> int:
    """Porter's m: the number of vowel-consonant sequences in `stem` ('y' after a consonant is
    a vowel)."""
    vowels: list[bool] = []
    for i, char in enumerate(stem):
        vowels.append(char in "aeiou" or (char == "y" and i > 0 and not vowels[-1]))
    return "".join("v" if v else "c" for v in vowels).count("vc")


def make_stemmer(algorithm: str) -> Callable[[str], str]:
    """A Snowball stemmer that leaves words of one or two characters alone, as Lucene does.

    For "porter" it also applies the reference implementation's departures, so that it
    stems like Lucene's PorterStemFilter.
    """
    snowball = Stemmer.Stemmer(algorithm)
    departures = _REFERENCE_PORTER_DEPARTURES if algorithm == "porter" else ()

    def stem(word: str) -> str:
        if len(word) <= 2:
            return word
        stemmed: str = snowball.stemWord(word)
        for suffix, replacement in departures:
            base = stemmed[: -len(suffix)]
            if stemmed.endswith(suffix) and porter_measure(base) > 0:
                return str(snowball.stemWord(base + replacement))
        return stemmed

    return stem


@dataclass(frozen=True, slots=True)
class Analyzer:
    """Turns text into index terms, the same way for documents and queries."""

    stopwords: frozenset[str]
    stem: Callable[[str], str] | None
    _terms: dict[str, str] = field(default_factory=dict, repr=False, compare=False)
    """Memo: token -> term ('' when the token is dropped)."""

    @classmethod
    def for_config(cls, config: BM25Config) -> Analyzer:
        """The analyzer the settings describe."""
        stem = make_stemmer(config.stemmer) if config.stemmer is not None else None
        return cls(config.stopword_set(), stem)

    def tokens(self, text: str) -> list[str]:
        """The lower-cased tokens of `text`, before stopwords and stemming."""
        return _TOKEN.findall(text.lower())

    def term(self, token: str) -> str:
        """The index term of a token, or '' when the token is dropped."""
        term = self._terms.get(token)
        if term is None:
            term = self._terms[token] = self._analyse(token)
        return term

    def terms(self, text: str) -> list[str]:
        """The terms of `text`, in order, repeats kept."""
        return [term for term in map(self.term, self.tokens(text)) if term]

    def _analyse(self, token: str) -> str:
        if token.endswith(_POSSESSIVE):
            token = token[:-2]
        if not token.strip("_") or token in self.stopwords:
            return ""
        return self.stem(token) if self.stem is not None else token


@dataclass(frozen=True, slots=True)
class Vocabulary:
    """The index terms and their ids, grown document by document."""

    analyzer: Analyzer
    ids: dict[str, int] = field(default_factory=dict)
    """term -> id, numbered in order of first appearance."""
    _token_ids: dict[str, int] = field(default_factory=dict, repr=False)
    """token -> id of its term, -1 when the token is dropped."""

    def add(self, text: str) -> list[int]:
        """The term ids of a document, in order, adding its new terms."""
        tokens = self.analyzer.tokens(text)
        token_ids = self._token_ids
        for token in sorted(set(tokens).difference(token_ids)):
            term = self.analyzer.term(token)
            token_ids[token] = self.ids.setdefault(term, len(self.ids)) if term else -1
        # Each token is analysed once per corpus; the rest runs in C (this is the hot loop).
        return list(filter(_KEPT, map(token_ids.__getitem__, tokens)))


_KEPT = (-1).__ne__


# --- the index and ranking (pure) -----------------------------------------------------


@dataclass(frozen=True, slots=True, eq=False)
class Index:
    """A bm25s index and the corpus ids of its documents, in index order."""

    model: Any
    """A `bm25s.BM25` with its score matrix (one column of per-document scores a term)."""
    doc_ids: tuple[str, ...]
    id_rank: IntArray
    """Each document's position in byte order of the ids (the tie-break)."""

    @classmethod
    def of(cls, model: Any, doc_ids: Sequence[str]) -> Index:
        """Wrap a model and its ids, ranking the ids for tie-breaks."""
        order = sorted(range(len(doc_ids)), key=doc_ids.__getitem__)
        id_rank = np.empty(len(doc_ids), dtype=np.int64)
        id_rank[order] = np.arange(len(doc_ids))
        return cls(model, tuple(doc_ids), id_rank)

    def term_ids(self, terms: Sequence[str]) -> IntArray:
        """Vocabulary ids of the terms the index knows (repeats kept, unknown terms dropped)."""
        vocab: Mapping[str, int] = self.model.vocab_dict
        return np.array([vocab[t] for t in terms if t in vocab], dtype=np.int64)


def build_model(documents: Sequence[Sequence[int]], vocab_size: int, config: BM25Config) -> Any:
    """A bm25s model over documents given as term ids 0..vocab_size-1."""
    model = bm25s.BM25(k1=config.k1, b=config.b, method=config.method)
    vocab = {i: i for i in range(vocab_size)}
    with np.errstate(divide="ignore", invalid="ignore"):  # a corpus without a single term
        model.index((list(documents), vocab), create_empty_token=False, show_progress=False)
    return model


def rank(
    index: Index, queries: Sequence[IntArray], top_k: int
) -> list[tuple[IntArray, ScoreArray]]:
    """For each query (term ids), its best documents (positions in the index) and scores."""
    ranked: list[tuple[IntArray, ScoreArray]] = []
    for start, stop in _batches(index, queries):
        ranked.extend(_rank_batch(index, queries[start:stop], top_k))
    return ranked


def _postings(index: Index, terms: IntArray) -> int:
    indptr = index.model.scores["indptr"]
    return int((indptr[terms + 1] - indptr[terms]).sum())


def _batches(index: Index, queries: Sequence[IntArray]) -> Iterator[tuple[int, int]]:
    start, size = 0, 0
    for i, terms in enumerate(queries):
        postings = _postings(index, terms)
        if i > start and size + postings > _MAX_POSTINGS_PER_BATCH:
            yield start, i
            start, size = i, 0
        size += postings
    if start < len(queries):
        yield start, len(queries)


def _rank_batch(
    index: Index, queries: Sequence[IntArray], top_k: int
) -> list[tuple[IntArray, ScoreArray]]:
    query, doc, score = _score_batch(index, queries)
    keep = score > 0
    query, doc, score = query[keep], doc[keep], score[keep]
    order = np.lexsort((-index.id_rank[doc], -score, query))
    query, doc, score = query[order], doc[order], score[order]
    bounds = np.searchsorted(query, np.arange(len(queries) + 1))
    return [
        (doc[lo : min(lo + top_k, hi)], score[lo : min(lo + top_k, hi)])
        for lo, hi in zip(bounds[:-1].tolist(), bounds[1:].tolist(), strict=True)
    ]


def _score_batch(
    index: Index, queries: Sequence[IntArray]
) -> tuple[IntArray, IntArray, ScoreArray]:
    """(query, document, score) for every document sharing a term with a query.

    Gathers the score-matrix columns of all query terms at once and sums them per
    (query, document) pair; a term repeated in a query counts again, as Pyserini's
    bag-of-words query weights it by its count.
    """
    matrix = index.model.scores
    num_docs = int(matrix["num_docs"])
    terms = np.concatenate([np.empty(0, np.int64), *queries])
    term_query = np.repeat(np.arange(len(queries)), [len(q) for q in queries])
    starts = matrix["indptr"][terms].astype(np.int64)
    counts = matrix["indptr"][terms + 1].astype(np.int64) - starts
    offsets = np.repeat(starts - (np.cumsum(counts) - counts), counts) + np.arange(counts.sum())
    pairs = np.repeat(term_query, counts) * num_docs + matrix["indices"][offsets]
    unique, inverse = np.unique(pairs, return_inverse=True)
    sums = np.bincount(inverse, weights=matrix["data"][offsets], minlength=len(unique))
    query = unique // num_docs
    nonoccurrence = index.model.nonoccurrence_array
    if nonoccurrence is not None:  # BM25L and BM25+ give every document a base score a term
        base = np.bincount(term_query, weights=nonoccurrence[terms], minlength=len(queries))
        sums += base[query]
    # Scores are compared in single precision, as Lucene computes and trec_eval stores them.
    return query, unique % num_docs, sums.astype(np.float32)


# --- the corpus and the cache (I/O) ---------------------------------------------------


def index_key(corpus: Path, config: BM25Config) -> str:
    """A digest of the corpus bytes, the settings and the index format."""
    settings = [
        config.k1,
        config.b,
        config.method,
        config.stemmer,
        config.stopwords,
        config.fields,
        bm25s.__version__,
        _INDEX_FORMAT,
    ]
    return digest([file_digest(corpus), settings])


def _indexed_text(document: Document, fields: Sequence[str]) -> str:
    return " ".join(getattr(document, name) for name in fields)


def index_corpus(corpus: Path, config: BM25Config, analyzer: Analyzer) -> Index:
    """Read and index the corpus; an empty corpus is an InputError."""
    vocabulary = Vocabulary(analyzer)
    doc_ids: list[str] = []
    documents: list[list[int]] = []
    for document in iter_corpus(corpus):
        documents.append(vocabulary.add(_indexed_text(document, config.fields)))
        doc_ids.append(document.doc_id)
    if not doc_ids:
        raise InputError("the corpus has no documents", path=corpus)
    model = build_model(documents, len(vocabulary.ids), config)
    model.vocab_dict = vocabulary.ids
    return Index.of(model, doc_ids)


def load_index(folder: Path) -> Index | None:
    """The index cached in `folder`, or None when it is missing or unreadable."""
    if not folder.is_dir():
        return None
    try:
        model = bm25s.BM25.load(str(folder), show_progress=False)
        doc_ids = read_json_file(folder / _DOC_IDS_FILE)
    except Exception:  # damaged files make bm25s, numpy and json raise assorted errors
        return None
    consistent = (
        isinstance(doc_ids, list)
        and all(isinstance(d, str) for d in doc_ids)
        and len(doc_ids) == model.scores["num_docs"]
        and len(model.scores["indptr"]) == len(model.vocab_dict) + 1
    )
    return Index.of(model, doc_ids) if consistent else None


def save_index(index: Index, folder: Path) -> None:
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
        shutil.rmtree(folder, ignore_errors=True)  # an unreadable index being replaced
        staging.rename(folder)
    except OSError:
        if load_index(folder) is None:  # unless another process just saved the same index
            raise
    finally:
        shutil.rmtree(staging, ignore_errors=True)


def open_index(corpus: Path, config: BM25Config, analyzer: Analyzer, cache: Path) -> Index:
    """The cached index of this corpus and these settings, building it on a miss."""
    folder = cache / index_key(corpus, config)
    sweep_stale_temporaries(cache)
    index = load_index(folder)
    if index is None:
        index = index_corpus(corpus, config, analyzer)
        with contextlib.suppress(OSError):  # the cache only saves time; a full disk is no error
            save_index(index, folder)
    return index


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


# --- the retriever --------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class BM25Retriever:
    """Answers gold queries from a BM25 index of the corpus."""

    index: Index
    analyzer: Analyzer
    corpus: Path

    def retrieve(self, queries: Sequence[GoldQuery], top_k: int) -> Run:
        """At most `top_k` documents a query, best first, each with its corpus text."""
        if top_k < 1:
            raise ValueError(f"top_k must be at least 1, got {top_k}")
        started = time.perf_counter()
        terms = [self.index.term_ids(self.analyzer.terms(q.query)) for q in queries]
        ranked = rank(self.index, terms, top_k)
        texts = read_texts(self.corpus, {self.index.doc_ids[i] for docs, _ in ranked for i in docs})
        # All queries are scored in one batch, so each is charged an equal share of its time.
        latency_ms = (time.perf_counter() - started) * 1000 / max(len(queries), 1)
        return Run(
            {
                query.query_id: QueryResults(
                    query.query_id, self._results(docs, scores, texts), latency_ms
                )
                for query, (docs, scores) in zip(queries, ranked, strict=True)
            }
        )

    def _results(
        self, docs: IntArray, scores: ScoreArray, texts: Mapping[str, str]
    ) -> tuple[RankedResult, ...]:
        ids = [self.index.doc_ids[i] for i in docs.tolist()]
        return tuple(
            RankedResult(doc_id, score, texts[doc_id])
            for doc_id, score in zip(ids, scores.tolist(), strict=True)
        )


def build(settings: Mapping[str, Any], context: RetrieverContext) -> BM25Retriever:
    """Open (or build and cache) the index of the configured corpus."""
    config = BM25Config.from_settings(settings)
    if context.corpus_path is None:
        raise InputError("the bm25 retriever needs a `corpus` file in the config")
    analyzer = Analyzer.for_config(config)
    index = open_index(context.corpus_path, config, analyzer, context.cache_dir / "bm25")
    return BM25Retriever(index, analyzer, context.corpus_path)


KIND = RetrieverKind(
    name="bm25",
    description="Lucene-style BM25 over the corpus (bm25s); the index is cached.",
    build=build,
    settings=SETTINGS,
    needs_corpus=True,
)
