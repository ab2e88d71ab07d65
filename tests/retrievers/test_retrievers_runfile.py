"""The run kind: a precomputed run file named in the config, used like `--run`."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from conftest import Cli, gold_query
from servers import write_project


def test_a_run_file_in_the_config_gives_the_same_report_as_run(tmp_path: Path, cli: Cli) -> None:
    run = tmp_path / "given.trec"
    run.write_text("a-001 Q0 builtins.sorted#0 1 3.5 mine\na-002 Q0 x 1 1.0 mine\n")
    project = write_project(tmp_path, {"kind": "run", "path": str(run)}, queries=3)
    args = ["gate", "--config", str(project.config), "--criteria", str(project.criteria)]
    assert cli(*args)[0] == 0
    from_config = project.report()
    assert cli(*args, "--run", run)[0] == 0
    from_option = project.report()
    assert from_config["slices"] == from_option["slices"]
    assert from_config["queries"]["missing_from_run"] == ["a-003"]


def test_errors_in_the_run_count_against_max_error_rate(tmp_path: Path, cli: Cli) -> None:
    run = tmp_path / "given.jsonl"
    lines = [
        {"query_id": "a-001", "results": [{"doc_id": "builtins.sorted#0"}], "latency_ms": 3},
        {"query_id": "a-002", "results": [], "error": "timeout"},
    ]
    run.write_text("".join(json.dumps(line) + "\n" for line in lines))
    project = write_project(tmp_path, {"kind": "run", "path": str(run)}, queries=2)
    out = tmp_path / "copy.jsonl"
    code, _, err = cli("retrieve", "--config", project.config, "--out", out)
    assert code == 4
    assert err == (
        "llm-eval: error: retriever failed on 1 of 2 queries (50% > max_error_rate 0%): 1 timeout\n"
    )
    settings = {"kind": "run", "path": str(run), "format": "jsonl", "max_error_rate": 0.5}
    project = write_project(tmp_path, settings, queries=2)
    assert cli("retrieve", "--config", project.config, "--out", out)[0] == 0
    assert out.read_text() == run.read_text().replace('"latency_ms": 3}', '"latency_ms": 3.0}')


def test_a_missing_run_file_is_a_config_error(tmp_path: Path, cli: Cli) -> None:
    project = write_project(tmp_path, {"kind": "run", "format": "csv"}, queries=1)
    assert cli("retrieve", "--config", project.config, "--out", "x")[::2] == (
        3,
        f"llm-eval: error: {project.config}:4: retriever: missing required key 'path'\n",
    )
    project = write_project(tmp_path, {"kind": "run", "path": "nope.jsonl"}, queries=1)
    assert cli("retrieve", "--config", project.config, "--out", "x")[::2] == (
        3,
        "llm-eval: error: nope.jsonl: no such file\n",
    )


def test_a_batch_retriever_reports_each_query_and_is_never_cached(tmp_path: Path) -> None:
    from llm_eval.retrievers import RetrieverContext, retriever_kind

    run = tmp_path / "run.jsonl"
    run.write_text('{"query_id": "q1", "results": [{"doc_id": "d"}]}\n')
    kind = retriever_kind("run")
    retriever = kind.create({"path": str(run)}, RetrieverContext(None, tmp_path))
    queries = [gold_query(q, (("d", 1),), text=q) for q in "ab"]
    done: list[int] = []
    answered = retriever.retrieve(queries, 10, None, lambda: done.append(1))
    assert (list(answered.queries), len(done), retriever.cache_identity) == (["q1"], 2, None)
    assert kind.answers_file(kind.record(kind.checked({"path": str(run)}))) == run
    elsewhere = kind.record(kind.checked({"path": "runs/x.jsonl"}))
    assert kind.depends_on(elsewhere, tmp_path) == [Path("runs/x.jsonl")]


@pytest.mark.parametrize(
    ("settings", "message"),
    [
        ({}, "missing required key 'path'"),
        ({"path": "r.jsonl", "format": "csv"}, "format: must be one of 'auto', 'jsonl', 'trec'"),
        ({"path": "r.jsonl", "colour": 1}, "colour: unknown setting (valid: path, format)"),
    ],
)
def test_create_checks_the_settings_it_builds_from(
    tmp_path: Path, settings: dict[str, object], message: str
) -> None:
    from llm_eval.errors import InputError
    from llm_eval.retrievers import RetrieverContext, retriever_kind

    with pytest.raises(InputError) as raised:
        retriever_kind("run").create(settings, RetrieverContext(None, tmp_path))
    assert str(raised.value).startswith(message)


@pytest.mark.parametrize("repeat", [1, 3])
def test_a_run_read_at_once_counts_its_queries_at_once(tmp_path: Path, repeat: int) -> None:
    """The progress of a retriever that answers every query in one batch moves once a
    batch, to the whole count: a million calls for one event would be CPU spent for
    nothing."""
    from llm_eval.config_io import load_config
    from llm_eval.gold_io import load_gold
    from llm_eval.retrieval import RetrieveOptions, retrieve_gold

    run = tmp_path / "given.trec"
    run.write_text("a-001 Q0 builtins.sorted#0 1 3.5 mine\na-002 Q0 x 1 1.0 mine\n")
    project = write_project(tmp_path, {"kind": "run", "path": str(run)}, queries=4)
    config = load_config(project.config)
    queries = load_gold(config.gold).queries
    counts: list[tuple[int, int]] = []
    options = RetrieveOptions(False, repeat=repeat, progress=lambda *count: counts.append(count))
    retrieved = retrieve_gold(config, queries, options)
    assert counts == [(4 * (i + 1), 4 * repeat) for i in range(repeat)]
    assert sorted(retrieved.run.queries) == ["a-001", "a-002"]
