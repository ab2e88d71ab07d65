"""`llm-eval experiment`: the demo sweep end to end, its paired statistics against
`compare` and the gate for the same pair, Holm across variants, the Pareto front,
the picture, and config errors."""

from __future__ import annotations

import csv
import json
import subprocess
import sys
from pathlib import Path

import pytest

from llm_eval.cli import main
from llm_eval.experiment import pareto_front
from llm_eval.stats import holm

REPO = Path(__file__).resolve().parents[1]
DEMO = REPO / "config" / "examples" / "experiment.yaml"
BASE = (REPO / "config" / "llm-eval.yaml").read_text()


@pytest.fixture(scope="module")
def demo(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, str]:
    out = tmp_path_factory.mktemp("experiment")
    result = subprocess.run(
        [sys.executable, "-m", "llm_eval.cli", "experiment", str(DEMO), "--out", str(out)],
        cwd=REPO,
        capture_output=True,
        text=True,
        check=False,
    )
    assert result.returncode == 0, result.stderr
    return out, result.stdout


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
    # Mistuned BM25 loses recall@5; a better run is named only when the test says so.
    mistuned = document["variants"][2]["versus_reference"]["recall@5"]
    assert mistuned["delta"] < -0.03
    assert mistuned["better"] in ("reference", "no significant difference")
    assert any(v["pareto_front"] for v in document["variants"])
    markdown = (out / "experiment.md").read_text()
    assert "![recall@5 against p95 latency](experiment-pareto.png)" in markdown
    assert document["recommendation"] in markdown
    assert any(f"`{v['name']}`" in document["recommendation"] for v in document["variants"])
    assert (out / "experiment-pareto.png").read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    assert b"<svg" in (out / "experiment-pareto.svg").read_bytes()
    rows = list(csv.DictReader((out / "experiment.csv").open()))
    assert [r["variant"] for r in rows] == names
    assert float(rows[2]["recall@5_delta"]) == pytest.approx(mistuned["delta"])
    assert all(len(line) <= 80 for line in stdout.splitlines() if not line.startswith("  /"))
    assert "fusion lift: `fusion rrf`" in stdout
    # The lift of fusion rrf over the reference is that variant's own paired test.
    lift = document["lifts"][0]
    pair = document["variants"][5]["versus_reference"]["mrr"]
    assert (lift["delta"], lift["ci_low"], lift["ci_high"], lift["p_value"]) == (
        pair["delta"],
        pair["ci_low"],
        pair["ci_high"],
        pair["p_value"],
    )


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
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.chdir(REPO)
    out = tmp_path / "out"
    a = _write(tmp_path / "lucene.yaml", BASE.replace("output: .llm-eval", f"output: {out}"))
    b = _write(
        tmp_path / "mistuned.yaml",
        BASE.replace("output: .llm-eval", f"output: {out}")
        .replace("k1: 0.9", "k1: 3.0")
        .replace("b: 0.4", "b: 1.0"),
    )
    assert main(["experiment", str(a), str(b), "--out", str(tmp_path / "exp")]) == 0
    pair = json.loads((tmp_path / "exp" / "experiment.json").read_text())["variants"][1]
    assert pair["name"] == "mistuned"
    for name, path in (("a", a), ("b", b)):
        assert (
            main(["retrieve", "--config", str(path), "--out", str(tmp_path / f"{name}.jsonl")]) == 0
        )
    args = ["compare", str(tmp_path / "a.jsonl"), str(tmp_path / "b.jsonl")]
    assert main([*args, "--config", str(a), "--out", str(tmp_path / "cmp")]) == 0
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
    assert main(["baseline", "refresh", "--config", str(a), *common, "--force"]) == 0
    capsys.readouterr()
    assert main(["gate", "--config", str(b), *common, "--format", "json"]) == 1
    gate = json.loads(capsys.readouterr().out)["gates"][0]["stats"]
    tier_a = next(s for s in pair["slices"] if s["slice"] == "tier A" and s["metric"] == "recall@5")
    assert gate["ci_low"] == pytest.approx(tier_a["ci_low"], abs=1e-12)
    assert gate["ci_high"] == pytest.approx(tier_a["ci_high"], abs=1e-12)


def test_pareto_front() -> None:
    points = {
        "fast": (0.40, 1.0),
        "good": (0.50, 5.0),
        "beaten": (0.45, 6.0),  # good is better and faster
        "tie": (0.50, 5.0),  # equal to good: neither dominates the other
        "middle": (0.45, 2.0),
        "unknown": (0.60, None),
    }
    assert pareto_front(points) == {
        "fast": True,
        "good": True,
        "beaten": False,
        "tie": True,
        "middle": True,
        "unknown": None,
    }
    # For a metric where lower is better, the lowest value is best.
    assert pareto_front({"a": (0.1, 2.0), "b": (0.2, 2.0)}, lower_is_better=True) == {
        "a": True,
        "b": False,
    }


def test_without_matplotlib_the_table_says_how_to_get_the_picture(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.chdir(REPO)
    monkeypatch.setitem(sys.modules, "matplotlib", None)  # import fails
    assert main(["experiment", str(DEMO), "--out", str(tmp_path)]) == 0
    assert "pip install 'llm-eval[plots]'" in capsys.readouterr().out
    assert "pip install 'llm-eval[plots]'" in (tmp_path / "experiment.md").read_text()
    assert not (tmp_path / "experiment-pareto.png").exists()
    front = [
        v["pareto_front"]
        for v in json.loads((tmp_path / "experiment.json").read_text())["variants"]
    ]
    assert True in front  # the table still marks the front


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
        ("", "an experiment compares two or more variants"),
        (
            "variants:\n  - name: x\n  - name: y\n    top_k: 3\n",
            "variant 'y' retrieves top_k 3, fewer than recall@5 needs",
        ),
        (
            "variants:\n  - name: x\n  - name: y\n    retriever: {kind: mcp}\n",
            ":20: variants[1].retriever: give either `command`",
        ),
    ],
)
def test_config_errors_name_file_line_and_key(
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
    variants: str,
    message: str,
) -> None:
    monkeypatch.chdir(REPO)
    config = _write(tmp_path / "c.yaml", BASE + variants)
    assert main(["experiment", str(config), "--out", str(tmp_path / "o")]) == 3
    err = capsys.readouterr().err
    assert message in err
    assert len(err.strip().splitlines()) == 1
