"""`llm-eval gate` end to end on a copy of the bundled demo: real BM25, real files."""

from __future__ import annotations

import contextlib
import io
import json
import re
import shutil
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import pytest
from conftest import Cli, script

from llm_eval.baseline_io import load_baseline
from llm_eval.cli import main
from llm_eval.formats import get_format

REPO = Path(__file__).resolve().parents[1]


def gate(
    cli: Cli, project: Path, monkeypatch: pytest.MonkeyPatch, *args: str
) -> tuple[int, str, str]:
    """`llm-eval gate ARGS` in `project`: (exit code, stdout, stderr)."""
    monkeypatch.chdir(project)
    return cli("gate", *args)


@dataclass(frozen=True)
class Gated:
    """One `llm-eval gate` on the shared demo: what it printed and wrote."""

    code: int
    out: str
    written: dict[str, str]
    """File name → text of each file it wrote to `.llm-eval/`."""


@pytest.fixture(scope="module")
def gated(shared_demo: Path) -> Callable[..., Gated]:
    """`llm-eval gate ARGS` on the shared demo, run once per ARGS for the module (the
    tests that read the same run share it), on an 80-column terminal, as the README and the
    demo tutorial show it."""
    runs: dict[tuple[str, ...], Gated] = {}

    def run(*args: str) -> Gated:
        if args not in runs:
            with (
                pytest.MonkeyPatch.context() as patch,
                contextlib.redirect_stdout(io.StringIO()) as out,
            ):
                patch.chdir(shared_demo)
                patch.setenv("COLUMNS", "80")
                code = main(["gate", *args])
            folder = shared_demo / ".llm-eval"
            written = {path.name: path.read_text() for path in folder.iterdir() if path.is_file()}
            runs[args] = Gated(code, out.getvalue(), written)
        return runs[args]

    return run


@pytest.fixture(scope="module")
def demo_run(shared_demo: Path) -> Path:
    """`a.jsonl`: the demo retriever's run over the gold set, retrieved once for the module."""
    with pytest.MonkeyPatch.context() as patch, contextlib.redirect_stdout(io.StringIO()):
        patch.chdir(shared_demo)
        assert main(["retrieve", "--out", "a.jsonl"]) == 0
    return shared_demo / "a.jsonl"


def test_the_demo_passes(gated: Callable[..., Gated]) -> None:
    run = gated()
    assert run.code == 0
    assert run.out.startswith("llm-eval gate: PASS")
    report = json.loads(run.written["report.json"])
    assert (report["verdict"], report["exit_code"]) == ("pass", 0)
    assert report["provenance"]["fingerprints_match"] == {
        "gold": True,
        "corpus": True,
        "retriever": True,
        "criteria": True,
        "scoring": True,
        "versions": True,
    }
    assert run.written["report.md"].startswith("## ✅ Retrieval quality")


def test_the_degraded_config_fails_with_a_plain_sentence(gated: Callable[..., Gated]) -> None:
    run = gated("--config", "config/examples/degraded.yaml")
    assert run.code == 1
    assert "llm-eval gate: FAIL" in run.out
    assert "✗ recall@5 (tier A) is 33.1%, below the floor 38.0%" in run.out
    assert "more than the 0.050 allowed (warning)" in run.out  # MRR, beyond its limit


def test_the_terminal_names_the_first_queries_that_lost_and_gained_their_hit(
    gated: Callable[..., Gated],
) -> None:
    run = gated("--config", "config/examples/degraded.yaml")
    changes = json.loads(run.written["report.json"])["changes"]
    lines = run.out.splitlines()
    start = lines.index(
        f"At the top 5: {changes['hit_to_miss_count']} queries lost their relevant result, "
        f"{changes['miss_to_hit_count']} gained one."
    )
    shown = {}
    for line in lines[start + 1 : start + 3]:
        label, named = line.strip().split(": ")
        ids, more = named.split(" and ")
        shown[label] = (ids.split(", "), int(more.removesuffix(" more")))
    assert shown == {
        "lost": (
            [c["query_id"] for c in changes["hit_to_miss"][:5]],
            changes["hit_to_miss_count"] - 5,
        ),
        "gained": (
            [c["query_id"] for c in changes["miss_to_hit"][:5]],
            changes["miss_to_hit_count"] - 5,
        ),
    }
    assert lines[start + 3] == "  See report.md for their questions and ranks before and after."
    assert lines[-1] == "Report: .llm-eval/report.md (report.json beside it)"
    assert all(len(line) <= 80 for line in lines)


