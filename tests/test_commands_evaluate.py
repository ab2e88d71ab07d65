from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest
from conftest import Cli

from llm_eval.errors import ExitCode

GOLD = [
    {"query_id": "q1", "query": "a?", "relevant": {"d1": 2, "d2": 1}, "tags": ["x"]},
    {"query_id": "q2", "query": "b?", "relevant": ["d3"]},
    {"query_id": "q3", "query": "c?", "is_rejection": True},
    {"query_id": "q4", "query": "d?", "relevant": {"d4": 1}},
]
# q1: d2 at rank 2, d1 at rank 3; q2: d3 at rank 1 (repeated); q3 is a rejection query;
# q4 is not in the run; zz and yy are not in the gold set.
RUN = [
    {"query_id": "q1", "results": [{"doc_id": "d9"}, {"doc_id": "d2"}, {"doc_id": "d1"}]},
    {"query_id": "q2", "results": ["d3", "d3", "d8"]},
    {"query_id": "q3", "results": ["d1"]},
    {"query_id": "zz", "results": ["d1"]},
    {"query_id": "yy", "results": []},
]
# The same judgments and rankings in TREC files; q3's only judgment has grade 0.
TREC_QRELS = "q1 0 d1 2\nq1 0 d2 1\nq2 0 d3 1\nq3 0 d1 0\nq4 0 d4 1\n"
# The rank column contradicts the scores; d2 and d1 tie and d2 > d1 ranks first.
TREC_RUN = (
    "q1 Q0 d1 1 1.0 t\n"
    "q1 Q0 d9 2 3.0 t\n"
    "q1 Q0 d2 3 1.0 t\n"
    "q2 Q0 d8 1 0.5 t\n"
    "q2 Q0 d3 2 0.9 t\n"
    "q3 Q0 d1 1 1.0 t\n"
    "zz Q0 d1 1 1.0 t\n"
    "yy Q0 d7 1 1.0 t\n"
)


def write_jsonl(path: Path, records: list[dict[str, object]]) -> Path:
    path.write_text("".join(json.dumps(r) + "\n" for r in records), encoding="utf-8")
    return path


@pytest.fixture
def gold(tmp_path: Path) -> Path:
    return write_jsonl(tmp_path / "gold.jsonl", GOLD)


@pytest.fixture
def run(tmp_path: Path) -> Path:
    return write_jsonl(tmp_path / "run.jsonl", RUN)


def evaluate_json(cli: Cli, *args: str | Path) -> dict[str, object]:
    code, out, err = cli("evaluate", *args, "--format", "json")
    assert (code, err) == (0, "")
    document: dict[str, object] = json.loads(out)
    return document


def test_table(cli: Cli, gold: Path, run: Path) -> None:
    code, out, err = cli("evaluate", "--gold", gold, "--run", run, "--per-query")
    assert (code, err) == (0, "")
    assert out == (
        "query  recall@5     mrr\n"
        "-----  --------  ------\n"
        "all      0.6667  0.5000\n"
        "q1       1.0000  0.5000\n"
        "q2       1.0000  1.0000\n"
        "q4       0.0000  0.0000\n"
        "\n"
        "3 queries evaluated; 1 missing from the run, scored 0 (q4); 1 without a relevant "
        "document, left out; 2 run queries not in the gold set, ignored\n"
    )


def test_table_rows_are_aligned(cli: Cli, gold: Path, run: Path) -> None:
    metrics = ["-m", "ndcg@10", "-m", "P@1", "-m", "hit_rate@5"]
    _, out, _ = cli("evaluate", "--gold", gold, "--run", run, *metrics, "--per-query")
    table = out.split("\n\n")[0].splitlines()
    assert table[0].split() == ["query", "ndcg@10", "precision@1", "hit_rate@5"]
    assert [row.split()[0] for row in table[2:]] == ["all", "q1", "q2", "q4"]
    assert len({len(row) for row in table}) == 1
    # Every column after the first is right-aligned: its cells end where its rule ends.
    rule = table[1]
    ends = [i for i in range(len(rule)) if rule[i] == "-" and rule[i + 1 : i + 2] != "-"]
    for row in table:
        assert [row[end] != " " for end in ends[1:]] == [True] * 3
        assert [row[end + 1 : end + 2] in ("", " ") for end in ends] == [True] * 4


