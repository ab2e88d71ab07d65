"""`llm-eval gate` on a small hand-made project: pages, passages, rejection, stale context.

Every expected value below is worked out by hand from the files written here.

pages.jsonl (tier A, matched by page: `auto` finds gold_references)
  p1: Handbook.pdf p45 (grade 2), handbook.pdf p80
      1 handbook-v1 Handbook.pdf p46 → ref 0 (1 page off)   stale: superseded_by handbook-v2
      2 handbook-v2 handbook.pdf p47 → nothing (2 pages off)
      3 handbook-v2 HANDBOOK.pdf p81 → ref 1
      4 policy-2023 Policy.pdf p3    → nothing             stale: policy-2024 is newer
      5 policy-2024 Policy.pdf p9    → nothing             conflict with policy-2023
      recall@5 1, MRR 1; 2 stale of 5 positions, a conflict
  p2: Policy.PDF p3, Policy.pdf p5
      1 policy-2024 p9 → nothing
      2 policy-2024 p4 → ref 0 (1 page from both references: ambiguous, the first wins)
      recall@5 1/2, MRR 1/2; 0 stale of 2 positions; the same document twice is no conflict
  r1 (is_rejection): abstains                      → rejected; 0 positions
  r2 (no labels):    one result, score 0.2 < 0.5   → rejected (low score); 1 position

passages.jsonl (tier B, `matching: text`)
  t1: "Paris is the capital of France."
      1 "Lyon lies on the Rhône."  F1 2·1/11 → nothing
      2 "Paris is the capital and most populous city of France…"  F1 0.75 → ref 0
      recall@5 1, MRR 1/2
  t2: "The Eiffel Tower was completed in 1889.", "It is 330 metres tall."
      1 "Bread is sold in bakeries."  F1 1/6 and 1/5 → nothing
      2 "The Eiffel Tower was completed in 1889 for the World's Fair." → ref 0
      recall@5 1/2, MRR 1/2
  r3 (is_rejection): one result, score 3.5 → answered with confidence; 1 position

Overall: recall@5 (1 + 1/2 + 1 + 1/2)/4 = 0.75; MRR (1 + 1/2 + 1/2 + 1/2)/4 = 0.625;
rejection_accuracy 2/3, false_confidence_rate 1/3; stale_rate@5 2/(5+2+0+1+2+2+1) = 2/13;
stale_query_rate@5 and conflict_rate@5 1/7. Tier A: stale_rate@5 2/8, rejection_accuracy 1.
"""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest
from conftest import Cli

GOLD_PAGES = [
    {
        "query_id": "p1",
        "query": "What does the handbook say about travel?",
        "tags": ["pages"],
        "gold_references": [
            {"document": "Handbook.pdf", "page": 45, "relevance": 2},
            {"document": "handbook.pdf", "page": 80},
        ],
    },
    {
        "query_id": "p2",
        "query": "Which expenses does the policy cover?",
        "tags": ["pages"],
        "gold_references": [
            {"document": "Policy.PDF", "page": 3},
            {"document": "Policy.pdf", "page": 5},
        ],
    },
    {
        "query_id": "r1",
        "query": "Who won the 1930 World Cup?",
        "tags": ["rejection"],
        "is_rejection": True,
    },
    {"query_id": "r2", "query": "What is the airspeed of a swallow?", "tags": ["rejection"]},
]
GOLD_PASSAGES = [
    {
        "query_id": "t1",
        "query": "What is the capital of France?",
        "reference_passages": ["Paris is the capital of France."],
    },
    {
        "query_id": "t2",
        "query": "When was the Eiffel Tower built?",
        "reference_passages": ["The Eiffel Tower was completed in 1889.", "It is 330 metres tall."],
    },
    {"query_id": "r3", "query": "What will the weather be tomorrow?", "is_rejection": True},
]
VERSIONS = [
    {"doc_id": "policy-2023", "version_key": "policy", "effective_timestamp": "2023-01-01"},
    {
        "doc_id": "policy-2024",
        "version_key": "policy",
        "effective_timestamp": "2024-01-01T00:00:00Z",
    },
    {"doc_id": "handbook-v1", "superseded_by": "handbook-v2"},
    {"doc_id": "handbook-v2"},
]


def located(doc_id: str, document: str, page: int, score: float) -> dict:
    return {"doc_id": doc_id, "document": document, "page": page, "score": score}


