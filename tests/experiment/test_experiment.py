"""`llm-eval experiment`: the demo sweep end to end, its paired statistics against
`compare` and the gate for the same pair, Holm across variants, the Pareto front with
its ties, the scope, the picture, and config errors.

No assertion here depends on timing: the demo's latencies are whatever the machine
measured, so only what holds for any latencies is checked there; the front's rules
are checked on runs with latencies given."""

from __future__ import annotations

import contextlib
import csv
import io
import json
import re
import shutil
import sys
import warnings
from pathlib import Path

import numpy as np
import pytest
from conftest import Cli

from llm_eval.cli import main
from llm_eval.experiment.variants import (
    Measured,
    compare_variants,
    pareto_front,
    recommendation,
    tie_groups,
    tied,
)
from llm_eval.experiment.variants_view import quality_axis, to_markdown
from llm_eval.gold import GoldQuery, GoldSet
from llm_eval.runs import QueryResults, RankedResult, Run
from llm_eval.scoring import score_run
from llm_eval.stats import holm

REPO = Path(__file__).resolve().parents[2]
DEMO = REPO / "config" / "examples" / "experiment.yaml"
BASE = (REPO / "config" / "llm-eval.yaml").read_text()


@pytest.fixture(scope="module")
def demo(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, str]:
    """The demo sweep, run once for the tests that read its files and what it printed."""
    out = tmp_path_factory.mktemp("experiment")
    printed = io.StringIO()
    with pytest.MonkeyPatch.context() as patch, contextlib.redirect_stdout(printed):
        patch.chdir(REPO)
        patch.setenv("COLUMNS", "80")  # the width a pipe gets, whatever runs the tests
        assert main(["experiment", str(DEMO), "--out", str(out)]) == 0
    return out, printed.getvalue()


def test_the_demo_sweep_writes_the_table_words_and_picture(demo: tuple[Path, str]) -> None:
    out, stdout = demo
    document = json.loads((out / "experiment.json").read_text())
    names = [v["name"] for v in document["variants"]]
    assert names == [
        "lucene",
        "k1=1.2 b=0.75",
        "k1=2.0 b=0.9",
        "no title",
        "no stemming",
        "fusion rrf",
        "fusion weighted",
    ]
    assert document["reference"] == "lucene"
    assert document["variants"][0]["versus_reference"] == {}
    for variant in document["variants"]:
        values = variant["values"]
        assert 0 < values["recall@5"] < 1
        assert values["latency_p95"] > 0
        assert values["error_rate"] == 0
        assert "score_discrimination@10" in values and "rank_correlation@10" in values
        assert variant["pareto_front"] in (True, False)
        interval = variant["latency_p95_interval"]
        assert interval["low"] <= values["latency_p95"]
        assert interval["high"] is None or values["latency_p95"] <= interval["high"]
    # Mistuned BM25 loses recall@5; a better run is named only when the test says so.
    mistuned = document["variants"][2]["versus_reference"]["recall@5"]
    assert mistuned["delta"] < -0.03
    assert mistuned["better"] in ("reference", "no significant difference")
    assert document["scope"] == "all tiers"
    assert document["queries"] == 327
    markdown = (out / "experiment.md").read_text()
    assert "![recall@5 against p95 CPU time](experiment-pareto.png)" in markdown
    assert document["recommendation"] in markdown
    assert any(f"`{v['name']}`" in document["recommendation"] for v in document["variants"])
    assert (out / "experiment-pareto.png").read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    assert b"<svg" in (out / "experiment-pareto.svg").read_bytes()
    rows = list(csv.DictReader((out / "experiment.csv").open()))
    assert [r["variant"] for r in rows] == names
    assert float(rows[2]["recall@5_delta"]) == pytest.approx(mistuned["delta"])
    assert all(len(line) <= 80 for line in stdout.splitlines() if not line.startswith("  /"))
    # Where the words wrap depends on the latencies they quote, so compare them unwrapped.
    words = " ".join(stdout.split())
    assert "fusion lift: `fusion rrf` improves MRR over `lucene` by 0.014" in words
    assert "on recall@5 over all tiers (43.8%, 327 queries)" in words
    # The lift of fusion rrf over the reference is that variant's own paired test.
    lift = document["lifts"][0]
    pair = document["variants"][5]["versus_reference"]["mrr"]
    assert (lift["delta"], lift["ci_low"], lift["ci_high"], lift["p_value"]) == (
        pair["delta"],
        pair["ci_low"],
        pair["ci_high"],
        pair["p_value"],
    )