def test_summary_without_missing_or_extra_queries(cli: Cli, tmp_path: Path) -> None:
    gold = write_jsonl(
        tmp_path / "gold.jsonl",
        [
            {"query_id": "q1", "query": "x", "relevant": ["a"]},
            {"query_id": "q2", "query": "y", "relevant": ["c"]},
        ],
    )
    run = write_jsonl(
        tmp_path / "run.jsonl",
        [{"query_id": "q1", "results": ["b", "a"]}, {"query_id": "q2", "results": ["c"]}],
    )
    assert cli("evaluate", "--gold", gold, "--run", run, "-m", "mrr")[:2] == (
        0,
        "query     mrr\n-----  ------\nall    0.7500\n\n2 queries evaluated\n",
    )


def test_json(cli: Cli, gold: Path, run: Path) -> None:
    document = evaluate_json(cli, "--gold", gold, "--run", run)
    assert list(document) == ["metrics", "queries"]
    assert document["metrics"] == {"recall@5": pytest.approx(2 / 3), "mrr": 0.5}
    assert document["queries"] == {
        "evaluated": 3,
        "missing_from_run": ["q4"],
        "not_in_gold": 2,
        "rejection": 1,
    }


def test_json_per_query(cli: Cli, gold: Path, run: Path) -> None:
    document = evaluate_json(
        cli, "--gold", gold, "--run", run, "--per-query", "-m", "MRR", "-m", "recall@2"
    )
    assert sorted(document) == ["metrics", "per_query", "queries"]
    assert document["metrics"] == {"mrr": 0.5, "recall@2": pytest.approx(1 / 2)}
    assert document["per_query"] == {
        "q1": {"mrr": 0.5, "recall@2": 0.5},
        "q2": {"mrr": 1.0, "recall@2": 1.0},
        "q4": {"mrr": 0.0, "recall@2": 0.0},
    }


def test_trec_files_give_the_same_result_as_jsonl(
    cli: Cli, tmp_path: Path, gold: Path, run: Path
) -> None:
    qrels = tmp_path / "qrels.txt"
    qrels.write_text(TREC_QRELS)
    trec_run = tmp_path / "run.trec"
    trec_run.write_text(TREC_RUN)
    metrics = ["-m", "recall@5", "-m", "mrr", "-m", "ndcg@3", "-m", "map", "-m", "P@2"]
    from_jsonl = evaluate_json(cli, "--gold", gold, "--run", run, "--per-query", *metrics)
    from_trec = evaluate_json(cli, "--qrels", qrels, "--run", trec_run, "--per-query", *metrics)
    assert list(from_trec) == list(from_jsonl)
    assert from_trec["metrics"] == pytest.approx(from_jsonl["metrics"], abs=1e-12)
    trec_per_query, jsonl_per_query = from_trec["per_query"], from_jsonl["per_query"]
    assert isinstance(trec_per_query, dict)
    assert isinstance(jsonl_per_query, dict)
    assert list(trec_per_query) == list(jsonl_per_query) == ["q1", "q2", "q4"]
    for query_id, values in jsonl_per_query.items():
        assert trec_per_query[query_id] == pytest.approx(values, abs=1e-12)
    assert from_trec["queries"] == from_jsonl["queries"]


def test_run_format_option(cli: Cli, tmp_path: Path, gold: Path) -> None:
    trec_run = tmp_path / "run.txt"
    trec_run.write_text(TREC_RUN)
    document = evaluate_json(
        cli, "--gold", gold, "--run", trec_run, "--run-format", "trec", "-m", "mrr"
    )
    assert document["metrics"] == {"mrr": 0.5}


