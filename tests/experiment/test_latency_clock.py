"""Which clock an experiment compares latencies on (`llm_eval.experiment.latency_clock`), how the
retrievers record CPU time, and that the ratio, the front and the files use the clock
chosen. Latencies are injected: nothing here is timed."""

from __future__ import annotations

import csv
import io
import json
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import replace
from pathlib import Path
from typing import Any

import pytest
from conftest import gold_query

from llm_eval.commands.experiment import clock_percentiles, plan
from llm_eval.config_io import load_config
from llm_eval.errors import InputError
from llm_eval.experiment.latency_clock import choose_clock, fall_back, on_clock, without_cpu
from llm_eval.experiment.variants import Measured, compare_variants, recommendation
from llm_eval.experiment.variants_view import terminal_text, to_csv, to_json, to_markdown
from llm_eval.gold import GoldSet
from llm_eval.retrievers import Hits, retriever_kind
from llm_eval.retrievers.fusion import Component, FusionRetriever
from llm_eval.retrievers.pool import PooledRetriever
from llm_eval.runs import QueryResults, RankedResult, Run
from llm_eval.scoring import score_run

REPO = Path(__file__).resolve().parents[2]
DEMO = REPO / "config" / "examples" / "experiment.yaml"
BM25: dict[str, Any] = {"kind": "bm25"}
HTTP: dict[str, Any] = {"kind": "http", "url": "http://127.0.0.1:9/search"}
LOCAL: dict[str, Any] = {"kind": "embedding", "model_path": "models/minilm"}
ENDPOINT: dict[str, Any] = {"kind": "embedding", "base_url": "http://127.0.0.1:9/v1", "model": "e5"}
PYTHON: dict[str, Any] = {"kind": "python", "target": "app.search:search"}