def _table_widths(markdown: str) -> list[int]:
    """Each table's width in GitHub's rendering, estimated from above: 9 px a
    character (16-px text; code spans are smaller) and 26 px of padding a cell."""
    widths, columns = [], None
    for line in [*markdown.splitlines(), ""]:
        if line.startswith("|"):
            cells = [c.strip() for c in line.strip("|").split(" | ")]
            cells = [c for c in cells if not set(c) <= set("-:")] or cells
            sizes = [9 * len(c) + 26 for c in cells]
            columns = sizes if columns is None else list(map(max, columns, sizes))
        elif columns is not None:
            widths.append(sum(columns))
            columns = None
    return widths


def test_the_tables_fit_githubs_column(demo: tuple[Path, str]) -> None:
    out, _ = demo
    markdown = (out / "experiment.md").read_text()
    widths = _table_widths(markdown)
    assert len(widths) >= 5
    assert max(widths) <= 880
    # Long metric names are abbreviated, with a legend.
    assert "| SD@10 | RC@10 |" in markdown
    assert "SD@10: score discrimination@10; RC@10: rank correlation@10" in markdown


def test_every_value_says_its_scope(
    demo: tuple[Path, str],
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    cli: Cli,
) -> None:
    out, stdout = demo
    markdown = (out / "experiment.md").read_text()
    assert "| variant | recall@5 (all tiers) | Δ |" in markdown
    assert "Every value is over all tiers (327 queries scored on recall@5)" in markdown
    assert "### Every metric (all tiers)" in markdown
    assert stdout.startswith("llm-eval experiment: 7 variants over all tiers in ")
    # --tier A measures what a gate scoped to tier A measures.
    monkeypatch.chdir(REPO)
    code, printed, _ = cli("experiment", DEMO, "--tier", "A", "--out", tmp_path)
    assert code == 0
    assert "7 variants over tier A in " in printed
    scoped = json.loads((tmp_path / "experiment.json").read_text())
    assert (scoped["scope"], scoped["queries"]) == ("tier A", 176)
    full = json.loads((out / "experiment.json").read_text())["variants"][1]["slices"]
    tier_a = next(s for s in full if s["slice"] == "tier A" and s["metric"] == "recall@5")
    assert scoped["variants"][0]["values"]["recall@5"] == pytest.approx(tier_a["reference"])
    assert f"{tier_a['reference']:.1%}" == "41.1%"
    assert "| variant | recall@5 (tier A) | Δ |" in (tmp_path / "experiment.md").read_text()


def test_holm_is_applied_across_the_variants(demo: tuple[Path, str]) -> None:
    out, _ = demo
    variants = json.loads((out / "experiment.json").read_text())["variants"][1:]
    for metric in ("recall@5", "mrr"):
        raw = [v["versus_reference"][metric]["p_value"] for v in variants]
        adjusted = [v["versus_reference"][metric]["p_holm"] for v in variants]
        assert adjusted == pytest.approx(holm(raw))


def _write(path: Path, text: str) -> Path:
    path.write_text(text)
    return path