def test_relevance_level(cli: Cli, tmp_path: Path) -> None:
    gold = write_jsonl(
        tmp_path / "gold.jsonl",
        [
            {"query_id": "q1", "query": "x", "relevant": {"a": 2, "b": 1, "c": 2}},
            {"query_id": "q2", "query": "y", "relevant": {"d": 1}},
        ],
    )
    run = write_jsonl(
        tmp_path / "run.jsonl",
        [
            {"query_id": "q1", "results": ["b", "a", "x"]},
            {"query_id": "q2", "results": ["d"]},
        ],
    )
    args = ("--gold", gold, "--run", run, "-m", "recall@5", "-m", "mrr")
    level_1 = evaluate_json(cli, *args)
    level_2 = evaluate_json(cli, *args, "--relevance-level", "2")
    assert level_1["metrics"] == {"recall@5": pytest.approx((2 / 3 + 1) / 2), "mrr": 1.0}
    assert level_2["metrics"] == {"recall@5": 0.5, "mrr": 0.5}
    assert level_1["queries"] == {
        "evaluated": 2,
        "missing_from_run": [],
        "not_in_gold": 0,
        "rejection": 0,
    }
    assert level_2["queries"] == {
        "evaluated": 1,
        "missing_from_run": [],
        "not_in_gold": 0,
        "rejection": 1,
    }


def test_json_is_strict_json_when_no_query_is_evaluated(cli: Cli, tmp_path: Path) -> None:
    gold = write_jsonl(tmp_path / "gold.jsonl", [GOLD[2]])
    run = write_jsonl(tmp_path / "run.jsonl", [RUN[2]])
    code, out, _ = cli("evaluate", "--gold", gold, "--run", run, "--format", "json")
    assert code == 0

    def reject(constant: str) -> object:
        raise ValueError(f"not JSON: {constant}")

    document = json.loads(out, parse_constant=reject)
    assert document["queries"]["evaluated"] == 0


def test_unknown_metric(cli: Cli, gold: Path, run: Path) -> None:
    code, out, err = cli(
        "evaluate", "--gold", gold, "--run", run, "-m", "recall@5", "-m", "recal@5"
    )
    assert code == ExitCode.BAD_INPUT == 3
    assert out == ""
    assert err.startswith("llm-eval: error: unknown metric 'recal@5'; valid metrics: ")
    assert err.count("\n") == 1


def test_bad_gold_line(cli: Cli, tmp_path: Path, run: Path) -> None:
    gold = tmp_path / "gold.jsonl"
    gold.write_text('{"query_id": "q1", "query": "x"}\n\n{"query_id": "q2", "query": ""}\n')
    code, out, err = cli("evaluate", "--gold", gold, "--run", run)
    assert code == 3
    assert out == ""
    assert err == f"llm-eval: error: {gold}:3: query: must be a non-empty string\n"


@pytest.mark.parametrize("which", ["gold", "run"])
def test_missing_input_file(cli: Cli, tmp_path: Path, gold: Path, run: Path, which: str) -> None:
    absent = tmp_path / "absent.jsonl"
    paths = {"gold": gold, "run": run, which: absent}
    code, _, err = cli("evaluate", "--gold", paths["gold"], "--run", paths["run"])
    assert code == 3
    assert err == f"llm-eval: error: {absent}: no such file\n"


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["--gold", "{gold}"], "Missing option '--run'"),
        (["--run", "{run}"], "give either --gold or --qrels"),
        (
            ["--gold", "{gold}", "--qrels", "{gold}", "--run", "{run}"],
            "give either --gold or --qrels",
        ),
        (["--gold", "{gold}", "--run", "{run}", "--relevance-level", "0"], "--relevance-level"),
        (["--gold", "{gold}", "--run", "{run}", "--format", "csv"], "--format"),
        (["--gold", "{gold}", "--run", "{run}", "--run-format", "tsv"], "--run-format"),
    ],
)
def test_usage_errors(cli: Cli, gold: Path, run: Path, args: list[str], message: str) -> None:
    argv = [a.format(gold=gold, run=run) for a in args]
    code, out, err = cli("evaluate", *argv)
    assert code == ExitCode.USAGE == 2
    assert out == ""
    assert message in err


