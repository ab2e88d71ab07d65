from __future__ import annotations

import json
import math
import os
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from conftest import REPO, gold_query

from llm_eval.errors import ExternalError, InputError
from llm_eval.retrievers import RetrieverContext, Setting, bm25, retriever_kind
from llm_eval.retrievers.bm25 import KIND, Analyzer, BM25Config, BM25Retriever, make_stemmer
from llm_eval.retrievers.bm25 import index as bm25_index
from llm_eval.retrievers.bm25 import store as bm25_store
from llm_eval.runs import Run

PLAIN: dict[str, Any] = {"stemmer": None, "stopwords": None, "fields": ["text"]}
"""Settings under which the index terms are the lower-cased words themselves."""


def write_corpus(folder: Path, documents: list[dict[str, Any]]) -> Path:
    path = folder / "corpus.jsonl"
    path.write_text("".join(json.dumps(d) + "\n" for d in documents), encoding="utf-8")
    return path


def texts(*pairs: tuple[str, str]) -> list[dict[str, Any]]:
    return [{"_id": doc_id, "title": "", "text": text} for doc_id, text in pairs]


def build(corpus: Path, **settings: Any) -> BM25Retriever:
    context = RetrieverContext(corpus, corpus.parent / "cache")
    return bm25.KIND.create(settings, context)


def scores(run: Run, query_id: str = "q1") -> list[tuple[str, float]]:
    found = [(r.doc_id, r.score) for r in run.queries[query_id].results]
    return [(doc, score) for doc, score in found if isinstance(score, float)]


def search(retriever: BM25Retriever, text: str, top_k: int = 10) -> list[tuple[str, float]]:
    return scores(retriever.retrieve([gold_query(text=text)], top_k))


# --- scores and ranking ---------------------------------------------------------------

HAND_CORPUS_PAIRS = (
    ("d1", "apple banana apple"),
    ("d2", "banana cherry"),
    ("d3", "cherry cherry cherry date"),
    ("d4", "elderberry"),
)
HAND_CORPUS = texts(*HAND_CORPUS_PAIRS)


def lucene_bm25(tf: int, df: int, dl: int, n: int = 4, avgdl: float = 10 / 4) -> float:
    """One term's score in Lucene's BM25Similarity (k1=0.9, b=0.4).

    Lucene >= 8 leaves the constant k1 + 1 out of the numerator. Lucene 8.7 scored
    this corpus as d1 0.81021047, d3 0.5052093, d2 0.37918335 for "apple cherry".
    """
    k1, b = 0.9, 0.4
    idf = math.log(1 + (n - df + 0.5) / (df + 0.5))
    return idf * tf / (tf + k1 * (1 - b + b * dl / avgdl))


def test_scores_equal_lucene_bm25_computed_by_hand(tmp_path: Path) -> None:
    retriever = build(write_corpus(tmp_path, HAND_CORPUS), **PLAIN)
    expected = [
        ("d1", lucene_bm25(tf=2, df=1, dl=3)),  # apple
        ("d3", lucene_bm25(tf=3, df=2, dl=4)),  # cherry
        ("d2", lucene_bm25(tf=1, df=2, dl=2)),  # cherry
    ]
    assert expected[0][1] == pytest.approx(0.81021047, abs=1e-6)
    found = search(retriever, "apple cherry")
    assert [doc for doc, _ in found] == [doc for doc, _ in expected]
    for (_, score), (_, hand) in zip(found, expected, strict=True):
        assert score == pytest.approx(hand, abs=1e-5)


def test_a_repeated_query_term_counts_again(tmp_path: Path) -> None:
    retriever = build(write_corpus(tmp_path, HAND_CORPUS), **PLAIN)
    found = dict(search(retriever, "cherry cherry"))
    assert found["d3"] == pytest.approx(2 * lucene_bm25(tf=3, df=2, dl=4), abs=1e-5)


def test_equal_scores_rank_by_doc_id_descending(tmp_path: Path) -> None:
    same = "the same words"
    corpus = texts(("b", same), ("10", same), ("a", same), ("9", same), ("c", "other words"))
    retriever = build(write_corpus(tmp_path, corpus), **PLAIN)
    assert [doc for doc, _ in search(retriever, "same")] == ["b", "a", "9", "10"]
    assert [doc for doc, _ in search(retriever, "same", top_k=2)] == ["b", "a"]