def test_a_pair_matches_compare_and_the_gate(
    tmp_path: Path,
    demo_indexes: Path,
    monkeypatch: pytest.MonkeyPatch,
    cli: Cli,
) -> None:
    monkeypatch.chdir(REPO)
    out = tmp_path / "out"
    shutil.copytree(demo_indexes, out / "cache")  # a's index and b's (degraded.yaml's)
    a = _write(tmp_path / "lucene.yaml", BASE.replace("output: .llm-eval", f"output: {out}"))
    b = _write(
        tmp_path / "mistuned.yaml",
        BASE.replace("output: .llm-eval", f"output: {out}")
        .replace("k1: 0.9", "k1: 3.0")
        .replace("b: 0.4", "b: 1.0"),
    )
    assert cli("experiment", a, b, "--out", tmp_path / "exp")[0] == 0
    pair = json.loads((tmp_path / "exp" / "experiment.json").read_text())["variants"][1]
    assert pair["name"] == "mistuned"
    for name, path in (("a", a), ("b", b)):
        assert cli("retrieve", "--config", path, "--out", tmp_path / f"{name}.jsonl")[0] == 0
    args = ["compare", str(tmp_path / "a.jsonl"), str(tmp_path / "b.jsonl")]
    assert cli(*args, "--config", a, "--out", tmp_path / "cmp")[0] == 0
    compared = list(csv.DictReader((tmp_path / "cmp" / "compare.csv").open()))
    checked = 0
    for row in compared:
        slice_rows = (
            [pair["versus_reference"][row["metric"]]]
            if row["slice"] == "overall"
            else [
                s
                for s in pair["slices"]
                if s["slice"] == row["slice"] and s["metric"] == row["metric"]
            ]
        )
        if not slice_rows:
            continue
        mine = slice_rows[0]
        assert mine["delta"] == pytest.approx(float(row["delta"]), abs=1e-12)
        assert mine["ci_low"] == pytest.approx(float(row["ci_low"]), abs=1e-12)
        assert mine["ci_high"] == pytest.approx(float(row["ci_high"]), abs=1e-12)
        assert mine["p_value"] == pytest.approx(float(row["p_value"]), abs=1e-12)
        checked += 1
    assert checked > 20
    # The gate, with the lucene run as baseline and a zero limit at alpha / 2, computes
    # the same interval for tier A.
    baseline = tmp_path / "baseline.json"
    criteria = _write(
        tmp_path / "criteria.yaml",
        "statistics: {alpha: 0.025}\n"
        "gates:\n  - {name: r5, metric: recall@5, regression_max: 0, scope: {tier: A}}\n",
    )
    common = ["--criteria", str(criteria), "--baseline", str(baseline)]
    assert cli("baseline", "refresh", "--config", a, *common, "--force")[0] == 0
    code, printed, _ = cli("gate", "--config", b, *common, "--format", "json")
    assert code == 1
    gate = json.loads(printed)["gates"][0]["stats"]
    tier_a = next(s for s in pair["slices"] if s["slice"] == "tier A" and s["metric"] == "recall@5")
    assert gate["ci_low"] == pytest.approx(tier_a["ci_low"], abs=1e-12)
    assert gate["ci_high"] == pytest.approx(tier_a["ci_high"], abs=1e-12)


@pytest.mark.parametrize(
    ("better", "faster", "front", "tied_pairs"),
    [
        # Nothing beyond the noise: everything on the front, all tied.
        (set(), set(), {"a": True, "b": True, "c": True}, {"ab", "ac", "bc"}),
        # a better than b, latencies within noise: b is off the front.
        ({("a", "b")}, set(), {"a": True, "b": False, "c": True}, {"ac", "bc"}),
        # a better, b faster: a trade-off, both on the front, not tied.
        ({("a", "b")}, {("b", "a")}, {"a": True, "b": True, "c": True}, {"ac", "bc"}),
        # c faster than a and b, and no worse: only c.
        (set(), {("c", "a"), ("c", "b")}, {"a": False, "b": False, "c": True}, {"ab"}),
    ],
)
def test_the_front_counts_only_differences_beyond_the_noise(
    better: set[tuple[str, str]],
    faster: set[tuple[str, str]],
    front: dict[str, bool],
    tied_pairs: set[str],
) -> None:
    names = ["a", "b", "c"]
    assert pareto_front(names, better, faster) == front
    pairs = {a + b for i, a in enumerate(names) for b in names[i + 1 :]}
    assert {p for p in pairs if tied(p[0], p[1], better, faster)} == tied_pairs


def _query(i: int) -> GoldQuery:
    return GoldQuery(
        f"q{i:02}",
        f"question {i}",
        "AB"[i % 2],
        (),
        ((f"d{i}", 1),),
        False,
        None,
        None,
        "gold.jsonl",
        i + 1,
    )