def test_console_script_returns_the_exit_code(tmp_path: Path, run: Path) -> None:
    gold = tmp_path / "gold.jsonl"
    gold.write_text('{"query_id": "q1", "query": "x", "relevant": {"d1": -1}}\n')
    command = [sys.executable, "-m", "llm_eval.cli", "evaluate", "--gold", str(gold)]
    bad = subprocess.run([*command, "--run", str(run)], capture_output=True, text=True, check=False)
    assert bad.returncode == 3
    assert bad.stdout == ""
    assert bad.stderr == (
        f"llm-eval: error: {gold}:1: relevant.d1: "
        "grade must be a whole number from 0 to 100, got -1\n"
    )
    usage = subprocess.run(command, capture_output=True, text=True, check=False)
    assert usage.returncode == 2

    write_jsonl(gold, GOLD)
    good = subprocess.run(
        [*command, "--run", str(run), "--format", "json"],
        capture_output=True,
        text=True,
        check=False,
    )
    assert (good.returncode, good.stderr) == (0, "")
    assert json.loads(good.stdout)["metrics"]["mrr"] == 0.5


@pytest.mark.parametrize("metric", ["latency_p95", "stale_rate@5", "context_recall"])
def test_metrics_that_need_the_config_point_to_the_gate(
    cli: Cli, gold: Path, run: Path, metric: str
) -> None:
    code, _, err = cli("evaluate", "--gold", gold, "--run", run, "-m", metric)
    assert code == 3
    assert err == (
        "llm-eval: error: evaluate computes relevance, ranking and rejection metrics; "
        f"{metric} is computed by `llm-eval gate`, which reads the config\n"
    )


# Ranking and rejection metrics need only the run and the gold set: evaluate computes
# them, and gives what the gate gives on the same files.
GATE_GOLD = [
    {"query_id": "r1", "query": "a?", "relevant": {"d1": 2, "d2": 1}},
    {"query_id": "r2", "query": "b?", "relevant": {"d3": 1}},
    {"query_id": "n1", "query": "c?", "is_rejection": True},
    {"query_id": "n2", "query": "d?", "is_rejection": True},
    {"query_id": "n3", "query": "e?", "is_rejection": True},
    {"query_id": "n4", "query": "f?", "is_rejection": True},
]


def _scored(*pairs: tuple[str, float]) -> list[dict[str, object]]:
    return [{"doc_id": doc, "score": score} for doc, score in pairs]


GATE_RUN = [
    # rank correlation: grades (0, 1, 2) against positions 1..3 → rho = -1
    {"query_id": "r1", "results": _scored(("d9", 3.0), ("d2", 2.0), ("d1", 1.0))},
    # grades (1, 0, 0) → rho = +sqrt(3)/2 (ties share ranks)
    {"query_id": "r2", "results": _scored(("d3", 4.0), ("d8", 2.0), ("d7", 2.0))},
    {"query_id": "n1", "results": [], "abstain": True},  # rejected: abstained
    {"query_id": "n2", "results": _scored(("d1", 0.2))},  # rejected at threshold 0.5
    {"query_id": "n3", "results": _scored(("d1", 0.9))},  # confident
    # n4 is missing from the run: not rejected
]


def gate_project(root: Path, threshold: str) -> Path:
    (root / "config").mkdir(parents=True)
    config = "gold:\n  - {path: gold.jsonl, tier: A}\nretriever: {kind: run, path: run.jsonl}\n"
    (root / "config" / "llm-eval.yaml").write_text(config + threshold, encoding="utf-8")
    gates = "".join(
        f"  - {{name: g{i}, metric: {m}, threshold: 0, severity: warning}}\n"
        for i, m in enumerate(["rejection_accuracy", "score_discrimination@3",
                               "rank_correlation@3", "false_confidence_rate"])
    )  # fmt: skip
    (root / "config" / "ship-criteria.yaml").write_text(f"gates:\n{gates}", encoding="utf-8")
    write_jsonl(root / "gold.jsonl", GATE_GOLD)
    write_jsonl(root / "run.jsonl", GATE_RUN)
    return root


