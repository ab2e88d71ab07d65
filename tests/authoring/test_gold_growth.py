"""Growing the gold set: coverage, the plan, provenance fields and the review rule."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest
from conftest import Cli, copy_demo, gold_query

from llm_eval.authoring.corpus_coverage import area_of, coverage, section_of
from llm_eval.authoring.plan import scope_power_before_run, scored_ids
from llm_eval.baseline_io import load_baseline
from llm_eval.corpus import Document
from llm_eval.gate import Power
from llm_eval.gold import GoldQuery
from llm_eval.pipeline import load_inputs

REPO = Path(__file__).resolve().parents[2]


def doc(doc_id: str, title: str = "") -> Document:
    return Document(doc_id, title, "text")


def query(query_id: str, tags: tuple[str, ...], *relevant: str, tier: str = "A") -> GoldQuery:
    labels = tuple((d, 1) for d in relevant)
    return gold_query(query_id, labels, tier=tier, tags=tags, path="g.jsonl", line=3)


def test_sections_and_areas() -> None:
    assert section_of(doc("re.sub#2")) == "re.sub"
    assert area_of(doc("re.sub#2")) == "re"
    assert area_of(doc("topic:assignment#0")) == "topic"
    assert section_of(doc("plain")) == "plain"
    given = Document("x#1", "", "t", {"section": "Guide", "area": "Manual"})
    assert (section_of(given), area_of(given)) == ("Guide", "Manual")


def test_coverage_by_hand() -> None:
    documents = [doc(d) for d in ("re.sub#0", "re.sub#1", "re.match#0", "os.path#0", "os.walk#0")]
    queries = [
        query("q1", ("text",), "re.sub#0", "gone#0"),
        query("q2", ("files",), "os.path#0", "gone#1"),
        query("q3", ("text",)),  # a rejection question
    ]
    neighbours = {"q1": ("re.sub#1", "re.sub#0"), "q3": ("unknown#9",)}
    found = coverage(documents, queries, neighbours)
    assert (found.documents, found.labelled, found.near) == (5, 2, 3)
    assert found.uncovered_share == pytest.approx(2 / 5)
    assert found.near_ids == {"re.sub#0", "re.sub#1", "os.path#0"}
    assert [(m.query_id, m.doc_id) for m in found.missing] == [("q1", "gone#0"), ("q2", "gone#1")]
    areas = {a.name: (a.documents, a.labelled, a.near, a.questions) for a in found.areas}
    assert areas == {"re": (3, 1, 2, 1), "os": (2, 1, 1, 1)}
    sections = {s.name: (s.documents, s.near) for s in found.sections}
    assert sections["re.sub"] == (2, 2) and sections["os.walk"] == (1, 0)
    assert [s.name for s in found.untouched_sections] == ["os.walk", "re.match"]
    tags = {t.tag: (t.questions, dict(t.tiers), t.areas) for t in found.tags}
    assert tags == {"files": (1, {"A": 1}, ("os",)), "text": (2, {"A": 2}, ("re",))}


def test_coverage_of_the_demo(
    indexed_demo: Path, cli: Cli, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("COLUMNS", "80")  # the width a pipe gets, whatever runs the tests
    out = indexed_demo / "coverage.json"
    code, text, _ = cli("gold", "coverage", "--out", out)
    assert code == 0
    report = json.loads(out.read_text())
    corpus_lines = (REPO / "gold" / "corpus.jsonl").read_text().count("\n")
    assert report["documents"] == corpus_lines
    assert 0 < report["labelled"] <= report["near"] < report["documents"]
    assert report["uncovered_share"] == pytest.approx(1 - report["near"] / report["documents"])
    assert sum(a["documents"] for a in report["areas"]) == corpus_lines
    assert report["missing_labels"] == []
    assert f"No question near: {report['documents'] - report['near']}" in text.replace("\n", " ")
    assert "Every label names a document of the corpus." in text
    # the path written, a line of its own, is as long as the folder the test runs in
    assert max(len(line) for line in text.splitlines() if not line.startswith("Wrote ")) <= 80


def test_coverage_lists_every_label_the_corpus_lacks(indexed_demo: Path, cli: Cli) -> None:
    gold = indexed_demo / "gold" / "python-docs-B.jsonl"
    lines = gold.read_text().splitlines()
    for i in (0, 4):
        record = json.loads(lines[i])
        record["relevant"] = {**record.get("relevant", {}), f"nowhere#{i}": 1}
        lines[i] = json.dumps(record)
    gold.write_text("\n".join(lines) + "\n")
    code, _, err = cli("gold", "validate")
    assert code == 3  # validate stops at the first
    assert err.count("not in the corpus") == 1
    code, text, _ = cli("gold", "coverage")
    assert code == 0
    assert "Labels naming documents the corpus lacks: 2" in text
    assert "gold/python-docs-B.jsonl:1: relevant.nowhere#0: not in the corpus" in text
    assert "gold/python-docs-B.jsonl:5: relevant.nowhere#4: not in the corpus" in text


def test_the_plan_uses_the_gates_power_model(
    indexed_demo: Path, cli: Cli, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("COLUMNS", "80")  # the width a pipe gets, whatever runs the tests
    out = indexed_demo / "plan.json"
    code, text, _ = cli("gold", "plan", "--out", out)
    assert code == 0
    scopes = json.loads(out.read_text())["scopes"]
    tier_a = next(s for s in scopes if s["gate"] == "retrieval_recall_at_5")
    power = _tier_a_power(indexed_demo)  # twice the 3-point limit, from the baseline
    assert power is not None and power.queries_needed is not None
    needed = power.queries_needed
    assert (tier_a["n"], tier_a["needed"], tier_a["more"]) == (176, needed, needed - 176)
    assert tier_a["detectable_drop"] == power.detectable_drop
    assert tier_a["areas"]  # where to write them
    # gold stats says the same number for the same scope
    code, stats, _ = cli("gold", "stats")
    assert code == 0
    assert f"{needed} ({needed - 176} more)" in stats
    mrr_tags = [s for s in scopes if s["gate"] == "retrieval_mrr" and s["tags"]]
    assert mrr_tags and all(s["n"] > 0 for s in mrr_tags)  # out-of-scope: MRR scores none
    assert not any(s["tags"] == ["out-of-scope"] for s in scopes)
    assert all(s["more"] == max(0, s["needed"] - s["n"]) for s in scopes)
    assert f"- {needed - 176} for tier A" in text
    # the path written, a line of its own, is as long as the folder the test runs in
    assert max(len(line) for line in text.splitlines() if not line.startswith("Wrote ")) <= 80
    assert cli("gold", "plan", "--catch", "1")[0] == 3


def _tier_a_power(project: Path) -> Power | None:
    """The power model over tier A's recall@5 on the project's baseline."""
    inputs = load_inputs(project / "config/llm-eval.yaml", project / "config/ship-criteria.yaml")
    baseline = load_baseline(project / "gold/baseline.json")
    assert baseline is not None
    gate = inputs.criteria.gates[0]
    ids = scored_ids(inputs.gold.queries, gate.scope, gate.metric)
    return scope_power_before_run(gate, ids, baseline.per_query)


def test_a_tags_plan_names_the_areas_its_labels_fall_in(indexed_demo: Path, cli: Cli) -> None:
    """Each tag's plan lists the areas `gold coverage` gives the tag, most labels first,
    not areas holding one stray label that the corpus as a whole leaves uncovered."""
    assert cli("gold", "coverage", "--out", indexed_demo / "coverage.json")[0] == 0
    assert cli("gold", "plan", "--out", indexed_demo / "plan.json")[0] == 0
    tags = {
        t["tag"]: t["areas"]
        for t in json.loads((indexed_demo / "coverage.json").read_text())["tags"]
    }
    planned = [
        s for s in json.loads((indexed_demo / "plan.json").read_text())["scopes"] if s["tags"]
    ]
    assert planned
    for scope in planned:
        (tag,) = scope["tags"]
        assert scope["areas"] == tags[tag][: len(scope["areas"])], tag
    datetime = next(s for s in planned if s["tags"] == ["datetime"])
    assert datetime["areas"][:3] == ["datetime", "time", "calendar"]


def _with_gold(demo: Path, record: dict[str, object]) -> Path:
    """The gold file of the record's tier in the demo project, with the record added."""
    path = demo / "gold" / f"python-docs-{record['tier']}.jsonl"
    with path.open("a") as handle:
        handle.write(json.dumps(record) + "\n")
    return path


