"""`llm-eval judge --shard I/N` and `judge --merge`: the judge asked about a run in
shards by real processes at once, into one call cache, against the stub judge on
127.0.0.1; the parts joined into another project's cache, whose gate then asks
nothing and reports the single process's judged values."""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
from conftest import Cli

from llm_eval.shards import shard_number

LLM_EVAL = [sys.executable, "-m", "llm_eval.cli"]

GOLD = [
    {
        "query_id": f"q{n}",
        "query": f"how to sort records by field {n}",
        "relevant": {f"d{n}": 1},
        **({"expected_answer": f"Use sorted with key field {n}."} if n % 5 else {}),
    }
    for n in range(15)
]
RUN = [
    {
        "query_id": f"q{n}",
        "results": [
            {"doc_id": f"d{n}", "text": f"sorted with key field {n} sorts records."},
            {"doc_id": f"x{n}", "text": f"sockets and ports {n}."},
        ],
    }
    for n in range(15)
]


def write_project(root: Path, url: str, model: str = "stub") -> Path:
    """A judged project reading its run from run.jsonl; returns its folder."""
    root.mkdir(parents=True, exist_ok=True)
    (root / "gold.jsonl").write_text("".join(json.dumps(q) + "\n" for q in GOLD))
    (root / "run.jsonl").write_text("".join(json.dumps(r) + "\n" for r in RUN))
    config = {
        "gold": ["gold.jsonl"],
        "retriever": {"kind": "run", "path": "run.jsonl"},
        "metrics": ["recall@2", "context_precision@2", "context_recall"],
        "top_k": 2,
        "output": "out",
        "judge": {"base_url": url, "model": model, "retries": 0},
    }
    (root / "llm-eval.yaml").write_text(json.dumps(config))
    gates = "gates:\n  - name: recall\n    metric: recall@2\n    threshold: 0.5\n"
    (root / "criteria.yaml").write_text(gates)
    return root


def llm_eval(command: str, *args: str) -> list[str]:
    """`llm-eval COMMAND ARGS` on the project in the working directory."""
    project = ["--config", "llm-eval.yaml", "--criteria", "criteria.yaml"]
    return [*LLM_EVAL, command, *project, *args]


def judged(root: Path) -> dict[str, Any]:
    """The judged values of report.json: overall, and each query's."""
    report = json.loads((root / "out" / "report.json").read_text())
    overall = next(s for s in report["slices"] if s["kind"] == "overall")
    return {
        "overall": {m: v["value"] for m, v in overall["metrics"].items()},
        "unscored": report["judge"]["unscored"],
        "calibration": report["judge"]["calibration"],
    }


@pytest.fixture(scope="module")
def sharded(tmp_path_factory: pytest.TempPathFactory, stub_endpoint: Any) -> dict[str, Any]:
    """Three shards judged at once into one call cache; then one process's gate."""
    base = tmp_path_factory.mktemp("judge")
    root = write_project(base / "shards", stub_endpoint.url)
    children = [
        subprocess.Popen(
            llm_eval(
                "judge",
                "--run",
                "run.jsonl",
                "--shard",
                f"{i}/3",
                "--out",
                f"parts/judged-{i}.jsonl",
            ),
            cwd=root,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )
        for i in (1, 2, 3)
    ]
    outs = []
    for child in children:
        out, err = child.communicate(timeout=120)
        assert child.returncode == 0, err
        outs.append(out)
    single = write_project(base / "single", stub_endpoint.url)
    before = len(stub_endpoint.requests)
    done = subprocess.run(llm_eval("gate"), cwd=single, capture_output=True, text=True)
    assert done.returncode == 0, done.stderr
    calls = len(stub_endpoint.requests) - before
    return {"base": base, "root": root, "outs": outs, "single": single, "calls": calls}


def test_each_shard_judges_its_queries_and_the_shared_cache_loses_nothing(
    sharded: dict[str, Any],
) -> None:
    for i, out in enumerate(sharded["outs"], start=1):
        queries = sum(shard_number(q["query_id"], 3) == i for q in GOLD)
        assert out.startswith(f"Wrote parts/judged-{i}.jsonl, shard {i}/3 of the judgments ")
        assert f"({queries} quer" in out
    cache = sharded["root"] / "out" / "cache" / "judge"
    assert len(list(cache.rglob("*.json"))) == sharded["calls"]
    assert not list(cache.rglob("*.tmp"))
    lines = (sharded["root"] / "parts" / "judged-2.jsonl").read_text().splitlines()
    header = json.loads(lines[0])
    assert header["shard"] == "2/3"
    assert set(header["fingerprints"]) == {"gold", "corpus", "retriever", "judge"}
    assert [json.loads(line)["query_id"] for line in lines[1:]] == [
        q["query_id"] for q in GOLD if shard_number(q["query_id"], 3) == 2
    ]