def cv(scores: list[float]) -> float:
    mean = sum(scores) / len(scores)
    return (sum((s - mean) ** 2 for s in scores) / len(scores)) ** 0.5 / mean


@pytest.mark.parametrize(
    ("config_line", "option", "accuracy"),
    [
        ("", [], 1 / 4),
        ("rejection_score_threshold: 0.5\n", ["--rejection-score-threshold", "0.5"], 2 / 4),
    ],
)
def test_evaluate_computes_ranking_and_rejection_metrics_as_the_gate_does(
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    cli: Cli,
    config_line: str,
    option: list[str],
    accuracy: float,
) -> None:
    project = gate_project(tmp_path, config_line)
    monkeypatch.chdir(project)
    assert cli("gate")[0] == 0
    report = json.loads((project / ".llm-eval" / "report.json").read_text(encoding="utf-8"))
    gated = {g["metric"]: g["value"] for g in report["gates"]}
    metrics = ["-m", "rejection_accuracy", "-m", "score_discrimination@3",
               "-m", "rank_correlation@3", "-m", "false_confidence_rate", "-m", "mrr"]  # fmt: skip
    got = evaluate_json(cli, "--gold", "gold.jsonl", "--run", "run.jsonl", *metrics, *option)
    expected = {
        "rejection_accuracy": accuracy,
        "false_confidence_rate": 1 - accuracy,
        "score_discrimination@3": (cv([3.0, 2.0, 1.0]) + cv([4.0, 2.0, 2.0])) / 2,
        "rank_correlation@3": (-1 + 3**0.5 / 2) / 2,
    }
    assert got["metrics"] == pytest.approx({**expected, "mrr": (1 / 2 + 1) / 2}, abs=1e-12)
    assert gated == pytest.approx(expected, abs=1e-12)


def test_evaluate_per_query_rows_hold_the_metrics_each_query_has(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, cli: Cli
) -> None:
    monkeypatch.chdir(gate_project(tmp_path, ""))
    monkeypatch.setenv("COLUMNS", "80")
    args = ["evaluate", "--gold", "gold.jsonl", "--run", "run.jsonl", "--per-query"]
    code, out, _ = cli(*args, "-m", "rejection_accuracy", "-m", "rank_correlation@3")
    assert code == 0
    assert out == (
        "query  rejection_accuracy  rank_correlation@3\n"
        "-----  ------------------  ------------------\n"
        "all                0.2500             -0.0670\n"
        "r1                    n/a             -1.0000\n"
        "r2                    n/a              0.8660\n"
        "n1                 1.0000                 n/a\n"
        "n2                 0.0000                 n/a\n"
        "n3                 0.0000                 n/a\n"
        "n4                 0.0000                 n/a\n"
        "\n"
        "2 queries evaluated; 4 without a relevant document, left out\n"
        "\n"
        "A rejection query counts as rejected when the run abstained or returned nothing.\n"
    )


def test_rejection_metrics_need_a_gold_set(tmp_path: Path, cli: Cli) -> None:
    qrels = tmp_path / "qrels.txt"
    qrels.write_text(TREC_QRELS, encoding="utf-8")
    run = tmp_path / "run.trec"
    run.write_text(TREC_RUN, encoding="utf-8")
    base = ["evaluate", "--qrels", str(qrels), "--run", str(run), "--format", "json"]
    code, _, err = cli(*base, "-m", "rejection_accuracy")
    assert code == 3
    assert err == (
        "llm-eval: error: rejection_accuracy needs a gold set (--gold): qrels do not mark "
        "rejection queries\n"
    )
    code, printed, _ = cli(*base, "-m", "score_discrimination@2")
    assert code == 0
    # q1 is ranked d9 (3.0), then d2 and d1 tied at 1.0; q2 d3 (0.9), d8 (0.5).
    expected = (cv([3.0, 1.0]) + cv([0.9, 0.5])) / 2
    out = json.loads(printed)
    assert out["metrics"]["score_discrimination@2"] == pytest.approx(expected, abs=1e-12)
