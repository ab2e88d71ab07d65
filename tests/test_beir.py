"""A BEIR dataset folder as the gold set: the config's `beir:` entry, `init --from-beir`,
and the error that names it when a qrels file is given as gold JSONL."""

from __future__ import annotations

import json
import subprocess
from pathlib import Path

import pytest

from llm_eval.cli import main
from llm_eval.config_io import load_config
from llm_eval.errors import InputError
from llm_eval.gold_io import load_gold

DOCS = [
    ("d1", "Cats", "cats purr when they are content and sleep most of the day"),
    ("d2", "Dogs", "dogs bark at the mailman and wag their tails"),
    ("d3", "Fish", "fish swim in rivers lakes and the open sea"),
    ("4", "Birds", "birds fly south in winter and sing in spring"),
    ("d5", "Bees", "bees make honey from the nectar of flowers"),
]
QUERIES = [
    ("q1", "why do cats purr"),
    (2, "what do dogs bark at"),  # BEIR files hold numeric ids too
    ("q3", "where do fish swim"),
    ("q4", "how is honey made"),
    ("q5", "a query the split does not judge"),
    ("q6", "a query judged only non-relevant"),
]
QRELS = (
    "query-id\tcorpus-id\tscore\nq1\td1\t1\n2\td2\t1\nq3\td3\t2\nq3\t4\t1\nq4\td5\t1\nq6\td1\t0\n"
)


def write_beir(folder: Path) -> Path:
    (folder / "qrels").mkdir(parents=True)
    lines = [json.dumps({"_id": i, "title": t, "text": x}) for i, t, x in DOCS]
    (folder / "corpus.jsonl").write_text("\n".join(lines) + "\n")
    lines = [json.dumps({"_id": i, "text": t, "metadata": {}}) for i, t in QUERIES]
    (folder / "queries.jsonl").write_text("\n".join(lines) + "\n")
    (folder / "qrels" / "test.tsv").write_text(QRELS)
    (folder / "qrels" / "dev.tsv").write_text("query-id\tcorpus-id\tscore\nq4\td5\t1\n")
    return folder


def write_config(path: Path, gold: str) -> Path:
    path.write_text(f"gold:\n{gold}")
    return path


def test_a_beir_entry_reads_the_split_and_defaults_the_corpus(tmp_path: Path) -> None:
    folder = write_beir(tmp_path / "scifact")
    entry = f"  - {{beir: {folder}, split: test, tier: A}}\n"
    config = load_config(write_config(tmp_path / "llm-eval.yaml", entry))
    assert config.corpus == folder / "corpus.jsonl"
    gold = load_gold(config.gold)
    assert gold.qrels() == {
        "q1": {"d1": 1},
        "2": {"d2": 1},
        "q3": {"d3": 2, "4": 1},
        "q4": {"d5": 1},
    }
    assert [q.query for q in gold.queries][:2] == ["why do cats purr", "what do dogs bark at"]
    assert {(q.tier, q.is_rejection, q.line) for q in gold.queries[1:2]} == {("A", False, 2)}


def test_the_split_defaults_to_test_and_may_be_another(tmp_path: Path) -> None:
    folder = write_beir(tmp_path / "scifact")
    plain = load_config(write_config(tmp_path / "a.yaml", f"  - beir: {folder}\n"))
    assert len(load_gold(plain.gold).queries) == 4
    dev = load_config(write_config(tmp_path / "b.yaml", f"  - {{beir: {folder}, split: dev}}\n"))
    assert [q.query_id for q in load_gold(dev.gold).queries] == ["q4"]


def test_a_missing_split_lists_the_splits_there(tmp_path: Path) -> None:
    folder = write_beir(tmp_path / "scifact")
    config = load_config(write_config(tmp_path / "c.yaml", f"  - {{beir: {folder}, split: x}}\n"))
    with pytest.raises(InputError) as caught:
        load_gold(config.gold)
    assert (
        str(caught.value)
        == f"{folder}/qrels/x.tsv: no qrels for split 'x' (splits there: dev, test)"
    )


def test_a_query_judged_but_not_in_queries_jsonl_is_an_error(tmp_path: Path) -> None:
    folder = write_beir(tmp_path / "scifact")
    (folder / "qrels" / "test.tsv").write_text(QRELS + "q9\td1\t1\n")
    config = load_config(write_config(tmp_path / "c.yaml", f"  - beir: {folder}\n"))
    with pytest.raises(InputError) as caught:
        load_gold(config.gold)
    assert str(caught.value) == (
        f"{folder}/queries.jsonl: query 'q9' is judged in split 'test' but not in queries.jsonl"
    )


def test_a_beir_entry_refuses_unknown_keys(tmp_path: Path) -> None:
    path = write_config(tmp_path / "c.yaml", "  - {beir: x, matching: text}\n")
    with pytest.raises(InputError) as caught:
        load_config(path)
    assert str(caught.value).startswith(f"{path}:2: gold[0].matching: unknown key")


def test_a_beir_qrels_file_given_as_gold_names_the_setting(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    folder = write_beir(tmp_path / "scifact")
    qrels = folder / "qrels" / "test.tsv"
    config = write_config(tmp_path / "c.yaml", f"  - {qrels}\n")
    assert main(["gold", "validate", "--config", str(config)]) == 3
    assert capsys.readouterr().err == (
        f"llm-eval: error: {qrels}:1: a BEIR qrels file, not gold JSONL: list its dataset "
        f"folder in the config as `gold: [{{beir: {folder}, split: test}}]` (the folder of "
        "corpus.jsonl, queries.jsonl and qrels/)\n"
    )


def test_trec_qrels_given_as_gold_say_what_reads_them(tmp_path: Path) -> None:
    qrels = tmp_path / "test.qrels"
    qrels.write_text("q1 0 d1 1\nq2 0 d2 1\n")
    config = load_config(write_config(tmp_path / "c.yaml", f"  - {qrels}\n"))
    with pytest.raises(InputError) as caught:
        load_gold(config.gold)
    assert str(caught.value).startswith(f"{qrels}:1: TREC qrels (`query_id 0 doc_id grade`)")
    assert "`llm-eval evaluate --qrels`" in str(caught.value)


def test_init_from_beir_then_gate_passes(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    subprocess.run(["git", "init", "-q", str(tmp_path)], check=True)
    monkeypatch.chdir(tmp_path)
    write_beir(tmp_path / "data" / "scifact")
    assert main(["init", "--from-beir", "data/scifact"]) == 0
    out = capsys.readouterr().out
    assert "The gold set (tier A): the 4 queries of data/scifact, split test." in out
    config = load_config("config/llm-eval.yaml")
    assert config.corpus == Path("data/scifact/corpus.jsonl")
    assert [(s.path, s.split, s.tier) for s in config.gold] == [("data/scifact", "test", "A")]
    baseline = json.loads(Path("gold/baseline.json").read_text())
    assert sorted(baseline["per_query"]) == ["2", "q1", "q3", "q4"]
    assert main(["gate"]) == 0
    assert "PASS" in capsys.readouterr().out
    assert main(["init", "--from-beir", "data/scifact"]) == 3
    assert "already exist" in capsys.readouterr().err


def test_init_from_beir_with_a_bad_split_writes_nothing(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.chdir(tmp_path)
    write_beir(tmp_path / "scifact")
    assert main(["init", "--from-beir", "scifact", "--split", "train"]) == 3
    assert "no qrels for split 'train' (splits there: dev, test)" in capsys.readouterr().err
    assert not (tmp_path / "config").exists()