def test_a_changed_gold_set_writes_a_report_that_explains_itself(
    shared_demo: Path, monkeypatch: pytest.MonkeyPatch, cli: Cli
) -> None:
    gold = shared_demo / "gold" / "python-docs-A.jsonl"
    original = gold.read_text()
    lines = original.splitlines()
    first = json.loads(lines[0])
    first["relevant"] = {"builtins.sorted#0": 1}
    added = {**json.loads(lines[1]), "query_id": "a-new", "query": "A new question?"}
    try:
        gold.write_text("\n".join([json.dumps(first), *lines[1:], json.dumps(added)]) + "\n")
        monkeypatch.setenv("COLUMNS", "80")
        code, out, err = gate(cli, shared_demo, monkeypatch)
        assert code == 3
        assert err == ""
        assert out.startswith(
            "llm-eval gate: GOLD SET CHANGED: not compared with the baseline (see below)\n\n"
        )
        said = out.split("\n\n")[1].splitlines()
        assert said == [  # each query named once, on its own line, with where it is
            "The gold set differs from the baseline's (1 query added, 1 query changed), so",
            "  the gate cannot compare honestly: accept the change with llm-eval baseline",
            "  refresh (a new baseline), or compare on the unchanged queries with llm-eval",
            "  gate --allow-gold-change.",
            f"  added: a-new (gold/python-docs-A.jsonl:{len(lines) + 1})",
            "  changed: a-001 (gold/python-docs-A.jsonl:1)",
        ]
        report = json.loads((shared_demo / ".llm-eval" / "report.json").read_text())
        assert (report["verdict"], report["exit_code"]) == ("gold_changed", 3)
        assert report["gold_changes"] == {
            "added": ["a-new"],
            "removed": [],
            "changed": ["a-001"],
            "compared_on": 341,  # 343 queries, less the added and the changed one
            "accepted": False,
            "locations": {
                "a-new": {"file": "gold/python-docs-A.jsonl", "line": len(lines) + 1},
                "a-001": {"file": "gold/python-docs-A.jsonl", "line": 1},
            },
            "accept_commands": ["llm-eval baseline refresh", "llm-eval gate --allow-gold-change"],
        }
        markdown = (shared_demo / ".llm-eval" / "report.md").read_text()
        assert "- Added (1): `a-new` (gold/python-docs-A.jsonl:" in markdown
        assert "  - `llm-eval baseline refresh`\n" in markdown
        assert gate(cli, shared_demo, monkeypatch, "--allow-gold-change")[0] == 0
        report = json.loads((shared_demo / ".llm-eval" / "report.json").read_text())
        assert report["gold_changes"]["accepted"] is True
        assert report["verdict"] != "gold_changed"
        assert report["queries"]["compared"] == report["queries"]["evaluated"] - 2
    finally:
        gold.write_text(original)


def test_a_corrupt_baseline_exits_3(
    shared_demo: Path, monkeypatch: pytest.MonkeyPatch, cli: Cli
) -> None:
    corrupt = shared_demo / "corrupt.json"
    corrupt.write_text('{"schema_version": 1, "per_query": ')
    code, _, err = gate(cli, shared_demo, monkeypatch, "--baseline", "corrupt.json")
    assert code == 3
    assert err.startswith("llm-eval: error: corrupt.json:1: corrupt baseline: invalid JSON")


def test_without_a_baseline_only_floors_are_checked(
    shared_demo: Path, monkeypatch: pytest.MonkeyPatch, cli: Cli
) -> None:
    assert gate(cli, shared_demo, monkeypatch, "--baseline", "none.json")[0] == 0
    report = json.loads((shared_demo / ".llm-eval" / "report.json").read_text())
    assert report["notes"] == [
        "No baseline at none.json: only the absolute floors were checked; "
        "run `llm-eval baseline refresh` to create one."
    ]