@pytest.fixture
def project(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A working directory holding the model folder `LOCAL` names."""
    monkeypatch.chdir(tmp_path)
    (tmp_path / "models" / "minilm").mkdir(parents=True)
    (tmp_path / "models" / "minilm" / "modules.json").write_text("[]")


@pytest.mark.parametrize(
    ("kind", "settings", "inside"),
    [
        ("bm25", {}, True),
        ("embedding", {"model_path": "models/minilm"}, True),
        ("embedding", {"base_url": "http://127.0.0.1:9/v1", "model": "e5"}, False),
        ("fusion", {"retrievers": {"lex": BM25, "dense": LOCAL}}, True),
        ("fusion", {"retrievers": {"lex": BM25, "dense": ENDPOINT}}, False),
        ("fusion", {"retrievers": {"lex": BM25, "api": HTTP}}, False),
        ("fusion", {"retrievers": {"lex": BM25, "fn": PYTHON}}, False),
        ("python", {"target": "app.search:search"}, False),
        ("http", {"url": "http://127.0.0.1:9/search"}, False),
        ("mcp", {"command": ["server"]}, False),
        ("run", {"path": "run.jsonl"}, False),
    ],
)
def test_which_kinds_search_in_this_process(
    project: None, kind: str, settings: dict[str, Any], inside: bool
) -> None:
    """Each kind says whether its retriever searches in this process (in words when
    not), read from the record of its checked settings."""
    assert (where(kind, settings) is None) is inside


def where(name: str, settings: dict[str, Any]) -> str | None:
    kind = retriever_kind(name)
    return kind.searched_elsewhere(kind.record(kind.checked(settings)))


def elsewhere(variants: list[tuple[str, str, dict[str, Any]]]) -> list[tuple[str, str | None]]:
    return [(name, where(k, s)) for name, k, s in variants]


def test_auto_is_cpu_time_only_when_every_variant_searches_here(project: None) -> None:
    local = elsewhere([("a", "bm25", {}), ("b", "fusion", {"retrievers": {"x": BM25, "y": LOCAL}})])
    clock, reason = choose_clock("auto", local)
    assert clock == "cpu" and reason.startswith("CPU time of this process")
    clock, reason = choose_clock(
        "auto", [*local, *elsewhere([("svc", "http", {"url": "http://u"})])]
    )
    assert clock == "wall"
    assert (
        reason
        == "wall time, since `svc` is an http retriever, whose work happens in another process"
    )
    clock, reason = choose_clock(
        "auto", [*local, *elsewhere([("fn", "python", {"target": "app:search"})])]
    )
    assert clock == "wall" and "`fn` is a python retriever, which may call a service" in reason
    # Asked for, a clock is taken as it is; a python retriever then counts as in-process.
    assert choose_clock("cpu", elsewhere([("fn", "python", {"target": "app:search"})]))[0] == "cpu"
    assert choose_clock("wall", local)[0] == "wall"
    with pytest.raises(ValueError, match="one of auto, cpu, wall"):
        choose_clock("monotonic", local)


def test_the_demo_sweep_is_compared_on_cpu_time() -> None:
    variants = plan([DEMO]).variants
    triples = [(v.name, v.retriever.kind, v.retriever.settings) for v in variants]
    assert {v.retriever.kind for v in variants} == {"bm25", "fusion"}
    assert choose_clock("auto", elsewhere(triples))[0] == "cpu"


def _answer(query_id: str, wall: float, cpu: float | None) -> QueryResults:
    return QueryResults(query_id, (RankedResult("d"),), wall, cpu_ms=cpu)


def test_a_variant_without_cpu_time_for_every_query_falls_back_to_wall_time() -> None:
    whole = Run({"q1": _answer("q1", 5.0, 1.0), "q2": _answer("q2", 6.0, 2.0)})
    failed = QueryResults("q3", (), None, "timeout")  # a failure has no time to miss
    partial = Run({"q1": _answer("q1", 5.0, 1.0), "q3": failed, "q2": _answer("q2", 6.0, None)})
    assert fall_back(without_cpu({"a": whole}), "cpu", "why") == ("cpu", "why")
    clock, reason = fall_back(without_cpu({"a": whole, "pool": partial}), "cpu", "why")
    assert clock == "wall"
    assert reason.startswith("wall time, since `pool` has no CPU time for every query")
    assert fall_back(without_cpu({"pool": partial}), "wall", "as asked") == ("wall", "as asked")
    # On the CPU clock each latency is the CPU time; on the wall clock the run is as it was.
    assert [a.latency_ms for a in on_clock(whole, "cpu").queries.values()] == [1.0, 2.0]
    assert on_clock(whole, "wall") is whole


@contextmanager
def _searcher(cpu: float) -> Iterator[Callable[[str, int], Hits]]:
    yield lambda query, top_k: Hits((RankedResult(query),), 9.0, cpu_ms=cpu)


class Fixed:
    """A searcher whose every search took 9 ms of wall time and `cpu` ms of CPU time."""

    def __init__(self, cpu: float) -> None:
        self.cpu = cpu

    def session(self) -> Any:
        return _searcher(self.cpu)


def test_a_pool_keeps_cpu_time_only_one_query_at_a_time() -> None:
    queries = [gold_query(f"q{i}", (("d", 1),)) for i in range(4)]
    alone = PooledRetriever(Fixed(2.0), 1, {"kind": "test"}).retrieve(queries, 5)
    assert [a.cpu_ms for a in alone.queries.values()] == [2.0] * 4
    # Several queries at once: process time would mix them, so none is kept.
    pooled = PooledRetriever(Fixed(2.0), 3, {"kind": "test"}).retrieve(queries, 5)
    assert [a.cpu_ms for a in pooled.queries.values()] == [None] * 4
    assert [a.latency_ms for a in pooled.queries.values()] == [9.0] * 4


def test_a_fusion_sums_its_components_cpu_time_when_all_have_one() -> None:
    queries = [gold_query("q", (("d", 1),))]

    def fusion(*cpus: float, threads: int = 1) -> QueryResults:
        components = tuple(
            Component(f"c{i}", PooledRetriever(Fixed(cpu), threads, {"kind": f"c{i}"}), 1.0)
            for i, cpu in enumerate(cpus)
        )
        return (
            FusionRetriever(components, "rrf", 60.0, "minmax", None)
            .retrieve(queries, 5)
            .queries["q"]
        )

    both = fusion(2.0, 3.5)
    assert both.cpu_ms == 5.5 and both.latency_ms == 18.0
    assert fusion(2.0, 3.5, threads=2).cpu_ms is None


def test_bm25_records_the_cpu_time_of_every_query(tmp_path: Path) -> None:
    from llm_eval.retrieval import build_retriever

    config = replace(plan([DEMO]).base, output=tmp_path)
    queries = [gold_query(f"q{i}", (("d", 1),), text=f"how do I open a file {i}") for i in range(3)]
    run = build_retriever(config).retrieve(queries, 5)
    for answer in run.queries.values():
        assert answer.cpu_ms is not None and answer.cpu_ms >= 0.0
        assert answer.latency_ms is not None


def _query(i: int) -> Any:
    return gold_query(f"q{i:02}", ((f"d{i}", 1),))


def _variant(name: str, gold: GoldSet, wall: list[float], cpu: list[float], clock: str) -> Measured:
    """A variant ranking every relevant document first, with the given times per query."""
    run = Run(
        {
            q.query_id: QueryResults(q.query_id, (RankedResult(f"d{i}"),), wall[i], cpu_ms=cpu[i])
            for i, q in enumerate(gold.queries)
        }
    )
    return Measured(name, score_run(gold, on_clock(run, clock), ["mrr"], 1), 5)


def _experiment(clock: str) -> tuple[Any, GoldSet, dict[str, Run]]:
    """`busy` took twice `ref`'s wall time on every query (it met the load) but the same
    CPU time; `heavy` took twice the CPU time and the same wall time."""
    gold = GoldSet(tuple(_query(i) for i in range(60)))
    spread = [1.0 + (i * 7 % 60) / 30 for i in range(60)]
    double = [2 * t for t in spread]
    times = {"ref": (spread, spread), "busy": (double, spread), "heavy": (spread, double)}
    variants = [_variant(n, gold, w, c, clock) for n, (w, c) in times.items()]
    runs = {
        n: Run(
            {
                q.query_id: QueryResults(q.query_id, (), w[i], cpu_ms=c[i])
                for i, q in enumerate(gold.queries)
            }
        )
        for n, (w, c) in times.items()
    }
    result = compare_variants(
        gold,
        variants,
        ["mrr"],
        "ref",
        "mrr",
        clock=clock,
        clock_reason=f"{clock} for the test",
        clocks={n: clock_percentiles(r, gold) for n, r in runs.items()},
    )
    return result, gold, runs


def test_the_ratio_and_the_front_use_the_clock_chosen() -> None:
    on_cpu, _, _ = _experiment("cpu")
    assert on_cpu.clock == "cpu"
    assert on_cpu.row("busy").latency_ratios["p95"].tied
    assert not on_cpu.row("heavy").latency_ratios["p95"].tied
    assert on_cpu.row("heavy").latency_ratios["p95"].ratio == pytest.approx(2.0)
    # Same quality everywhere: the front is whoever no one is faster than, on CPU time.
    assert {r.name: r.on_front for r in on_cpu.rows} == {"ref": True, "busy": True, "heavy": False}
    assert "against p95 CPU time" in recommendation(on_cpu)
    on_wall, _, _ = _experiment("wall")
    assert on_wall.row("busy").latency_ratios["p95"].ratio == pytest.approx(2.0)
    assert on_wall.row("heavy").latency_ratios["p95"].tied
    assert {r.name: r.on_front for r in on_wall.rows} == {"ref": True, "busy": False, "heavy": True}
    assert "against p95 wall time" in recommendation(on_wall)


def test_the_files_and_the_terminal_say_which_clock(tmp_path: Path) -> None:
    result, _, _ = _experiment("cpu")
    rows = {r["variant"]: r for r in csv.DictReader(io.StringIO(to_csv(result)))}
    assert rows["busy"]["latency_clock"] == "cpu"
    # Both clocks are recorded; latency_p95 is the chosen one's.
    assert float(rows["busy"]["wall_latency_p95"]) == pytest.approx(
        2 * float(rows["busy"]["cpu_latency_p95"])
    )
    assert float(rows["busy"]["latency_p95"]) == pytest.approx(
        float(rows["busy"]["cpu_latency_p95"])
    )
    document = json.loads(to_json(result, "words", {}))
    assert document["latency_clock"] == "cpu"
    assert document["latency_clock_reason"] == "cpu for the test"
    busy = next(v for v in document["variants"] if v["name"] == "busy")
    assert set(busy["latency_by_clock"]) == {"wall", "cpu"}
    assert busy["latency_by_clock"]["cpu"]["p95"] == pytest.approx(busy["values"]["latency_p95"])
    markdown = to_markdown(result, "words", None)
    assert "| p95 CPU time (95% CI) |" in markdown
    assert "### Latency against `ref` (CPU time)" in markdown
    assert "Latency: cpu for the test." in markdown
    text = terminal_text(result, "words", tmp_path, None, 1.0, 80)
    assert "CPU ms" in text.splitlines()[2]
    assert "CPU ms: the p95 latency in cpu for the test." in text
    on_wall, _, _ = _experiment("wall")
    assert "wall ms" in terminal_text(on_wall, "w", tmp_path, None, 1.0, 80).splitlines()[2]
    assert "| p95 wall time (95% CI) |" in to_markdown(on_wall, "w", None)
    assert {r["latency_clock"] for r in csv.DictReader(io.StringIO(to_csv(on_wall)))} == {"wall"}


def test_a_clock_without_a_time_for_every_query_is_not_recorded() -> None:
    gold = GoldSet(tuple(_query(i) for i in range(3)))
    run = Run({f"q0{i}": _answer(f"q0{i}", 5.0, None if i == 1 else 1.0) for i in range(3)})
    assert set(clock_percentiles(run, gold)) == {"wall"}


@pytest.mark.parametrize(("written", "read"), [("cpu", "cpu"), ("wall", "wall"), (None, "auto")])
def test_the_config_names_the_clock(tmp_path: Path, written: str | None, read: str) -> None:
    text = DEMO.read_text()
    if written is not None:
        text = text.replace("  reference: lucene\n", f"  reference: lucene\n  latency: {written}\n")
    path = tmp_path / "experiment.yaml"
    path.write_text(
        text.replace("path: gold/", f"path: {REPO}/gold/").replace(
            "corpus: gold/", f"corpus: {REPO}/gold/"
        )
    )
    assert load_config(path).experiment.latency == read


def test_a_clock_that_is_not_one_is_an_error_at_its_line(tmp_path: Path) -> None:
    text = DEMO.read_text().replace(
        "  reference: lucene\n", "  reference: lucene\n  latency: monotonic\n"
    )
    path = tmp_path / "experiment.yaml"
    path.write_text(
        text.replace("path: gold/", f"path: {REPO}/gold/").replace(
            "corpus: gold/", f"corpus: {REPO}/gold/"
        )
    )
    with pytest.raises(
        InputError, match="expected one of auto, cpu, wall, got 'monotonic'"
    ) as caught:
        load_config(path)
    assert caught.value.line is not None
