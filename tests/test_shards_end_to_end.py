"""The demo retrieved in shards by processes running at once, and gated, refreshed and
evaluated from the parts, through the command line (`llm-eval` in subprocesses)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import pytest
from conftest import copy_demo

PARTS = "parts/run-*.jsonl"


def llm_eval(project: Path, *args: str | Path) -> subprocess.CompletedProcess[str]:
    """`llm-eval ARGS` in `project`, as a process of its own."""
    command = [sys.executable, "-m", "llm_eval.cli", *map(str, args)]
    env = {**os.environ, "COLUMNS": "80"}
    return subprocess.run(command, cwd=project, capture_output=True, text=True, env=env)


def retrieve_at_once(
    project: Path, shards: Sequence[str], config: str = "config/llm-eval.yaml"
) -> None:
    """`retrieve --shard` for each shard, the processes all started before any is waited
    for, into the project's one cache folder (empty at first: each may build the index)."""
    started = []
    for shard in shards:
        out = project / "parts" / f"run-{shard.split('/')[0]}.jsonl"
        command = [sys.executable, "-m", "llm_eval.cli", "retrieve", "--config", config]
        command += ["--shard", shard, "--out", str(out)]
        started.append(
            subprocess.Popen(command, cwd=project, stdout=subprocess.PIPE, stderr=subprocess.PIPE)
        )
    for process in started:
        out, err = process.communicate()
        assert process.returncode == 0, err.decode()