def test_baseline_refresh_round_trip_and_refusal(
    shared_demo: Path, monkeypatch: pytest.MonkeyPatch, cli: Cli
) -> None:
    monkeypatch.chdir(shared_demo)
    assert cli("baseline", "refresh", "--baseline", "fresh.json")[0] == 0
    fresh = load_baseline(shared_demo / "fresh.json")
    committed = load_baseline(shared_demo / "gold" / "baseline.json")
    assert fresh is not None and committed is not None
    # The committed baseline is what refresh computes (judged@5 beside the gates
    # included), and refreshing it moves nothing.
    assert fresh.per_query == committed.per_query
    assert "judged@5" in committed.per_query["a-001"]
    code, out, _ = cli("baseline", "refresh", "--baseline", "gold/baseline.json")
    assert code == 0
    assert "Nothing moved" in out
    # The degraded retriever is below the recall floor: refused unless forced.
    args = ["baseline", "refresh", "--config", "config/examples/degraded.yaml"]
    code, out, _ = cli(*args, "--baseline", "degraded.json")
    assert code == 1
    assert not (shared_demo / "degraded.json").exists()
    assert "Not writing degraded.json" in out
    assert cli(*args, "--baseline", "degraded.json", "--force")[0] == 0
    assert (shared_demo / "degraded.json").exists()
    code, out, _ = cli("baseline", "show", "--baseline", "degraded.json")
    assert code == 0
    assert "Baseline degraded.json" in out