def _measured(name: str, gold: GoldSet, hits: int, latencies: list[float]) -> Measured:
    """A variant that ranks the relevant document first for the first `hits` queries
    and second for the others (MRR 1 or 1/2: graded, so the fast paired test)."""
    run = Run(
        {
            q.query_id: QueryResults(
                q.query_id,
                tuple(
                    RankedResult(d, None) for d in ((f"d{i}", "x") if i < hits else ("x", f"d{i}"))
                ),
                latencies[i],
            )
            for i, q in enumerate(gold.queries)
        }
    )
    return Measured(name, score_run(gold, run, ["mrr"], 1), 2)


def test_within_noise_the_front_depends_on_the_scores_alone() -> None:
    gold = GoldSet(tuple(_query(i) for i in range(100)))
    rng = np.random.default_rng(7)
    fronts = set()
    for _ in range(20):
        # Three variants with the same latencies up to jitter far inside their spread,
        # one clearly faster and worse, one clearly slower and no better.
        base = rng.uniform(1.0, 3.0, 100)
        jittered = [(base * rng.uniform(0.9, 1.1, 100)).tolist() for _ in range(3)]
        variants = [
            _measured("best", gold, 80, jittered[0]),
            _measured("as good", gold, 78, jittered[1]),
            _measured("worse", gold, 30, jittered[2]),
            _measured("fast", gold, 10, (base / 100).tolist()),
            _measured("slow", gold, 80, (base * 10).tolist()),
        ]
        result = compare_variants(gold, variants, ["mrr"], "best", "mrr")
        fronts.add(tuple((r.name, r.on_front, r.ties) for r in result.rows))
    assert fronts == {
        (
            ("best", True, ("as good",)),
            ("as good", True, ("best",)),
            ("worse", False, ()),
            ("fast", True, ()),
            ("slow", False, ()),
        )
    }
    assert tie_groups(result.rows) == [["best", "as good"]]
    words = recommendation(result)
    assert "`best`, `as good` and `fast`." in words
    assert "`best` and `as good` are tied within noise" in words
    markdown = to_markdown(result, words, None)
    assert "| `best` | 0.900 | reference |" in markdown
    assert markdown.count("| yes, tied |") == 2
    assert "| `fast` | 0.550 | −0.350 * |" in markdown


def test_latencies_without_spread_are_compared_as_they_are() -> None:
    # A run that charged every query one batch's mean has zero-width intervals, so any
    # difference counts: why batch retrievers time each query on its own.
    gold = GoldSet(tuple(_query(i) for i in range(100)))
    variants = [_measured("a", gold, 30, [0.30] * 100), _measured("b", gold, 30, [0.29] * 100)]
    result = compare_variants(gold, variants, ["mrr"], "a", "mrr")
    assert [r.on_front for r in result.rows] == [False, True]


def test_without_matplotlib_the_table_says_how_to_get_the_picture(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, cli: Cli
) -> None:
    monkeypatch.chdir(REPO)
    monkeypatch.setitem(sys.modules, "matplotlib", None)  # import fails
    code, out, _ = cli("experiment", DEMO, "--out", tmp_path)
    assert code == 0
    assert "pip install 'llm-eval-ci[plots]'" in out
    assert "pip install 'llm-eval-ci[plots]'" in (tmp_path / "experiment.md").read_text()
    assert not (tmp_path / "experiment-pareto.png").exists()
    front = [
        v["pareto_front"]
        for v in json.loads((tmp_path / "experiment.json").read_text())["variants"]
    ]
    assert set(front) <= {True, False}  # the table still marks the front