SYNTHETIC = {
    "query_id": "syn-1",
    "query": "How do I sort a list in reverse order?",
    "relevant": {"builtins.sorted#0": 1},
    "source": "synthetic",
    "prompt_version": "question_writing@1",
}


def test_an_unreviewed_synthetic_question_may_not_gate(demo_project: Path, cli: Cli) -> None:
    path = _with_gold(demo_project, {**SYNTHETIC, "tier": "A"})
    line = path.read_text().count("\n")
    code, _, err = cli("gold", "validate")
    assert code == 3
    err = err.strip()
    assert err.startswith(f"llm-eval: error: gold/python-docs-A.jsonl:{line}: reviewed: ")
    assert "retrieval_recall_at_5" in err
    assert cli("gate")[0] == 3  # the gate refuses it too


def test_reviewed_or_ungated_synthetic_questions_are_accepted(demo_project: Path, cli: Cli) -> None:
    _with_gold(demo_project, {**SYNTHETIC, "tier": "A", "reviewed": True})
    assert cli("gold", "validate", "--baseline", "none.json")[0] == 0
    shutil.rmtree(demo_project / "gold")
    shutil.rmtree(demo_project / "config")
    copy_demo(demo_project)
    _with_gold(demo_project, {**SYNTHETIC, "tier": "B"})  # only a warning gate reads B
    assert cli("gold", "validate", "--baseline", "none.json")[0] == 0


