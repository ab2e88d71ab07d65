"""The bm25 retriever's settings, their checks and defaults (Pyserini's BEIR baselines)."""

from __future__ import annotations

import functools
import importlib.util
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import Stemmer

from llm_eval.corpus import FIELDS, check_fields
from llm_eval.settings import Setting, number_check

METHODS = ("lucene", "robertson", "atire", "bm25l", "bm25+")
STOPWORD_LISTS = ("en",)
"""The named stopword lists: bm25s's, read when an analyzer is made (importing bm25s
imports numba and scipy where they are installed, which a config load does not need)."""


def check_k1(value: Any) -> str | None:
    """k1 is a number >= 0."""
    return number_check(0.0)(value)


def check_b(value: Any) -> str | None:
    """b is a number from 0 to 1."""
    return number_check(0.0, 1.0)(value)


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
    """A name in STOPWORD_LISTS, None, or the words (lower case, sorted)."""
    fields: tuple[str, ...] = FIELDS

    @classmethod
    def from_checked(cls, values: Mapping[str, Any]) -> BM25Config:
        """The config of checked settings (`RetrieverKind.checked`: every one present)."""
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
            return _named_stopwords(self.stopwords)
        return frozenset(self.stopwords)


@functools.cache
def _named_stopwords(name: str) -> frozenset[str]:
    """A list of STOPWORD_LISTS ("en": Lucene's English set, as bm25s ships it), read
    from bm25s's `stopwords` module alone: importing the bm25s package imports numba
    and scipy where they are installed, which analysing a query does not need."""
    path = bm25s_folder() / "stopwords.py"
    spec = importlib.util.spec_from_file_location("_bm25s_stopwords", path)
    if spec is None or spec.loader is None:
        raise ImportError(f"cannot read {path}")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return frozenset({"en": module.STOPWORDS_EN}[name])


def bm25s_folder() -> Path:
    """The folder the bm25s package is installed in, found without importing it
    (importing it imports numba and scipy where they are installed); ImportError
    when it is not installed."""
    package = importlib.util.find_spec("bm25s")
    if package is None or not package.submodule_search_locations:
        raise ImportError("bm25s is not installed")
    return Path(package.submodule_search_locations[0])