def test_results_are_best_first(tmp_path: Path) -> None:
    corpus = texts(
        ("one", "python"),
        ("three", "python python python snake"),
        ("two", "python python snake snake"),
    )
    retriever = build(write_corpus(tmp_path, corpus), **PLAIN)
    found = search(retriever, "python")
    assert [doc for doc, _ in found] == ["three", "two", "one"]
    values = [score for _, score in found]
    assert values == sorted(values, reverse=True)


@pytest.mark.parametrize(("top_k", "expected"), [(1, 1), (2, 2), (3, 3), (50, 3)])
def test_top_k_is_respected(tmp_path: Path, top_k: int, expected: int) -> None:
    corpus = texts(("a", "x y"), ("b", "x"), ("c", "x z z"), ("d", "nothing"))
    retriever = build(write_corpus(tmp_path, corpus), **PLAIN)
    assert len(search(retriever, "x", top_k)) == expected


def test_top_k_below_one_is_refused(tmp_path: Path) -> None:
    retriever = build(write_corpus(tmp_path, HAND_CORPUS), **PLAIN)
    with pytest.raises(ValueError, match="top_k must be at least 1, got 0"):
        retriever.retrieve([gold_query(text="apple")], 0)


@pytest.mark.parametrize("method", bm25.METHODS)
def test_documents_sharing_no_term_are_not_retrieved(tmp_path: Path, method: str) -> None:
    retriever = build(write_corpus(tmp_path, HAND_CORPUS), method=method, **PLAIN)
    found = search(retriever, "apple date")
    assert {doc for doc, _ in found} == {"d1", "d3"}
    assert all(score > 0 for _, score in found)


def test_terms_in_every_document_can_score_zero(tmp_path: Path) -> None:
    # Robertson's idf is clipped to 0 for a term in more than half the documents.
    corpus = texts(("a", "common"), ("b", "common"), ("c", "common rare"))
    retriever = build(write_corpus(tmp_path, corpus), method="robertson", **PLAIN)
    assert search(retriever, "common") == []
    assert [doc for doc, _ in search(retriever, "common rare")] == ["c"]


@pytest.mark.parametrize("text", ["the and of a", "?!", "zebra unicorn", "The"])
def test_queries_without_indexed_terms_get_no_results(tmp_path: Path, text: str) -> None:
    retriever = build(write_corpus(tmp_path, texts(("a", "the zoo"), ("b", "a zoo"))))
    run = retriever.retrieve([gold_query(text=text), gold_query("q2", text="zoo")], 10)
    assert run.queries["q1"].results == ()
    assert [doc for doc, _ in scores(run, "q2")] == ["b", "a"]


def test_corpus_without_indexable_words(tmp_path: Path) -> None:
    retriever = build(write_corpus(tmp_path, texts(("a", "the"), ("b", ""))))
    assert search(retriever, "the anything") == []


def reference_rank(
    index: bm25_index.Index, terms: list[int], top_k: int
) -> list[tuple[str, float]]:
    """The top k by summing each term's score-matrix column document by document."""
    matrix, model = index.model.scores, index.model
    totals: dict[int, float] = {}
    for term in terms:
        lo, hi = int(matrix["indptr"][term]), int(matrix["indptr"][term + 1])
        for doc, value in zip(matrix["indices"][lo:hi], matrix["data"][lo:hi], strict=True):
            totals[int(doc)] = totals.get(int(doc), 0.0) + float(value)
    if model.nonoccurrence_array is not None:
        base = sum(float(model.nonoccurrence_array[t]) for t in terms)
        totals = {doc: total + base for doc, total in totals.items()}
    scored = [(np.float32(t), index.doc_ids[d]) for d, t in totals.items() if np.float32(t) > 0]
    ranked = sorted(scored, key=lambda pair: (-pair[0], [-b for b in pair[1].encode()]))
    return [(doc, float(score)) for score, doc in ranked[:top_k]]