@pytest.fixture(scope="module")
def project(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The demo, retrieved in 3 shards at once into `parts/`."""
    root = copy_demo(tmp_path_factory.mktemp("sharded"))
    retrieve_at_once(root, ["1/3", "2/3", "3/3"])
    return root


def without_timings(report: dict[str, Any]) -> dict[str, Any]:
    """report.json with what differs from run to run left out: timings, generated_at."""
    kept = {key: value for key, value in report.items() if key != "timings"}
    kept["provenance"] = {k: v for k, v in report["provenance"].items() if k != "generated_at"}
    return kept


def test_the_gate_from_three_parts_reports_as_the_single_process_gate(project: Path) -> None:
    single = llm_eval(project, "gate", "--out", "single")
    sharded = llm_eval(project, "gate", "--run", PARTS, "--out", "sharded")
    assert (single.returncode, sharded.returncode) == (0, 0), sharded.stderr
    assert "Joined 3 parts of a sharded run into one run." in sharded.stdout
    reports = [json.loads((project / f / "report.json").read_text()) for f in ("single", "sharded")]
    assert without_timings(reports[1]) == without_timings(reports[0])
    assert reports[0]["queries"]["evaluated"] == 327  # the whole gold set, not a shard
    prints = reports[1]["provenance"]["fingerprints"]
    assert not prints["retriever"].startswith("run:")  # the retriever's, as when retrieving


def test_each_part_names_its_shard_and_fingerprints(project: Path) -> None:
    headers = [
        json.loads((project / "parts" / f"run-{i}.jsonl").open().readline()) for i in (1, 2, 3)
    ]
    assert [h["shard"] for h in headers] == ["1/3", "2/3", "3/3"]
    baseline = json.loads((project / "gold" / "baseline.json").read_text())["fingerprints"]
    for header in headers:
        assert header["fingerprints"] == {k: baseline[k] for k in ("gold", "corpus", "retriever")}
    counted = [sum(1 for _ in (project / "parts" / f"run-{i}.jsonl").open()) - 1 for i in (1, 2, 3)]
    assert sum(counted) == 342 and min(counted) > 90


def test_a_refresh_from_the_parts_finds_the_single_process_baseline(project: Path) -> None:
    before = (project / "gold" / "baseline.json").read_bytes()
    parts = [f"--run=parts/run-{i}.jsonl" for i in (3, 1, 2)]
    refreshed = llm_eval(project, "baseline", "refresh", *parts)
    assert refreshed.returncode == 0, refreshed.stderr
    assert refreshed.stdout.startswith("Nothing moved: gold/baseline.json already holds these")
    assert (project / "gold" / "baseline.json").read_bytes() == before


def test_evaluate_from_the_parts_equals_evaluate_of_the_whole_run(project: Path) -> None:
    assert llm_eval(project, "retrieve", "--out", "whole.jsonl").returncode == 0
    gold = ["--gold", "gold/python-docs-A.jsonl", "--gold", "gold/python-docs-B.jsonl"]
    asked = [*gold, "-m", "recall@5", "-m", "mrr", "--per-query", "--format", "json"]
    whole = llm_eval(project, "evaluate", "--run", "whole.jsonl", *asked)
    parts = llm_eval(project, "evaluate", "--run", PARTS, *asked)
    assert (whole.returncode, parts.returncode) == (0, 0), parts.stderr
    assert json.loads(parts.stdout) == json.loads(whole.stdout)


def refused(project: Path, *runs: str) -> str:
    """The gate's one line on stderr for these parts, asserting exit 3."""
    gated = llm_eval(project, "gate", *(f"--run={run}" for run in runs), "--out", "refused")
    assert gated.returncode == 3, gated.stderr
    assert gated.stderr.count("\n") == 1 and "Traceback" not in gated.stderr
    return gated.stderr.rstrip("\n")


def test_a_missing_part_is_refused(project: Path) -> None:
    assert refused(project, "parts/run-1.jsonl", "parts/run-3.jsonl") == (
        "llm-eval: error: shard 2/3 of the run is missing; given: parts/run-1.jsonl (1/3), "
        "parts/run-3.jsonl (3/3)"
    )


def test_a_part_given_twice_is_refused_with_its_name(project: Path) -> None:
    (project / "copy.jsonl").write_bytes((project / "parts" / "run-2.jsonl").read_bytes())
    assert refused(project, PARTS, "copy.jsonl") == (
        "llm-eval: error: copy.jsonl: is shard 2/3 again (also parts/run-2.jsonl)"
    )


def test_a_part_of_another_config_is_refused_with_its_name(project: Path) -> None:
    config = (project / "config" / "llm-eval.yaml").read_text()
    (project / "other.yaml").write_text(config.replace("k1: 0.9", "k1: 1.2"))
    other = llm_eval(
        project, "retrieve", "--config", "other.yaml", "--shard", "2/3", "--out", "o2.jsonl"
    )
    assert other.returncode == 0, other.stderr
    line = refused(project, "parts/run-1.jsonl", "o2.jsonl", "parts/run-3.jsonl")
    assert line.startswith(
        "llm-eval: error: o2.jsonl: is a part of a run with another retriever configuration "
        "(retriever fingerprint "
    )
    assert line.endswith(", this config's 0e85635d00f78ba3)")


def test_a_part_of_another_gold_set_is_refused_with_its_name(project: Path, tmp_path: Path) -> None:
    other = copy_demo(tmp_path)
    gold = other / "gold" / "python-docs-B.jsonl"
    lines = gold.read_text().splitlines()
    gold.write_text("\n".join(lines[:-1]) + "\n")  # one query fewer: another gold set
    retrieve_at_once(other, ["1/3"])
    (project / "g1.jsonl").write_bytes((other / "parts" / "run-1.jsonl").read_bytes())
    line = refused(project, "g1.jsonl", "parts/run-2.jsonl", "parts/run-3.jsonl")
    assert line.startswith(
        "llm-eval: error: g1.jsonl: is a part of a run with another gold set (gold fingerprint "
    )
    assert line.endswith(", this config's 93b426cb5359e8fd)")


def test_a_part_alone_is_not_a_run_for_compare(project: Path) -> None:
    compared = llm_eval(project, "compare", "parts/run-1.jsonl", "parts/run-2.jsonl")
    assert compared.returncode == 3
    assert compared.stderr == (
        "llm-eval: error: parts/run-1.jsonl:1: is shard 1/3 of a run in parts, not a whole "
        "run: give every part to gate, baseline refresh or evaluate (--run once each, or a "
        "glob)\n"
    )


@pytest.mark.parametrize(
    ("args", "code", "message"),
    [
        (
            ["--format", "trec"],
            3,
            "llm-eval: error: --shard writes JSONL: a TREC run file has no place for a "
            "part's header\n",
        ),
        (["--builds", "2"], 2, "--builds writes a run per build; a shard's part holds one"),
    ],
)
def test_a_part_that_cannot_be_written_is_refused(
    project: Path, args: list[str], code: int, message: str
) -> None:
    done = llm_eval(project, "retrieve", "--shard", "1/3", "--out", "x.jsonl", *args)
    assert done.returncode == code
    assert message in done.stderr
    assert not (project / "x.jsonl").exists()


def test_a_retriever_built_several_times_is_not_sharded(project: Path) -> None:
    """A `kind: run` glob names one run file per build: each part would hold one."""
    for build in (1, 2):
        (project / f"build-{build}.jsonl").write_text('{"query_id": "a-001", "results": []}\n')
    config = (project / "config" / "llm-eval.yaml").read_text()
    built = config.replace("kind: bm25", "kind: run\n  path: build-*.jsonl").replace(
        "  k1: 0.9\n  b: 0.4\n", ""
    )
    (project / "built.yaml").write_text(built)
    done = llm_eval(
        project, "retrieve", "--config", "built.yaml", "--shard", "1/3", "--out", "b.jsonl"
    )
    assert done.returncode == 3
    assert done.stderr == (
        "llm-eval: error: built.yaml: retriever.builds: --shard cannot split a retriever "
        "built 2 times: run its builds unsharded, or shard with one build\n"
    )