def test_the_gate_after_the_merge_asks_nothing_and_gives_the_single_run_values(
    sharded: dict[str, Any], stub_endpoint: Any
) -> None:
    merged = write_project(sharded["base"] / "merged", stub_endpoint.url)
    shutil.copytree(sharded["root"] / "parts", merged / "parts")
    done = subprocess.run(
        llm_eval("judge", "--merge", "parts/judged-*.jsonl"),
        cwd=merged,
        capture_output=True,
        text=True,
    )
    assert (done.returncode, done.stderr) == (0, "")
    assert done.stdout == (
        f"Joined 3 parts into out/cache/judge: {sharded['calls']} answers of the judge; the "
        "gate asks nothing it holds.\n"
    )
    before = len(stub_endpoint.requests)
    gate = subprocess.run(llm_eval("gate"), cwd=merged, capture_output=True, text=True)
    assert gate.returncode == 0, gate.stderr
    assert len(stub_endpoint.requests) == before
    assert judged(merged) == judged(sharded["single"])
    assert judged(merged)["overall"]["context_precision@2"] > 0


@pytest.mark.parametrize(
    ("given", "message"),
    [
        (
            ["judged-1.jsonl", "judged-3.jsonl"],
            "shard 2/3 of the judgments is missing; given: parts/judged-1.jsonl (1/3), "
            "parts/judged-3.jsonl (3/3)\n",
        ),
        (
            ["judged-1.jsonl", "judged-2.jsonl", "judged-2.jsonl"],
            "parts/judged-2.jsonl: is shard 2/3 again (also parts/judged-2.jsonl)\n",
        ),
    ],
)
def test_a_missing_or_repeated_part_is_refused(
    sharded: dict[str, Any],
    cli: Cli,
    monkeypatch: pytest.MonkeyPatch,
    given: list[str],
    message: str,
) -> None:
    monkeypatch.chdir(sharded["root"])
    args = ["--config", "llm-eval.yaml", "--criteria", "criteria.yaml", "--merge"]
    code, _, err = cli("judge", *args, *[f"parts/{g}" for g in given])
    assert (code, err) == (3, "llm-eval: error: " + message)


def test_a_part_of_another_judge_or_with_a_bad_key_is_refused(
    sharded: dict[str, Any], cli: Cli, monkeypatch: pytest.MonkeyPatch, stub_endpoint: Any
) -> None:
    other = write_project(sharded["base"] / "other", stub_endpoint.url, model="another")
    shutil.copytree(sharded["root"] / "parts", other / "parts")
    monkeypatch.chdir(other)
    args = ["--config", "llm-eval.yaml", "--criteria", "criteria.yaml", "--merge"]
    code, _, err = cli("judge", *args, "parts/*.jsonl")
    assert code == 3
    assert err.startswith(
        "llm-eval: error: parts/judged-1.jsonl: is a part of judgments with another judge "
        "configuration (judge fingerprint "
    )
    write_project(other, stub_endpoint.url)
    part = other / "parts" / "judged-3.jsonl"
    lines = part.read_text().splitlines()
    lines[1] = json.dumps({"query_id": "q0", "answers": {"../../escape": {}}})
    part.write_text("\n".join(lines) + "\n")
    code, _, err = cli("judge", *args, "parts/*.jsonl")
    assert (code, err) == (
        3,
        "llm-eval: error: parts/judged-3.jsonl:2: answers: '../../escape' is not a call "
        "cache key\n",
    )


def test_without_a_judged_metric_a_shard_writes_nothing_and_a_merge_is_refused(
    tmp_path: Path, cli: Cli, monkeypatch: pytest.MonkeyPatch
) -> None:
    root = write_project(tmp_path, "http://127.0.0.1:9/v1")
    monkeypatch.chdir(root)
    args = ["--config", "llm-eval.yaml", "--criteria", "criteria.yaml"]
    code, _, err = cli("judge", *args, "--run", "run.jsonl", "--out", "p.jsonl")
    assert code == 2
    assert "give --shard I/N (with --run and --out) or --merge PART..." in err
    config = json.loads((root / "llm-eval.yaml").read_text())
    config["metrics"] = ["recall@2"]
    (root / "llm-eval.yaml").write_text(json.dumps(config))
    code, out, _ = cli("judge", *args, "--run", "run.jsonl", "--shard", "1/2", "--out", "p.jsonl")
    assert (code, out) == (
        0,
        "No judged metric is configured: nothing to judge, p.jsonl not written.\n",
    )
    assert not (root / "p.jsonl").exists()
    code, _, err = cli("judge", *args, "--merge", "run.jsonl")
    assert code == 3
    assert err == (
        "llm-eval: error: llm-eval.yaml: metrics: no judged metric is configured "
        "(context_precision@k, context_recall, …): there is nothing to judge\n"
    )