@pytest.mark.parametrize(
    ("field", "value", "message"),
    [
        ("source", "model", "source: expected one of human, synthetic, got 'model'"),
        ("reviewed", "yes", "reviewed: must be true or false"),
        ("prompt_version", 3, "prompt_version: must be a string"),
    ],
)
def test_provenance_fields_are_checked(
    demo_project: Path, cli: Cli, field: str, value: object, message: str
) -> None:
    _with_gold(demo_project, {**SYNTHETIC, "tier": "B", field: value})
    code, _, err = cli("gold", "validate")
    assert code == 3
    assert message in err


def test_neighbours_follow_the_corpus_a_process_sees_now(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The default BM25 is kept for the life of the process (a review asks it once per
    answer), but never for another corpus: not for another folder with the same relative
    paths, and not once the corpus file changed."""
    from conftest import copy_demo

    from llm_eval.authoring.neighbours import neighbours_of
    from llm_eval.config_io import load_config

    question = "How do I check that a condition holds only while debugging?"
    first, second = copy_demo(tmp_path / "first"), copy_demo(tmp_path / "second")
    corpus = second / "gold" / "corpus.jsonl"
    lines = corpus.read_text(encoding="utf-8").splitlines(keepends=True)
    monkeypatch.chdir(first)
    top = neighbours_of(load_config("config/llm-eval.yaml"), question, 3)
    assert len(top) == 3
    kept = [x for x in lines if f'"{top[0]}"' not in x]
    assert len(kept) == len(lines) - 1
    corpus.write_text("".join(kept), encoding="utf-8")
    monkeypatch.chdir(second)
    elsewhere = neighbours_of(load_config("config/llm-eval.yaml"), question, 3)
    assert top[0] not in elsewhere and elsewhere[:2] == top[1:]
    corpus.write_text("".join(lines), encoding="utf-8")  # the same folder, the file changed
    assert neighbours_of(load_config("config/llm-eval.yaml"), question, 3) == top


def test_seed_schema_categories_are_slices_a_gate_can_read(indexed_demo: Path, cli: Cli) -> None:
    """A gold set written in the design documents' schema (category, difficulty,
    expected_answer_gist) validates, and its categories get per-category breakdowns
    and may scope a gate, as tags do."""
    gold = indexed_demo / "gold" / "python-docs-A.jsonl"
    records = [json.loads(line) for line in gold.read_text().splitlines()]
    for i, record in enumerate(records):
        record["category"] = "howto" if "howto" in record.get("tags", []) else "other"
        record["difficulty"] = ("easy", "hard")[i % 2]
        record["expected_answer_gist"] = "a gist"
    gold.write_text("".join(json.dumps(r) + "\n" for r in records))
    criteria = indexed_demo / "config" / "ship-criteria.yaml"
    criteria.write_text(
        criteria.read_text().replace(
            "gates:\n",
            "gates:\n  - name: howto_recall\n    metric: recall@5\n"
            "    regression_max: 0.05\n    severity: warning\n"
            "    scope: {tier: A, tags: ['category:howto']}\n",
            1,
        )
    )
    assert cli("gold", "validate")[0] == 0
    assert cli("baseline", "refresh")[0] == 0
    assert cli("gate")[0] == 0
    report = json.loads((indexed_demo / ".llm-eval" / "report.json").read_text())
    names = {s["name"] for s in report["slices"]}
    assert {"category:howto", "category:other", "difficulty:easy", "difficulty:hard"} <= names
    howto = next(g for g in report["gates"] if g["name"] == "howto_recall")
    expected = sum(1 for r in records if r["category"] == "howto" and r.get("relevant"))
    assert howto["scope"] == "tier A, tag category:howto"
    assert howto["n"] == expected and howto["status"] == "pass"
    assert "category:howto" in (indexed_demo / ".llm-eval" / "report.md").read_text()