@pytest.mark.parametrize(
    ("variants", "message"),
    [
        ("variants:\n  - name: x\n", ":18: variants: list two or more variants to compare"),
        (
            "variants:\n  - name: x\n  - name: x\n",
            ":19: variants[1].name: duplicate variant name 'x' (first at line 18)",
        ),
        (
            "variants:\n  - name: x\n  - name: y\n    retriever: {k1: -2}\n",
            ":20: variants[1].retriever.k1: must be a number >= 0, got -2",
        ),
        (
            "variants:\n  - name: x\n  - name: y\nexperiment: {reference: z}\n",
            ":20: experiment.reference: no variant is named 'z' (variants: x, y)",
        ),
        (
            "variants:\n  - name: x\n  - name: <b>@here</b>\n",
            ":19: variants[1].name: a variant name may not hold control characters, "
            "bidirectional controls, `, |, < or > (got '<b>@here</b>')",
        ),
        (
            'variants:\n  - name: x\n  - name: "a\\x1b[31mred\\u202e"\n',
            ":19: variants[1].name: a variant name may not hold control characters",
        ),
        ("", "an experiment compares two or more variants"),
        (
            "variants:\n  - name: x\n  - name: y\n    top_k: 3\n",
            "variant 'y' retrieves top_k 3, fewer than recall@5 needs",
        ),
        (
            "variants:\n  - name: x\n  - name: y\n    retriever: {kind: mcp}\n",
            ":20: variants[1].retriever: give either `command`",
        ),
        (
            "variants:\n  - name: x\n  - name: y\n",
            "no gold query is in tier 'C' (tiers: A, B)",
        ),
    ],
)
def test_config_errors_name_file_line_and_key(
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    cli: Cli,
    variants: str,
    message: str,
) -> None:
    monkeypatch.chdir(REPO)
    config = _write(tmp_path / "c.yaml", BASE + variants)
    tier = ["--tier", "C"] if "tier 'C'" in message else []
    code, _, err = cli("experiment", config, *tier, "--out", tmp_path / "o")
    assert code == 3
    assert message in err
    assert len(err.strip().splitlines()) == 1


def test_the_picture_fits_its_axes_to_the_data() -> None:
    # The demo's 39.6–44.2% spread fills the plot instead of a sliver of 0–100%.
    assert quality_axis("recall@5", 100.0, [39.6, 44.2]) == (38.0, 46.0)
    assert quality_axis("mrr", 1.0, [0.47, 0.54]) == (0.46, 0.56)
    # Within the metric's range: a share near 100% stops at 100%.
    assert quality_axis("recall@5", 100.0, [97.0, 99.5]) == (96.0, 100.0)
    assert quality_axis("latency_p95", 1.0, [2.0, 4.0]) == (1.5, 4.5)


def test_a_front_of_tied_variants_is_said_once() -> None:
    gold = GoldSet(tuple(_query(i) for i in range(100)))
    spread = [1.0 + i / 100 for i in range(100)]
    variants = [_measured("a", gold, 50, spread), _measured("b", gold, 51, spread[::-1])]
    words = recommendation(compare_variants(gold, variants, ["mrr"], "a", "mrr"))
    assert "`a` and `b`, both tied within noise (p95 wall times within noise of each" in words
    assert words.count("tied within noise") == 1


def test_config_files_of_any_name_give_variants_named_apart_and_inert(
    tmp_path: Path, demo_indexes: Path, monkeypatch: pytest.MonkeyPatch, cli: Cli
) -> None:
    # File names may hold what Markdown, a terminal and matplotlib read as markup or
    # control: a newline, a pipe, a backtick, ESC, BEL, right-to-left override, `$`.
    monkeypatch.chdir(REPO)
    out = tmp_path / "out"
    shutil.copytree(demo_indexes, out / "cache")
    text = BASE.replace("output: .llm-eval", f"output: {out}")
    stems = ["new\nline|pipe`tick", "esc\x1b[31m bel\x07 rlo\u202eabc", "$x^2$"]
    configs = [str(_write(tmp_path / f"{stem}.yaml", text)) for stem in stems]
    same = str(_write(tmp_path / "same.yaml", text))
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        code, _, _ = cli("experiment", *configs, same, same, same, "--out", tmp_path / "e")
    assert code == 0
    assert [str(w.message) for w in caught] == []
    names = [
        v["name"] for v in json.loads((tmp_path / "e" / "experiment.json").read_text())["variants"]
    ]
    assert names[:3] == ["new_line_pipe_tick", "esc_[31m bel_ rlo_abc", "$x^2$"]
    assert names[3:] == ["same", same, f"{same} (2)"]
    markdown = (tmp_path / "e" / "experiment.md").read_text()
    assert not re.search("[\x00-\x09\x0b-\x1f\x7f\u202e<>]", markdown)
    widths = {line.count(" | ") for line in markdown.splitlines() if line.startswith("| `")}
    assert len(widths) <= 3  # each table keeps its own number of cells a row
    for table in markdown.split("\n\n"):
        rows = [line for line in table.splitlines() if line.startswith("|")]
        assert len({row.count("|") - row.count("\\|") for row in rows}) <= 1, table