def test_check_quality_gates_script_has_the_same_exit_code(
    shared_demo: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    import runpy
    import sys

    monkeypatch.chdir(shared_demo)
    monkeypatch.setattr(
        sys, "argv", ["check_quality_gates.py", "--config", "config/examples/degraded.yaml"]
    )
    with pytest.raises(SystemExit) as exited:
        runpy.run_path(str(REPO / "scripts" / "check_quality_gates.py"), run_name="__main__")
    assert exited.value.code == 1


def test_retrieve_then_compare_two_runs(
    shared_demo: Path,
    demo_run: Path,
    monkeypatch: pytest.MonkeyPatch,
    cli: Cli,
) -> None:
    monkeypatch.chdir(shared_demo)
    assert cli("retrieve", "--config", "config/examples/degraded.yaml", "--out", "b.jsonl")[0] == 0
    code, out, _ = cli("compare", "a.jsonl", "b.jsonl", "-m", "recall@5", "--out", "cmp")
    assert code == 0
    assert out.startswith("compare: A is better on recall@5 (−9.0 pp)\nA = a.jsonl\n")
    lines = out.splitlines()
    overall = lines[lines.index("overall (327 queries)") + 3]
    assert overall.startswith("recall@5 ")
    assert overall.split()[-1] == "A"  # the mistuned retriever loses, significantly
    assert max(map(len, lines)) <= 80
    rows = (shared_demo / "cmp" / "compare.csv").read_text().splitlines()
    assert rows[0] == "slice,metric,n,mean_a,mean_b,delta,ci_low,ci_high,p_value,winner"
    slice_name, metric, _, mean_a, mean_b, change, low, high, p, winner = rows[1].split(",")
    assert (slice_name, metric, winner) == ("overall", "recall@5", "A")
    assert float(low) <= float(change) <= float(high) < 0
    assert float(mean_b) - float(mean_a) == pytest.approx(float(change))
    assert float(p) < 0.05
    assert (shared_demo / "cmp" / "compare.md").read_text().startswith("## A/B comparison")
    # The same run against itself: no difference anywhere.
    assert cli("compare", "a.jsonl", "a.jsonl", "-m", "mrr", "--out", "same")[0] == 0
    same = (shared_demo / "same" / "compare.csv").read_text().splitlines()[1:]
    assert all(line.endswith(",no significant difference") for line in same)


def test_gold_validate_and_stats(
    shared_demo: Path, monkeypatch: pytest.MonkeyPatch, cli: Cli
) -> None:
    monkeypatch.chdir(shared_demo)
    code, out, _ = cli("gold", "validate")
    assert code == 0
    # The figures are the power model's (tests/test_power.py checks them on every surface).
    assert re.search(
        r"^warning: retrieval_recall_at_5: recall@5 \(tier A\): with 176 queries, a drop of "
        r"[\d.]+ pp is caught 4 times in 5; about (\d+) queries catch one of 6\.0 pp \(twice "
        r"the 3\.0 pp limit\), assuming no other query's score changes$",
        out,
        re.MULTILINE,
    )
    assert re.search(
        r"^warning: retrieval_mrr per tag: 11 judged tag slices cannot reliably catch a drop "
        r"of twice the limit \(0\.100; each needs \d+ to \d+ more queries; see `llm-eval "
        r"gold stats`\)$",
        out,
        re.MULTILINE,
    )
    assert out.rstrip().endswith("warnings)")
    code, stats, _ = cli("gold", "stats")
    assert code == 0
    assert "The drop each gate catches 4 times in 5 on each scope it checks" in stats
    # One row per scope a gate checks: recall@5's gate reads tier A only, MRR's all
    # queries and, per tag, each tag; no row for tier B, which no gate reads alone.
    # Each gate has its own table, under its name and limit.
    blocks = stats.split("\n\n")
    tables = {
        block.splitlines()[0]: [
            re.split(r"\s{2,}", line.strip())
            for line in block.splitlines()[3:]
            if line.startswith(("tier ", "tag ", "all queries"))
        ]
        for block in blocks
        if block.startswith("retrieval_")
    }
    assert list(tables) == [
        "retrieval_recall_at_5 (regression limit 3.0 pp)",
        "retrieval_mrr (regression limit 0.050)",
    ]
    recall, mrr = tables.values()
    ((scope, n, drop, needed),) = recall
    assert (scope, n) == ("tier A", "176")
    assert f"a drop of {drop} is caught" in stats
    assert re.fullmatch(r"\d+ \(\d+ more\)", needed)
    assert mrr[0][:2] == ["all queries", "327"]
    assert all(row[0].startswith("tag ") for row in mrr[1:])
    assert len(mrr) == 1 + 15  # the 15 tags MRR scores (out-of-scope holds no answerable)
    assert max(map(len, stats.splitlines())) <= 80


@contextlib.contextmanager
def mislabelled(project: Path) -> Iterator[None]:
    """The first query of tier B's gold file labelled with two ids the corpus lacks, the
    second with one: three labels that can never be retrieved, put back afterwards."""
    gold = project / "gold" / "python-docs-B.jsonl"
    original = gold.read_text()
    lines = original.splitlines()
    first, second = json.loads(lines[0]), json.loads(lines[1])
    first["relevant"] = {"no-such-passage#0": 2, "no-such-passage#1": 1}
    second["relevant"] = {"dotenv.multiline-value#0": 1}
    try:
        gold.write_text("\n".join([json.dumps(first), json.dumps(second), *lines[2:]]) + "\n")
        yield
    finally:
        gold.write_text(original)


@pytest.mark.parametrize(
    "command",
    [("gold", "validate"), ("gate", "--allow-gold-change"), ("baseline", "refresh")],
)
def test_a_label_missing_from_the_corpus_stops_every_command_that_knows_the_corpus(
    shared_demo: Path, monkeypatch: pytest.MonkeyPatch, cli: Cli, command: tuple[str, ...]
) -> None:
    monkeypatch.chdir(shared_demo)
    baseline = (shared_demo / "gold" / "baseline.json").read_bytes()
    with mislabelled(shared_demo):
        code, _, err = cli(*command)
    assert code == 3
    assert err == (
        "llm-eval: error: gold/python-docs-B.jsonl:1: relevant.no-such-passage#0: "
        "document 'no-such-passage#0' is not in the corpus gold/corpus.jsonl, nor are 2 "
        "other labels (when the retriever's ids are not the corpus's, say so with "
        "`labels_in_corpus: off` in config/llm-eval.yaml)\n"
    )
    assert (shared_demo / "gold" / "baseline.json").read_bytes() == baseline


def test_labels_in_corpus_off_lets_a_retriever_with_its_own_ids_through(
    shared_demo: Path, monkeypatch: pytest.MonkeyPatch, cli: Cli
) -> None:
    monkeypatch.chdir(shared_demo)
    config = shared_demo / "config" / "llm-eval.yaml"
    original = config.read_text()
    try:
        config.write_text(original + "labels_in_corpus: off\n")
        with mislabelled(shared_demo):
            validated = cli("gold", "validate")
            gated = cli("gate", "--allow-gold-change")
    finally:
        config.write_text(original)
    assert validated[0] == 0, validated[2]
    assert gated[0] == 0, gated[1] + gated[2]


def test_compare_refuses_aggregate_metrics_and_pairs_rejection_queries(
    shared_demo: Path,
    demo_run: Path,
    monkeypatch: pytest.MonkeyPatch,
    cli: Cli,
) -> None:
    monkeypatch.chdir(shared_demo)
    code, _, err = cli("compare", "a.jsonl", "a.jsonl", "-m", "latency_p95")
    assert code == 3
    assert err == (
        "llm-eval: error: compare pairs per-query values, and latency_p95 is an aggregate "
        "over queries; gate it with `llm-eval gate` instead\n"
    )
    code, _, err = cli("compare", "a.jsonl", "a.jsonl", "-m", "score_discrimination@10")
    assert code == 3
    assert err == (
        "llm-eval: error: compare pairs per-query values, and score_discrimination@10 is "
        "unbounded, so no paired test valid at every size exists for it; gate it with "
        "`llm-eval gate` instead\n"
    )
    args = ["compare", "a.jsonl", "a.jsonl", "-m", "rejection_accuracy", "--out", "rej"]
    assert cli(*args)[0] == 0
    rows = (shared_demo / "rej" / "compare.csv").read_text().splitlines()
    overall = rows[1].split(",")
    assert overall[:3] == ["overall", "rejection_accuracy", "15"]  # the 15 rejection queries


EXAMPLES = script("render_examples")
SHOWN = [(page, command) for page, commands in EXAMPLES.EXAMPLES.items() for command in commands]
STALE = "stale: run python scripts/render_examples.py"


@pytest.mark.parametrize(
    ("page", "command"),
    [(p, c) for p, c in SHOWN if c.startswith("llm-eval gate") and c != EXAMPLES.JUDGED_GATE],
)
def test_the_readme_and_the_tutorial_show_the_real_demo_output(
    gated: Callable[..., Gated], command: str, page: str
) -> None:
    text = (REPO / page).read_text()
    start, end, _ = EXAMPLES.block_span(text, command)
    run = gated(*command.removeprefix("llm-eval gate").split(";")[0].split())
    expected = run.out
    if "echo" in command:
        expected += f"exit {run.code}\n"
    assert text[start:end] == expected, STALE


def test_the_docs_show_the_real_output_of_the_other_demo_commands() -> None:
    """The examples of commands other than the gate, run as the script runs them (the
    judged demo's is checked by tests/judge/test_judge.py)."""
    shown = [(p, c) for p, c in SHOWN if not c.startswith("llm-eval gate")]
    assert shown
    outputs = EXAMPLES.demo_outputs(dict.fromkeys(c for _, c in shown))
    for page, command in shown:
        text = (REPO / page).read_text()
        start, end, indent = EXAMPLES.block_span(text, command)
        assert outputs[command].strip(), command
        assert text[start:end] == EXAMPLES.indented(outputs[command], indent), (page, STALE)


def test_the_examples_script_writes_what_the_test_checks() -> None:
    """The script puts each output in its block, indented as the block, and nothing else
    changes."""
    page = "before\n```console\n$ llm-eval gate\nold\n```\n  ```console\n  $ x\n  ```\nend\n"
    outputs = {"llm-eval gate": "new\n\nlines\n", "x": "a\nb\n"}
    new = EXAMPLES.rendered(page, outputs, ("llm-eval gate", "x"))
    assert new == (
        "before\n```console\n$ llm-eval gate\nnew\n\nlines\n```\n"
        "  ```console\n  $ x\n  a\n  b\n  ```\nend\n"
    )


def test_format_json_writes_the_report_to_stdout(
    shared_demo: Path, monkeypatch: pytest.MonkeyPatch, cli: Cli
) -> None:
    code, out, _ = gate(cli, shared_demo, monkeypatch, "--format", "json")
    assert code == 0
    written = (shared_demo / ".llm-eval" / "report.json").read_text(encoding="utf-8")
    assert json.loads(out) == json.loads(written)


def test_a_renderer_that_raises_leaves_the_previous_reports_as_they_were(
    shared_demo: Path,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    cli: Cli,
) -> None:
    out = tmp_path / "reports"
    assert gate(cli, shared_demo, monkeypatch, "--out", str(out))[0] == 0
    before = reports(out)
    assert set(before) == {".gitignore", "report.json", "report.md", "report.junit.xml"}

    def broken(self: object, report: object, options: object) -> str:
        raise RuntimeError("the renderer broke")

    # markdown renders after json: written one by one, report.json would be new
    monkeypatch.setattr(type(get_format("markdown")), "render", broken)
    code, _, err = gate(cli, shared_demo, monkeypatch, "--out", str(out))
    assert code == 5
    assert "the renderer broke" in err
    assert reports(out) == before


def reports(out: Path) -> dict[str, bytes]:
    """The files the gate wrote in its output folder (its cache is a folder beside them)."""
    return {path.name: path.read_bytes() for path in out.iterdir() if path.is_file()}


def test_the_output_folder_ignores_itself(gated: Callable[..., Gated]) -> None:
    assert gated().written[".gitignore"] == "*\n"


def test_baseline_show_reads_the_baseline_the_config_names(
    shared_demo: Path, monkeypatch: pytest.MonkeyPatch, cli: Cli
) -> None:
    monkeypatch.chdir(shared_demo)
    config = (shared_demo / "config" / "llm-eval.yaml").read_text()
    other = config.replace("baseline: gold/baseline.json", "baseline: gold/other.json")
    (shared_demo / "config" / "other.yaml").write_text(other)
    shutil.copy(shared_demo / "gold" / "baseline.json", shared_demo / "gold" / "other.json")
    code, out, _ = cli("baseline", "show", "--config", "config/other.yaml")
    assert code == 0
    assert out.startswith("Baseline gold/other.json\n")


def test_gold_stats_counts_without_a_baseline(
    shared_demo: Path, monkeypatch: pytest.MonkeyPatch, cli: Cli
) -> None:
    monkeypatch.chdir(shared_demo)
    code, out, _ = cli("gold", "stats", "--baseline", "none.json")
    assert code == 0
    assert "tag troubleshooting" in out
    assert out.endswith(
        "No baseline at none.json: the smallest detectable drops are estimated from its\n"
        "per-query scores; run `llm-eval baseline refresh` to create one.\n"
    )


SMALL_GATE = """\
statistics: {min_n: 30ON_INCONCLUSIVE}
gates:
  - name: retrieval_recall_at_5
    regression_max: 0.03
    severity: error
    scope: {tags: [datetime]}
"""


@pytest.mark.parametrize(
    ("setting", "code", "headline"),
    [
        ("", 1, "llm-eval gate: FAIL: 1 blocking gate cannot tell; about {more:,} more queries "),
        (
            ", on_inconclusive: warn",
            0,
            "llm-eval gate: CANNOT TELL: 1 gate cannot tell (not blocking); about {more:,} more\n",
        ),
    ],
)
def test_a_drop_on_too_few_queries_is_never_a_quiet_pass(
    shared_demo: Path,
    monkeypatch: pytest.MonkeyPatch,
    cli: Cli,
    setting: str,
    code: int,
    headline: str,
) -> None:
    """22 datetime questions, the mistuned retriever: below min_n the gate cannot tell,
    and by default an error gate whose estimate is beyond the limit blocks."""
    criteria = shared_demo / "small-criteria.yaml"
    criteria.write_text(SMALL_GATE.replace("ON_INCONCLUSIVE", setting))
    args = ("--config", "config/examples/degraded.yaml", "--criteria", str(criteria))
    exit_code, out, _ = gate(cli, shared_demo, monkeypatch, *args)
    assert exit_code == code
    report = json.loads((shared_demo / ".llm-eval" / "report.json").read_text())
    (entry,) = report["gates"]
    assert out.startswith(headline.format(more=entry["more_queries"]))
    assert (entry["status"], entry["decision"], entry["blocking"]) == (
        "inconclusive",
        "inconclusive",
        code == 1,
    )
    assert entry["stats"]["n"] == 22
    assert "22 queries are fewer than the 30 needed to judge" in entry["sentence"]
    # the headline says what would settle it, with the power model's queries needed
    assert entry["more_queries"] == entry["power"]["queries_needed"] - 22 > 1_000
    assert "settle it (llm-eval gold plan)" in " ".join(out.split())


@pytest.mark.parametrize(
    ("damage", "message"),
    [
        (
            lambda b: b.update(metrics=[m for m in b["metrics"] if m != "mrr"]),
            "the baseline has no 'mrr' (it was made with other ship criteria); refresh the "
            "baseline",
        ),
        (
            lambda b: b["per_query"]["a-001"].pop("recall@5"),
            "per_query: no 'recall@5' score for 1 query in scope (a-001); refresh the baseline",
        ),
    ],
)
def test_a_baseline_that_cannot_pair_is_refused_naming_the_file(
    shared_demo: Path,
    monkeypatch: pytest.MonkeyPatch,
    cli: Cli,
    damage: object,
    message: str,
) -> None:
    data = json.loads((shared_demo / "gold" / "baseline.json").read_text())
    damage(data)  # type: ignore[operator]
    broken = shared_demo / "broken-baseline.json"
    broken.write_text(json.dumps(data))
    code, _, err = gate(cli, shared_demo, monkeypatch, "--baseline", str(broken))
    assert code == 3
    assert err.startswith(f"llm-eval: error: {broken}: ")
    assert message in err
    assert err.count("\n") == 1


def test_a_run_file_is_held_to_max_error_rate_and_must_share_queries(
    shared_demo: Path,
    gated: Callable[..., Gated],
    demo_run: Path,
    monkeypatch: pytest.MonkeyPatch,
    cli: Cli,
) -> None:
    assert gated().code == 0
    lines = demo_run.read_text().splitlines()
    first = json.loads(lines[0])
    failed = {"query_id": first["query_id"], "results": [], "error": "timeout"}
    (shared_demo / "failed.jsonl").write_text("\n".join([json.dumps(failed), *lines[1:]]) + "\n")
    code, _, err = gate(cli, shared_demo, monkeypatch, "--run", "failed.jsonl")
    assert code == 4
    assert err == (
        "llm-eval: error: failed.jsonl: retriever failed on 1 of 342 queries (0.3% > "
        "max_error_rate 0%): 1 timeout\n"
    )
    other = [{**json.loads(line), "query_id": f"x-{i}"} for i, line in enumerate(lines)]
    (shared_demo / "other.jsonl").write_text("".join(json.dumps(o) + "\n" for o in other))
    code, _, err = gate(cli, shared_demo, monkeypatch, "--run", "other.jsonl")
    assert code == 3
    assert err == (
        "llm-eval: error: other.jsonl: shares no query id with the gold set (342 queries in "
        "the run, 342 in the gold set): is it a run of another gold set?\n"
    )


def test_compare_holm_corrects_tag_rows_and_uses_the_gates_test() -> None:
    from llm_eval.experiment.pairs import _holm_on_tags, _row
    from llm_eval.stats import holm

    rng = np.random.default_rng(4)
    pairs, rows = [], []
    for name, drop in (("overall", 0.2), ("tag x", 0.3), ("tag y", 0.1), ("tag z", 0.0)):
        before = rng.random(120)
        after = np.clip(before - drop * (rng.random(120) < 0.6), 0.0, 1.0)
        pairs.append((before, after))
        rows.append(_row(name, "mrr", before, after, 0.05, 0))
    adjusted = _holm_on_tags(rows, pairs, 0.05, 0)
    assert adjusted[0] == rows[0]  # the overall row is one test, not adjusted
    assert [r.p_value for r in adjusted[1:]] == pytest.approx(holm([r.p_value for r in rows[1:]]))
    for row in adjusted[1:]:
        excludes_zero = row.ci_low > 0.0 or row.ci_high < 0.0
        assert (row.winner != "no significant difference") == excludes_zero
        assert row.confidence >= 0.95
    assert adjusted[1].winner == "A" and adjusted[3].winner == "no significant difference"


def test_one_slightly_worse_query_is_reported_and_commented_on(
    shared_demo: Path,
    demo_run: Path,
    monkeypatch: pytest.MonkeyPatch,
    cli: Cli,
    tmp_path: Path,
) -> None:
    """The run that made the old interval infinite: one query's relevant document moved
    from rank 5 to rank 10. The report is strict JSON, `comment` accepts it, and
    every surface states the same status for each gate."""
    from llm_eval.report_schema import validate_report

    monkeypatch.chdir(shared_demo)
    gold = {
        json.loads(line)["query_id"]: json.loads(line)
        for line in (shared_demo / "gold" / "python-docs-A.jsonl").read_text().splitlines()
    }
    lines = []
    moved = False
    for line in demo_run.read_text().splitlines():
        record = json.loads(line)
        relevant = gold.get(record["query_id"], {}).get("relevant") or {}
        ids = [r["doc_id"] for r in record["results"]]
        if not moved and len(ids) >= 10 and ids[4] in relevant:
            results = record["results"]
            results.insert(9, results.pop(4))  # rank 5 -> rank 10
            moved = True
        lines.append(json.dumps(record))
    assert moved
    (tmp_path / "moved.jsonl").write_text("\n".join(lines) + "\n")
    code, out, _ = gate(
        cli, shared_demo, monkeypatch, "--run", str(tmp_path / "moved.jsonl"), "--out", "moved"
    )
    text = (shared_demo / "moved" / "report.json").read_text()
    report = json.loads(text, parse_constant=lambda name: pytest.fail(f"{name} in report"))
    validate_report(report, "report.json")
    assert code == report["exit_code"] == (1 if report["verdict"] == "fail" else 0)
    assert report["gates"][0]["stats"]["changed"] == 1  # recall@5 of tier A
    for entry in report["gates"]:
        stats = entry["stats"]
        assert (entry["reason"] == "unchanged") == (stats["changed"] == 0) == stats["unchanged"]
        if stats["unchanged"]:  # no change to bound: no interval, no p-value
            assert stats["ci_low"] is stats["ci_high"] is stats["p_value"] is None
        else:
            assert -1.0 <= stats["ci_low"] <= stats["ci_high"] <= 1.0
        word = {"pass": "PASS", "warn": "WARNING", "fail": "FAIL", "inconclusive": "CANNOT TELL"}
        row = next(line for line in out.splitlines() if line.startswith(entry["name"]))
        assert row.endswith(word[entry["status"]])
    assert "inf" not in (shared_demo / "moved" / "report.md").read_text()
    monkeypatch.delenv("GITHUB_TOKEN", raising=False)
    assert cli("comment", "--report", "moved/report.json", "--dry-run")[0] == 0


def test_the_scale_benchmark_project_is_gated_with_its_changes(tmp_path: Path) -> None:
    """`scripts/bench_gate_scale.py` builds a project whose gate reads a run that differs
    from the baseline's on the share of queries asked, and measures a real gate."""
    bench = script("bench_gate_scale")
    bench.build_project(tmp_path, 300, 0.2)
    cost = bench.run_cost(bench.gate_command(tmp_path / "out"), tmp_path, REPO)
    assert cost.cpu > 0.0
    report = json.loads((tmp_path / "out" / "report.json").read_text(encoding="utf-8"))
    gates = {gate["name"]: gate for gate in report["gates"]}
    assert set(gates) == {"retrieval_recall_at_5", "retrieval_mrr"}
    mrr = gates["retrieval_mrr"]
    assert 0 < mrr["stats"]["changed"] < 0.4 * mrr["n"]  # at most a fifth redrawn
    assert mrr["stats"]["method"] == "betting"
    assert mrr["power"]["detectable_drop"] > 0.05  # the graded power simulation ran
