"""Coverage and the plan on a corpus whose ids name no groups (numeric, as BEIR SciFact's).

Each document id is a number, so the ids' own rule makes every document an area of its
own; coverage falls back to title terms and says so, and the plan asks for questions
about subjects, not numbers.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from conftest import Cli, gold_query

from llm_eval.authoring.corpus_coverage import BY_IDS, BY_TITLE_TERMS, coverage, document_areas
from llm_eval.corpus import Document

# Three subjects, eight documents each; titles share their subject's term and words
# common to every subject ("results", "report") that name none.
SUBJECTS = {
    "enzyme": "kinase activity in liver cells",
    "glacier": "melt rates of alpine ice",
    "telescope": "mirror design for deep sky surveys",
}
COMMON = ["results", "report", "measurements", "notes"]


def corpus() -> list[Document]:
    documents = []
    for s, (subject, words) in enumerate(SUBJECTS.items()):
        for i in range(8):
            doc_id = str(10015292 + 1000 * s + 7 * i)
            extra = COMMON[i % 4] if i % 2 else ""
            title = f"The {subject} {words.split()[i % 4]} {extra}".strip()
            text = f"{subject} {words} number {i}"
            documents.append(Document(doc_id, title, text))
    return documents


def subject_of(document: Document) -> str:
    return document.title.split()[1]


def test_numeric_ids_are_grouped_by_title_term() -> None:
    documents = corpus()
    areas, by = document_areas(documents)
    assert by == BY_TITLE_TERMS
    assert areas == {d.doc_id: subject_of(d) for d in documents}


def test_ids_that_name_groups_keep_their_areas() -> None:
    documents = [
        Document(f"{module}.f{i}#0", f"{subject} page", "text")
        for module, subject in (("re", "enzyme"), ("os", "glacier"))
        for i in range(3)
    ]
    areas, by = document_areas(documents)
    assert by == BY_IDS
    assert set(areas.values()) == {"re", "os"}


def test_coverage_areas_on_numeric_ids() -> None:
    documents = corpus()
    enzyme = [d.doc_id for d in documents if subject_of(d) == "enzyme"]
    queries = [
        gold_query("q1", ((enzyme[0], 1),), tags=("bio",)),
        gold_query("q2", ((enzyme[1], 1),), tags=("bio",)),
    ]
    found = coverage(documents, queries, {"q1": tuple(enzyme[2:4])})
    assert found.areas_by == BY_TITLE_TERMS
    areas = {a.name: (a.documents, a.labelled, a.near, a.questions) for a in found.areas}
    assert areas == {"enzyme": (8, 2, 4, 2), "glacier": (8, 0, 0, 0), "telescope": (8, 0, 0, 0)}
    assert [t.areas for t in found.tags] == [("enzyme",)]


@pytest.fixture
def project(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """A project on the numeric-id corpus: two tier-A questions, a recall@5 gate."""
    documents = corpus()
    (tmp_path / "config").mkdir()
    rows = [{"_id": d.doc_id, "title": d.title, "text": d.text} for d in documents]
    (tmp_path / "corpus.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows))
    enzyme = [d.doc_id for d in documents if subject_of(d) == "enzyme"]
    gold = [
        {"query_id": f"q{i}", "query": f"enzyme kinase question {i}", "tier": "A",
         "relevant": [enzyme[i]]}
        for i in range(2)
    ]  # fmt: skip
    (tmp_path / "gold.jsonl").write_text("".join(json.dumps(g) + "\n" for g in gold))
    (tmp_path / "config" / "llm-eval.yaml").write_text(
        "gold:\n  - {path: gold.jsonl, tier: A}\ncorpus: corpus.jsonl\nretriever: {kind: bm25}\n"
    )
    (tmp_path / "config" / "ship-criteria.yaml").write_text(
        "gates:\n  - {name: retrieval_recall_at_5, threshold: 0.5, regression_max: 0.05}\n"
    )
    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("COLUMNS", "80")
    return tmp_path


def test_gold_coverage_and_plan_name_subjects_and_say_how(project: Path, cli: Cli) -> None:
    code, out, _ = cli("gold", "coverage", "--out", "coverage.json")
    assert code == 0
    assert out.startswith("Corpus: 24 documents in 24 sections and 3 areas.")
    assert (
        "Areas group documents by a term of each document's title (its ids and metadata\n"
        "name no groups): the commonest title term shared with other documents.\n"
    ) in out
    written = json.loads((project / "coverage.json").read_text())
    assert written["areas_by"] == BY_TITLE_TERMS
    assert sorted(a["name"] for a in written["areas"]) == ["enzyme", "glacier", "telescope"]

    code, out, _ = cli("gold", "plan", "--out", "plan.json")
    assert code == 0
    plan = json.loads((project / "plan.json").read_text())
    assert plan["areas_by"] == BY_TITLE_TERMS
    (scope,) = plan["scopes"]
    assert scope["more"] > 0
    # The untouched subjects first (most uncovered), never a document id.
    assert scope["areas"] == ["glacier", "telescope"]
    assert "recall@5), about: glacier,\n  telescope\n\nAreas group documents by a term of" in out