def passage(doc_id: str, text: str, score: float) -> dict:
    return {"doc_id": doc_id, "text": text, "score": score}


RUN = [
    {
        "query_id": "p1",
        "latency_ms": 12.0,
        "results": [
            located("handbook-v1", "Handbook.pdf", 46, 9.0),
            located("handbook-v2", "handbook.pdf", 47, 8.0),
            located("handbook-v2", "HANDBOOK.pdf", 81, 7.0),
            located("policy-2023", "Policy.pdf", 3, 6.0),
            located("policy-2024", "Policy.pdf", 9, 5.0),
        ],
    },
    {
        "query_id": "p2",
        "results": [
            located("policy-2024", "policy.pdf", 9, 4.0),
            located("policy-2024", "policy.pdf", 4, 3.0),
        ],
    },
    {"query_id": "r1", "results": [], "abstain": True},
    {"query_id": "r2", "results": [passage("misc-1", "Swallows are birds.", 0.2)]},
    {
        "query_id": "t1",
        "results": [
            passage("geo-1", "Lyon lies on the Rhône.", 2.0),
            passage("geo-2", "Paris is the capital and most populous city of France…", 1.5),
        ],
    },
    {
        "query_id": "t2",
        "results": [
            passage("food-1", "Bread is sold in bakeries.", 2.5),
            passage("paris-7", "The Eiffel Tower was completed in 1889 for the World's Fair.", 2.0),
        ],
    },
    {"query_id": "r3", "results": [passage("misc-2", "Rain is likely in spring.", 3.5)]},
]
CONFIG = """\
gold:
  - {path: gold/pages.jsonl, tier: A}
  - {path: gold/passages.jsonl, tier: B, matching: text}
metrics: [recall@5, mrr, rejection_accuracy, false_confidence_rate, stale_rate@5,
          stale_query_rate@5, conflict_rate@5]
top_k: 5
page_tolerance: 1
f1_threshold: 0.3
rejection_score_threshold: 0.5
versions: gold/versions.jsonl
baseline: gold/baseline.json
output: out
"""
CRITERIA = """\
gates:
  - name: retrieval_recall_at_5
    threshold: 0.7
    regression_max: 0.05
  - name: rejection
    metric: rejection_accuracy
    threshold: 0.6
    regression_max: 0.1
  - name: stale_context
    metric: stale_rate@5
    threshold: 0.2
    regression_max: 0.05
  - name: stale_in_tier_a
    metric: stale_rate@5
    threshold: 0.3
    scope: {tier: A}
  - name: conflicts
    metric: conflict_rate@5
    threshold: 0.1
    severity: warning
"""


def write_jsonl(path: Path, records: list[dict]) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text("".join(json.dumps(r) + "\n" for r in records), encoding="utf-8")


