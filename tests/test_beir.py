"""A BEIR dataset folder as the gold set: the config's `beir:` entry, `init --from-beir`,
and the error that names it when a qrels file is given as gold JSONL."""

from __future__ import annotations

import json
import subprocess
from pathlib import Path

import pytest
from conftest import Cli

from llm_eval.beir_io import judged_queries
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


def test_a_beir_qrels_file_given_as_gold_names_the_setting(tmp_path: Path, cli: Cli) -> None:
    folder = write_beir(tmp_path / "scifact")
    qrels = folder / "qrels" / "test.tsv"
    config = write_config(tmp_path / "c.yaml", f"  - {qrels}\n")
    code, _, err = cli("gold", "validate", "--config", config)
    assert code == 3
    assert err == (
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
    assert str(caught.value) == (
        f"{qrels}:1: TREC qrels (`query_id 0 doc_id grade`), not gold JSONL: a gold set "
        f"needs the queries' text too: list it with its topics as `gold: [{{topics: TOPICS, "
        f"qrels: {qrels}}}]`, or score a run against it with `llm-eval evaluate --qrels`"
    )


def test_init_from_beir_then_gate_passes(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, cli: Cli
) -> None:
    subprocess.run(["git", "init", "-q", str(tmp_path)], check=True)
    monkeypatch.chdir(tmp_path)
    write_beir(tmp_path / "data" / "scifact")
    code, out, _ = cli("init", "--from-beir", "data/scifact")
    assert code == 0
    assert "The gold set (tier A): the 4 queries of data/scifact, split test." in out
    config = load_config("config/llm-eval.yaml")
    assert config.corpus == Path("data/scifact/corpus.jsonl")
    assert [(s.path, s.split, s.tier) for s in config.gold] == [("data/scifact", "test", "A")]
    baseline = json.loads(Path("gold/baseline.json").read_text())
    assert sorted(baseline["per_query"]) == ["2", "q1", "q3", "q4"]
    code, out, _ = cli("gate")
    assert code == 0
    assert "PASS" in out
    code, _, err = cli("init", "--from-beir", "data/scifact")
    assert code == 3
    assert "already exist" in err


def test_init_from_beir_with_a_bad_split_writes_nothing(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, cli: Cli
) -> None:
    monkeypatch.chdir(tmp_path)
    write_beir(tmp_path / "scifact")
    code, _, err = cli("init", "--from-beir", "scifact", "--split", "train")
    assert code == 3
    assert "no qrels for split 'train' (splits there: dev, test)" in err
    assert not (tmp_path / "config").exists()


TOPICS = """<top>
<num> Number: 401
<title> foreign minorities, Germany

<desc> Description:
What language and cultural differences impede the integration
of foreign minorities in Germany?
</top>

<top>
<num> Number: 402
<title>
behavioral genetics
<desc> Description:
What is happening in the field of behavioral genetics?
</top>
<top>
<num> Number: 403
<title> osteoporosis
</top>
"""
TREC_QRELS = "401 0 FBIS3-1 1\n401 0 FBIS3-2 0\n402 0 LA01-7 2\n403 0 FT-9 0\n"


def test_trec_topics_with_their_qrels_are_a_gold_set(tmp_path: Path) -> None:
    (tmp_path / "topics.txt").write_text(TOPICS)
    (tmp_path / "qrels.txt").write_text(TREC_QRELS)
    entry = f"  - {{topics: {tmp_path}/topics.txt, qrels: {tmp_path}/qrels.txt, tier: B}}\n"
    gold = load_gold(load_config(write_config(tmp_path / "c.yaml", entry)).gold)
    assert [(q.query_id, q.query, q.line, q.tier) for q in gold.queries] == [
        ("401", "foreign minorities, Germany", 1, "B"),
        ("402", "behavioral genetics", 10, "B"),
    ]
    # 403 has no relevant document: not a gold query; 401's grade 0 is kept for judged@k
    assert gold.qrels() == {"401": {"FBIS3-1": 1, "FBIS3-2": 0}, "402": {"LA01-7": 2}}


def test_tab_separated_queries_serve_as_topics(tmp_path: Path) -> None:
    (tmp_path / "queries.tsv").write_text("1\twhat is bm25\n2\twho wrote trec_eval\n")
    (tmp_path / "qrels.tsv").write_text("query-id\tcorpus-id\tscore\n2\td9\t1\n")
    entry = f"  - {{topics: {tmp_path}/queries.tsv, qrels: {tmp_path}/qrels.tsv}}\n"
    gold = load_gold(load_config(write_config(tmp_path / "c.yaml", entry)).gold)
    assert [(q.query_id, q.query, q.tier) for q in gold.queries] == [
        ("2", "who wrote trec_eval", "A")
    ]


@pytest.mark.parametrize(
    ("topics", "error"),
    [
        ("<top>\n<num> Number: 7\n</top>\n", "topics.txt:1: topic without a <title>"),
        ("<top>\n<title> x\n</top>\n", "topics.txt:1: topic without a <num>"),
        ("1\ta\n1\tb\n", "topics.txt:2: topic '1' twice (first at line 1)"),
        (
            "1 what is bm25\n",
            "topics.txt:1: expected `<top>` topics or 2 tab-separated columns `query_id query`",
        ),
    ],
)
def test_bad_topics_name_their_line(tmp_path: Path, topics: str, error: str) -> None:
    (tmp_path / "topics.txt").write_text(topics)
    (tmp_path / "qrels.txt").write_text("1 0 d 1\n")
    entry = f"  - {{topics: {tmp_path}/topics.txt, qrels: {tmp_path}/qrels.txt}}\n"
    with pytest.raises(InputError) as caught:
        load_gold(load_config(write_config(tmp_path / "c.yaml", entry)).gold)
    assert str(caught.value) == f"{tmp_path}/{error}"


def test_a_topics_entry_needs_its_qrels(tmp_path: Path) -> None:
    path = write_config(tmp_path / "c.yaml", "  - {topics: t.txt}\n")
    with pytest.raises(InputError) as caught:
        load_config(path)
    assert "qrels" in str(caught.value) and str(caught.value).startswith(f"{path}:2:")


def test_split_without_from_beir_is_a_usage_error(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, cli: Cli
) -> None:
    monkeypatch.chdir(tmp_path)
    code, _, err = cli("init", "--split", "dev")
    assert code == 2
    assert "--split is the split of --from-beir; give that too" in err
    assert not (tmp_path / "config").exists()


def test_non_relevant_judgments_of_a_judged_query_are_kept(tmp_path: Path) -> None:
    """Grade 0 and negative grades (TREC's spam) are judged non-relevant: kept for
    judged@k beside the relevant documents of a query that has one."""
    qrels = {"q1": {"d1": 1, "d2": 0, "d3": -2}, "q2": {"d4": 1}}
    texts = {"q1": ("cats", 1), "q2": ("dogs", 2)}
    first, second = judged_queries(texts, qrels, tmp_path / "queries.jsonl", "x", None, "auto")
    assert first.relevant == (("d1", 1),)
    assert first.non_relevant == (("d2", 0), ("d3", -2))
    assert second.non_relevant == ()