@pytest.mark.parametrize("method", bm25.METHODS)
@pytest.mark.parametrize("sparse_factor", [0, 10**9], ids=["dense", "sparse"])
def test_ranking_equals_a_document_by_document_sum(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, method: str, sparse_factor: int
) -> None:
    rng = np.random.default_rng(7)
    corpus = texts(
        *((f"d{i:03}", " ".join(f"w{w}" for w in rng.zipf(1.5, 12) % 30)) for i in range(300))
    )
    retriever = build(write_corpus(tmp_path, corpus), method=method, **PLAIN)
    monkeypatch.setattr(bm25_index, "_SPARSE_FACTOR", sparse_factor)
    for size in (1, 2, 3, 6):
        for _ in range(20):
            terms = retriever.index.term_ids([f"w{w}" for w in rng.integers(0, 30, size)])
            for top_k in (1, 5, 400):
                docs, scores = bm25_index.rank(retriever.index, terms, top_k)
                ids = [retriever.index.doc_ids[i] for i in docs.tolist()]
                ranked = list(zip(ids, scores.tolist(), strict=True))
                assert ranked == reference_rank(retriever.index, terms.tolist(), top_k)


def test_a_querys_results_hold_no_scratch_arrays(tmp_path: Path) -> None:
    # Views into the arrays of a whole ranking would keep them alive with the results,
    # so that memory grew with every query answered (20,000 queries: several GiB).
    corpus = texts(*((f"d{i}", f"common w{i % 5}") for i in range(200)))
    retriever = build(write_corpus(tmp_path, corpus), **PLAIN)
    docs, scores = bm25_index.rank(retriever.index, retriever.index.term_ids(["common"]), 3)
    assert (len(docs), docs.base, scores.base) == (3, None, None)