@pytest.fixture
def project(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    write_jsonl(tmp_path / "gold" / "pages.jsonl", GOLD_PAGES)
    write_jsonl(tmp_path / "gold" / "passages.jsonl", GOLD_PASSAGES)
    write_jsonl(tmp_path / "gold" / "versions.jsonl", VERSIONS)
    write_jsonl(tmp_path / "run.jsonl", RUN)
    (tmp_path / "config").mkdir()
    (tmp_path / "config" / "llm-eval.yaml").write_text(CONFIG)
    (tmp_path / "config" / "ship-criteria.yaml").write_text(CRITERIA)
    monkeypatch.chdir(tmp_path)
    return tmp_path


def report_of(project: Path) -> dict:
    return json.loads((project / "out" / "report.json").read_text(encoding="utf-8"))


def slice_values(report: dict, name: str) -> dict:
    (entry,) = [s for s in report["slices"] if s["slice"] == name]
    return {"n": entry["n"], **{m: cell["value"] for m, cell in entry["metrics"].items()}}


def test_the_gate_reports_values_worked_by_hand(project: Path, cli: Cli) -> None:
    code, out, _ = cli("gate", "--run", "run.jsonl")
    assert code == 0
    report = report_of(project)
    assert report["verdict"] == "warn"
    gates = {g["name"]: (g["value"], g["n"], g["status"]) for g in report["gates"]}
    assert gates == {
        "retrieval_recall_at_5": (pytest.approx(0.75), 4, "pass"),
        "rejection": (pytest.approx(2 / 3), 3, "pass"),
        "stale_context": (pytest.approx(2 / 13), 7, "pass"),
        "stale_in_tier_a": (pytest.approx(2 / 8), 4, "pass"),
        "conflicts": (pytest.approx(1 / 7), 7, "warn"),
    }
    assert "! conflict rate@5 is 14.3%, above the ceiling 10.0% (warning)" in out
    assert "1 of 3 rejection queries got confident results." in out
    assert "In the top 5: 2 stale documents and 1 conflict (listed in report.json)." in out
    assert "1 result is within the page tolerance of two or more gold references" in out

    assert slice_values(report, "overall") == pytest.approx(
        {
            "n": 7,
            "recall@5": 0.75,
            "mrr": 0.625,
            "rejection_accuracy": 2 / 3,
            "false_confidence_rate": 1 / 3,
            "stale_rate@5": 2 / 13,
            "stale_query_rate@5": 1 / 7,
            "conflict_rate@5": 1 / 7,
        }
    )
    assert slice_values(report, "tier:B") == pytest.approx(
        {
            "n": 3,
            "recall@5": 0.75,
            "mrr": 0.5,
            "rejection_accuracy": 0.0,
            "false_confidence_rate": 1.0,
            "stale_rate@5": 0.0,
            "stale_query_rate@5": 0.0,
            "conflict_rate@5": 0.0,
        }
    )
    # A tag of rejection queries only is reported: it has rejection and context values.
    assert slice_values(report, "tag:rejection") == pytest.approx(
        {
            "n": 2,
            "recall@5": None,
            "mrr": None,
            "rejection_accuracy": 1.0,
            "false_confidence_rate": 0.0,
            "stale_rate@5": 0.0,
            "stale_query_rate@5": 0.0,
            "conflict_rate@5": 0.0,
        }
    )
    (overall,) = [s for s in report["slices"] if s["slice"] == "overall"]
    counts = {m: cell["n"] for m, cell in overall["metrics"].items()}
    assert counts == {
        "recall@5": 4,
        "mrr": 4,
        "rejection_accuracy": 3,
        "false_confidence_rate": 3,
        "stale_rate@5": 7,
        "stale_query_rate@5": 7,
        "conflict_rate@5": 7,
    }
    assert report["metric_labels"]["stale_rate@5"] == "stale rate@5"
    assert report["queries"]["evaluated"] == 4
    assert report["queries"]["rejection"] == 3

    assert report["matching"] == {
        "page_tolerance": 1,
        "f1_threshold": 0.3,
        "by_matcher": {
            "page": {"queries": 2, "credited": 3},
            "text": {"queries": 2, "credited": 2},
        },
        "matched_by": {"p1": "page", "p2": "page", "t1": "text", "t2": "text"},
        "ambiguous_count": 1,
        "ambiguous": [
            {
                "query_id": "p2",
                "rank": 2,
                "document": "policy.pdf",
                "page": 4,
                "references": [
                    {"index": 0, "document": "Policy.PDF", "page": 3},
                    {"index": 1, "document": "Policy.pdf", "page": 5},
                ],
                "credited": 0,
            }
        ],
    }
    assert report["rejections"] == {
        "score_threshold": 0.5,
        "queries": 3,
        "rejected": 2,
        "by_reason": {"abstained": 1, "low score": 1, "confident": 1},
        "not_rejected_count": 1,
        "not_rejected": [
            {
                "query_id": "r3",
                "query": "What will the weather be tomorrow?",
                "reason": "confident",
                "top_score": 3.5,
                "file": "gold/passages.jsonl",
                "line": 3,
            }
        ],
    }
    assert report["context"] == {
        "k": 5,
        "stale_hits_count": 2,
        "stale_hits": [
            {
                "query_id": "p1",
                "rank": 1,
                "doc_id": "handbook-v1",
                "superseded_by": "handbook-v2",
                "reason": "superseded_by",
            },
            {
                "query_id": "p1",
                "rank": 4,
                "doc_id": "policy-2023",
                "superseded_by": "policy-2024",
                "reason": "newer version",
            },
        ],
        "conflicts_count": 1,
        "conflicts": [
            {"query_id": "p1", "version_key": "policy", "doc_ids": ["policy-2023", "policy-2024"]}
        ],
    }
    markdown = (project / "out" / "report.md").read_text(encoding="utf-8")
    assert markdown.startswith("## ")
    assert "In the top 5: 2 stale documents and 1 conflict (listed in report.json)." in markdown


def test_a_stale_ceiling_fails_the_gate_with_a_plain_sentence(project: Path, cli: Cli) -> None:
    criteria = project / "config" / "ship-criteria.yaml"
    criteria.write_text(CRITERIA.replace("threshold: 0.2\n", "threshold: 0.1\n"))
    code, out, _ = cli("gate", "--run", "run.jsonl")
    assert code == 1
    assert "✗ stale rate@5 is 15.4%, above the ceiling 10.0%" in out


def test_against_a_baseline_rejection_gates_are_paired_and_pooled_ones_are_not(
    project: Path, cli: Cli
) -> None:
    assert cli("baseline", "refresh", "--run", "run.jsonl", "--force")[0] == 0
    # Now r3 abstains too, and p1 finds page 46 in the current handbook instead.
    changed = [dict(r) for r in RUN]
    changed[-1] = {"query_id": "r3", "results": [], "abstain": True}
    current = located("handbook-v2", "Handbook.pdf", 46, 9.0)
    changed[0] = {**RUN[0], "results": [current, *RUN[0]["results"][1:]]}
    write_jsonl(project / "changed.jsonl", changed)
    assert cli("gate", "--run", "changed.jsonl")[0] == 0
    report = report_of(project)
    gates = {g["name"]: g for g in report["gates"]}
    rejection = gates["rejection"]
    assert (rejection["baseline"], rejection["value"]) == (pytest.approx(2 / 3), 1.0)
    assert rejection["stats"]["n"] == 3
    assert rejection["stats"]["method"] == "exact-unconditional"
    assert rejection["stats"]["miss_to_hit"] == 1
    stale = gates["stale_context"]
    # p1 now has 1 stale of 5 positions, r3 none: 1/(5+2+0+1+2+2+0) overall.
    assert (stale["baseline"], stale["value"]) == (pytest.approx(2 / 13), pytest.approx(1 / 12))
    assert stale["stats"] is None
    assert (
        "stale rate@5 pools positions over queries: its gates are checked against the "
        "baseline without a paired test or per-tag checks." in report["notes"]
    )
    recall = gates["retrieval_recall_at_5"]
    assert (recall["value"], recall["delta"]) == (pytest.approx(0.75), 0.0)


def test_evaluate_matches_pages_and_passages_too(project: Path, cli: Cli) -> None:
    args = ["evaluate", "--run", "run.jsonl", "-m", "recall@5", "-m", "mrr", "--format", "json"]
    code, out, _ = cli(*args, "--gold", "gold/pages.jsonl", "--gold", "gold/passages.jsonl")
    assert code == 0
    document = json.loads(out)
    assert document["metrics"] == {"recall@5": 0.75, "mrr": 0.625}
    assert document["queries"]["rejection"] == 3


def test_a_bad_sidecar_line_stops_the_gate_with_exit_3(project: Path, cli: Cli) -> None:
    write_jsonl(
        project / "gold" / "versions.jsonl",
        [*VERSIONS, {"doc_id": "x", "effective_timestamp": "soon"}],
    )
    code, _, err = cli("gate", "--run", "run.jsonl")
    assert code == 3
    assert err == (
        "llm-eval: error: gold/versions.jsonl:5: effective_timestamp: must be an ISO 8601 "
        'date or time, got "soon"\n'
    )


def test_the_bundled_example_runs_as_its_readme_says(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, cli: Cli
) -> None:
    """gold/examples holds the data of this module; its command gives the same numbers."""
    repo = Path(__file__).resolve().parents[1]
    shutil.copytree(repo / "gold" / "examples", tmp_path / "gold" / "examples")
    monkeypatch.chdir(tmp_path)
    examples = "gold/examples/"
    args = ["--config", f"{examples}llm-eval.yaml", "--criteria", f"{examples}ship-criteria.yaml"]
    code, out, _ = cli("gate", *args, "--run", f"{examples}run.jsonl")
    assert code == 0
    assert out.startswith("llm-eval gate: WARNING: ")
    report = json.loads((tmp_path / ".llm-eval" / "examples" / "report.json").read_text())
    values = {g["metric"]: g["value"] for g in report["gates"]}
    assert values == pytest.approx(
        {
            "recall@5": 0.75,
            "rejection_accuracy": 2 / 3,
            "stale_rate@5": 2 / 13,
            "conflict_rate@5": 1 / 7,
        }
    )