def test_running_out_of_memory_is_one_line_naming_the_size(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    retriever = build(write_corpus(tmp_path, texts(("a", "zoo"), ("b", "a zoo"))), **PLAIN)
    calls: list[object] = []

    def rank_until_memory_is_gone(*args: object) -> tuple[np.ndarray, np.ndarray]:
        calls.append(args)
        if len(calls) > 1:
            raise MemoryError
        return np.array([0]), np.array([1.0], np.float32)

    monkeypatch.setattr(bm25, "rank", rank_until_memory_is_gone)
    queries = [gold_query(f"q{i}", text="zoo") for i in range(1500)]
    with pytest.raises(ExternalError) as caught:
        retriever.retrieve(queries, 100)
    assert str(caught.value) == (
        "the bm25 retriever ran out of memory at query 2 of 1,500 over 2 documents "
        "(top_k 100); lower top_k in the config or split the corpus"
    )


def test_each_query_is_timed_alone(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    corpus = texts(*((f"d{i}", f"w{i % 7} w{i % 3} common") for i in range(40)))
    retriever = build(write_corpus(tmp_path, corpus), **PLAIN)
    queries = [gold_query(f"q{i}", text=f"w{i} common") for i in range(9)]
    # A clock whose reading moves by i ms while the i-th query is answered.
    readings = iter(np.cumsum([0.001 * (i // 2 + 1) * (i % 2) for i in range(18)]).tolist())
    monkeypatch.setattr(bm25.time, "perf_counter", lambda: next(readings))
    run = retriever.retrieve(queries, 5)
    monkeypatch.undo()
    assert [run.queries[q.query_id].latency_ms for q in queries] == pytest.approx(
        [float(i) for i in range(1, 10)]
    )


# --- documents ------------------------------------------------------------------------


def test_results_carry_the_corpus_text(tmp_path: Path) -> None:
    corpus: list[dict[str, Any]] = [
        {"_id": 17, "title": "Zürich", "text": "Grüße aus Zürich — 東京 too"},
        {"_id": "b", "title": "", "text": "plain words"},
        {"_id": "c", "title": "Zürich only in the title"},
    ]
    retriever = build(write_corpus(tmp_path, corpus))
    (first, second) = retriever.retrieve([gold_query(text="zürich")], 10).queries["q1"].results
    assert (first.doc_id, first.text) == ("17", "Grüße aus Zürich — 東京 too")
    assert (second.doc_id, second.text) == ("c", "")


def test_fields_choose_what_is_indexed(tmp_path: Path) -> None:
    corpus = [{"_id": "a", "title": "needle", "text": "hay"}, {"_id": "b", "text": "needle"}]
    path = write_corpus(tmp_path, corpus)
    assert [d for d, _ in search(build(path, fields=["title"]), "needle")] == ["a"]
    assert [d for d, _ in search(build(path, fields=["text"]), "needle")] == ["b"]
    assert {d for d, _ in search(build(path), "needle")} == {"a", "b"}


def test_empty_corpus_is_an_input_error(tmp_path: Path) -> None:
    path = tmp_path / "corpus.jsonl"
    path.write_text("\n  \n", encoding="utf-8")
    with pytest.raises(InputError) as caught:
        build(path)
    assert str(caught.value) == f"{path}: the corpus has no documents"


def test_missing_corpus_is_an_input_error(tmp_path: Path) -> None:
    with pytest.raises(InputError) as caught:
        build(tmp_path / "nope.jsonl")
    assert str(caught.value) == f"{tmp_path / 'nope.jsonl'}: no such file"


def test_a_corpus_is_required(tmp_path: Path) -> None:
    with pytest.raises(InputError) as caught:
        bm25.KIND.create({}, RetrieverContext(None, tmp_path))
    assert str(caught.value) == "the bm25 retriever needs a `corpus` file in the config"


# --- the index cache ------------------------------------------------------------------


def cached_indexes(cache: Path) -> list[Path]:
    return sorted((cache / "bm25").iterdir())


def test_second_build_loads_the_cached_index(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    path = write_corpus(tmp_path, HAND_CORPUS)
    first = search(build(path), "apple cherry")
    (folder,) = cached_indexes(tmp_path / "cache")
    assert len(folder.name) == 16
    assert json.loads((folder / "doc_ids.json").read_text()) == ["d1", "d2", "d3", "d4"]

    def must_not_index(*args: object) -> None:
        raise AssertionError("indexed again")

    monkeypatch.setattr(bm25_store, "index_corpus", must_not_index)
    assert search(build(path), "apple cherry") == first


TEXTS_CORPUS = texts(
    ("d1", "apple pie"),
    ("d2", "apple \u00e9clair \u2014 \U0001f34e"),
    ("d3", ""),  # an empty text
    ("d4", "apple " * 500),
)


def test_a_warm_run_reads_the_returned_texts_from_the_cache_not_the_corpus(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    path = write_corpus(tmp_path, TEXTS_CORPUS)
    cold = build(path).retrieve([gold_query(text="apple")], 10)
    want = {d["_id"]: d["text"] for d in TEXTS_CORPUS}
    assert {r.doc_id: r.text for r in cold.queries["q1"].results} == {
        d: want[d] for d in ("d1", "d2", "d4")
    }

    def must_not_read(*args: object) -> None:
        raise AssertionError("read the corpus again")

    monkeypatch.setattr(bm25_store, "iter_corpus", must_not_read)
    warm = build(path).retrieve([gold_query(text="apple")], 10)
    assert warm.queries["q1"].results == cold.queries["q1"].results


@pytest.mark.parametrize(
    "damage",
    [
        lambda folder: (folder / "texts.utf8").unlink(),
        lambda folder: (folder / "texts.utf8").write_bytes(b"short"),
        lambda folder: (folder / "text_ends.npy").write_bytes(b"not numpy"),
        lambda folder: np.save(folder / "text_ends.npy", np.array([1, 2], dtype=np.int64)),
    ],
)
def test_damaged_cached_texts_are_read_from_the_corpus(
    tmp_path: Path, damage: Callable[[Path], None]
) -> None:
    path = write_corpus(tmp_path, TEXTS_CORPUS)
    cold = build(path).retrieve([gold_query(text="apple")], 10)
    (folder,) = cached_indexes(tmp_path / "cache")
    damage(folder)
    warm = build(path).retrieve([gold_query(text="apple")], 10)
    assert warm.queries["q1"].results == cold.queries["q1"].results


@pytest.mark.parametrize("method", bm25.METHODS)
def test_the_cached_index_ranks_as_the_index_built(tmp_path: Path, method: str) -> None:
    """The cache is read back without bm25s (`store.SavedModel`): same scores, same
    order, for every method (BM25L and BM25+ with their non-occurrence scores)."""
    corpus = texts(*HAND_CORPUS_PAIRS, ("d5", "apple apple date fig"), ("d6", "fig"))
    path = write_corpus(tmp_path, corpus)
    built = build(path, method=method)
    loaded = build(path, method=method)
    assert not isinstance(built.index.model, bm25_index.SavedModel)
    assert isinstance(loaded.index.model, bm25_index.SavedModel)
    for query in ("apple cherry", "fig", "date banana elderberry", "nothing"):
        assert search(loaded, query) == search(built, query)


def test_a_warm_retrieval_and_a_config_load_import_no_bm25s(tmp_path: Path) -> None:
    """Importing bm25s imports numba and scipy where they are installed: a run that
    finds its index cached reads it, its stopwords included, without it."""
    path = write_corpus(tmp_path, HAND_CORPUS)
    expected = search(build(path), "the apple")
    code = (
        "import json, sys\n"
        "from pathlib import Path\n"
        "from conftest import gold_query\n"
        "from llm_eval.config_io import load_config\n"
        "from llm_eval.retrievers import RetrieverContext, bm25\n"
        f"load_config(Path({str(REPO / 'config' / 'llm-eval.yaml')!r}))\n"
        f"corpus = Path({str(path)!r})\n"
        "retriever = bm25.KIND.create({}, RetrieverContext(corpus, corpus.parent / 'cache'))\n"
        "run = retriever.retrieve([gold_query(text='the apple')], 10)\n"
        "found = [[r.doc_id, r.score] for r in run.queries['q1'].results]\n"
        "print(json.dumps([found, sorted({'bm25s', 'numba', 'scipy'} & set(sys.modules))]))\n"
    )
    done = subprocess.run(
        [sys.executable, "-c", code],
        capture_output=True,
        text=True,
        check=True,
        cwd=REPO,
        env={**os.environ, "PYTHONPATH": os.pathsep.join([str(REPO), str(REPO / "tests")])},
    )
    found, heavy = json.loads(done.stdout)
    assert [tuple(pair) for pair in found] == expected
    assert heavy == []


def test_the_named_stopwords_are_bm25s_english_list() -> None:
    from bm25s.stopwords import STOPWORDS_EN

    assert BM25Config().stopword_set() == frozenset(STOPWORDS_EN)
    assert len(STOPWORDS_EN) == 33  # Lucene's ENGLISH_STOP_WORDS_SET


@pytest.mark.parametrize(
    "change",
    [
        {"k1": 1.2},
        {"b": 0.75},
        {"method": "atire"},
        {"stemmer": "english"},
        {"stopwords": None},
        {"stopwords": ["zoo"]},
        {"fields": ["text"]},
    ],
)
def test_index_settings_are_part_of_the_key(tmp_path: Path, change: dict[str, Any]) -> None:
    path = write_corpus(tmp_path, HAND_CORPUS)
    build(path)
    build(path, **change)
    assert len(cached_indexes(tmp_path / "cache")) == 2


def test_a_changed_corpus_is_indexed_again(tmp_path: Path) -> None:
    path = write_corpus(tmp_path, HAND_CORPUS)
    build(path)
    write_corpus(tmp_path, [*HAND_CORPUS, {"_id": "d5", "text": "fig apple"}])
    assert {d for d, _ in search(build(path), "apple")} == {"d1", "d5"}
    assert len(cached_indexes(tmp_path / "cache")) == 2


def truncate_scores(folder: Path) -> None:
    data = folder / "data.csc.index.npy"
    data.write_bytes(data.read_bytes()[:40])


def damage_doc_ids(folder: Path) -> None:
    (folder / "doc_ids.json").write_text("[1, 2", encoding="utf-8")


def drop_an_id(folder: Path) -> None:
    (folder / "doc_ids.json").write_text('["d1", "d2", "d3"]', encoding="utf-8")


def remove_vocabulary(folder: Path) -> None:
    (folder / "vocab.index.json").unlink()


@pytest.mark.parametrize("damage", [truncate_scores, damage_doc_ids, drop_an_id, remove_vocabulary])
def test_a_damaged_cache_is_rebuilt(tmp_path: Path, damage: Any) -> None:
    path = write_corpus(tmp_path, HAND_CORPUS)
    first = search(build(path), "apple cherry")
    (folder,) = cached_indexes(tmp_path / "cache")
    damage(folder)
    assert search(build(path), "apple cherry") == first
    assert bm25_store.load_index(folder) is not None


def test_a_failed_save_leaves_no_index_and_is_no_error(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    path = write_corpus(tmp_path, HAND_CORPUS)

    def disk_full(*args: object) -> None:
        raise OSError(28, "No space left on device")

    monkeypatch.setattr(bm25_store, "write_atomic", disk_full)
    assert [doc for doc, _ in search(build(path), "apple")] == ["d1"]
    assert cached_indexes(tmp_path / "cache") == []
    with pytest.raises(OSError, match="No space left"):
        bm25_store.save_index(build(path).index, tmp_path / "cache" / "bm25" / "key", path)
    assert cached_indexes(tmp_path / "cache") == []


# --- settings -------------------------------------------------------------------------


def test_the_kind_is_registered() -> None:
    assert retriever_kind("bm25") is KIND
    assert KIND.needs_corpus
    assert set(KIND.settings) == {"k1", "b", "method", "stemmer", "stopwords", "fields"}


@pytest.mark.parametrize(("name", "setting"), sorted(KIND.settings.items()))
def test_defaults_pass_their_checks(name: str, setting: Setting) -> None:
    assert setting.check(setting.default) is None
    assert setting.help


@pytest.mark.parametrize(
    ("name", "value", "reason"),
    [
        ("k1", 0, None),
        ("k1", 1.2, None),
        ("k1", -0.1, "must be a number >= 0, got -0.1"),
        ("k1", "0.9", "must be a number >= 0, got '0.9'"),
        ("k1", True, "must be a number >= 0, got True"),
        ("k1", math.inf, "must be a number >= 0, got inf"),
        ("b", 0, None),
        ("b", 1, None),
        ("b", 1.01, "must be a number from 0 to 1, got 1.01"),
        ("b", -1, "must be a number from 0 to 1, got -1"),
        ("b", None, "must be a number from 0 to 1, got None"),
        ("method", "bm25+", None),
        (
            "method",
            "okapi",
            "must be one of 'lucene', 'robertson', 'atire', 'bm25l', 'bm25+', got 'okapi'",
        ),
        ("stemmer", None, None),
        ("stemmer", "english", None),
        ("stemmer", "german", None),
        ("stopwords", None, None),
        ("stopwords", ["Foo", "bar"], None),
        ("stopwords", [], None),
        (
            "stopwords",
            "english",
            "must be 'en', null or a list of words (non-empty strings), got 'english'",
        ),
        (
            "stopwords",
            ["ok", 3],
            "must be 'en', null or a list of words (non-empty strings), got ['ok', 3]",
        ),
        ("fields", ["text"], None),
        ("fields", ["text", "title"], None),
        ("fields", [], "must be a non-empty list of distinct fields from 'title', 'text', got []"),
        (
            "fields",
            ["body"],
            "must be a non-empty list of distinct fields from 'title', 'text', got ['body']",
        ),
        (
            "fields",
            ["text", "text"],
            "must be a non-empty list of distinct fields from 'title', "
            "'text', got ['text', 'text']",
        ),
        (
            "fields",
            "text",
            "must be a non-empty list of distinct fields from 'title', 'text', got 'text'",
        ),
    ],
)
def test_setting_checks(name: str, value: Any, reason: str | None) -> None:
    assert KIND.settings[name].check(value) == reason


def test_an_unknown_stemmer_lists_the_known_ones() -> None:
    reason = KIND.settings["stemmer"].check("englsh")
    assert reason is not None
    assert reason.startswith("must be null or a Snowball stemmer (arabic, ")
    assert "english, " in reason
    assert "porter, " in reason
    assert reason.endswith("), got 'englsh'")


def test_build_rejects_a_bad_setting_by_name(tmp_path: Path) -> None:
    with pytest.raises(InputError) as caught:
        build(write_corpus(tmp_path, HAND_CORPUS), b=2)
    assert str(caught.value) == "b: must be a number from 0 to 1, got 2"
    with pytest.raises(InputError) as caught:
        build(write_corpus(tmp_path, HAND_CORPUS), k3=2)
    assert str(caught.value) == (
        "k3: unknown setting (valid: k1, b, method, stemmer, stopwords, fields)"
    )


def test_custom_stopwords_are_lower_cased_and_sorted(tmp_path: Path) -> None:
    config = BM25Config.from_checked(KIND.checked({"stopwords": ["Zoo", "apple", "zoo"]}))
    assert config.stopwords == ("apple", "zoo")
    retriever = build(write_corpus(tmp_path, HAND_CORPUS), stopwords=["APPLE"])
    assert search(retriever, "apple") == []


# --- analysis: Lucene's EnglishAnalyzer -----------------------------------------------


def test_english_stopwords_are_lucenes() -> None:
    lucene = (
        "a an and are as at be but by for if in into is it no not of on or such that the "
        "their then there these they this to was will with"
    )
    assert BM25Config().stopword_set() == frozenset(lucene.split())


@pytest.mark.parametrize(
    ("text", "terms"),
    [
        (
            "The object's __dict__ (e.g. os.path.join) isn't 3.14 or 1,000; don't use x_y: "
            "start:end sqlite3.connect ____ Ünïcödé CAFÉ's",
            "object __dict__ e.g os.path.join isn't 3.14 1,000 don't us x_y start:end sqlite3 "
            "connect ünïcödé café",
        ),
        (
            "It's the technology of possibly flexibly-running dogs",
            "technolog possibl flexibl run dog",
        ),
        ("x = 1", "x 1"),
        ("", ""),
    ],
)
def test_analysis_matches_lucene_english_analyzer(text: str, terms: str) -> None:
    # Expected terms: Lucene 8.7's EnglishAnalyzer on the same text.
    assert Analyzer.for_config(BM25Config()).terms(text) == terms.split()


@pytest.mark.parametrize(
    ("word", "lucene"),
    [
        ("technology", "technolog"),
        ("technological", "technolog"),
        ("pathology", "patholog"),
        ("analogy", "analog"),
        ("biology", "biologi"),
        ("possibly", "possibl"),
        ("sensibly", "sensibl"),
        ("ably", "abli"),
        ("happily", "happili"),
        ("running", "run"),
        ("agreed", "agre"),
        ("relational", "relat"),
        ("news", "new"),
        ("os", "os"),
        ("us", "us"),
        ("s", "s"),
    ],
)
def test_porter_stems_like_lucene(word: str, lucene: str) -> None:
    # Expected stems: Lucene 8.7's PorterStemFilter.
    assert make_stemmer("porter")(word) == lucene


def test_other_stemmers_are_plain_snowball() -> None:
    stem = make_stemmer("english")
    assert [stem(w) for w in ("technology", "generously", "is")] == ["technolog", "generous", "is"]


def test_porter_measure() -> None:
    measures = {
        "tr": 0,
        "ee": 0,
        "tree": 0,
        "y": 0,
        "by": 0,
        "trouble": 1,
        "oats": 1,
        "ivy": 1,
        "troubles": 2,
        "private": 2,
        "oaten": 2,
    }
    assert {w: bm25.porter_measure(w) for w in measures} == measures


def test_index_positions_follow_corpus_order(tmp_path: Path) -> None:
    retriever = build(write_corpus(tmp_path, HAND_CORPUS), **PLAIN)
    assert retriever.index.doc_ids == ("d1", "d2", "d3", "d4")
    assert np.array_equal(retriever.index.id_rank, [0, 1, 2, 3])


def test_the_staging_folder_of_a_killed_build_is_swept(tmp_path: Path) -> None:
    """A process killed mid-save leaves `.<key>.pid<N>.<random>.tmp`; the next open removes it."""
    path = write_corpus(tmp_path, HAND_CORPUS)
    child = subprocess.Popen([sys.executable, "-c", "pass"])
    child.wait()
    staging = tmp_path / "cache" / "bm25" / f".0123456789abcdef.pid{child.pid}.k7_q.tmp"
    staging.mkdir(parents=True)
    (staging / "params.index.json").write_text("{" * 1000)  # about a megabyte in real life
    assert [doc for doc, _ in search(build(path), "apple")] == ["d1"]
    assert not staging.exists()
    assert len(cached_indexes(tmp_path / "cache")) == 1


def test_the_index_key_names_the_bm25s_version_importlib_metadata_gives() -> None:
    import importlib.metadata

    assert bm25_store._bm25s_version() == importlib.metadata.version("bm25s")


def test_indexing_tells_its_progress_in_documents(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(bm25_store, "_PROGRESS_EVERY", 2)
    corpus = tmp_path / "corpus.jsonl"
    rows = [{"_id": f"d{n}", "title": "", "text": f"word{n} apple"} for n in range(5)]
    corpus.write_text("\n".join(json.dumps(r) for r in rows) + "\n\n")  # a blank line too
    told: list[tuple[int, int]] = []
    config = BM25Config.from_checked(KIND.checked({}))
    bm25_store.index_corpus(
        corpus, config, Analyzer.for_config(config), lambda done, total: told.append((done, total))
    )
    assert told == [(2, 5), (4, 5), (5, 5)]
