"""Drafting questions with the judge (against the local OpenAI-compatible stub), the
review loop driven through its input, and `llm-eval init` in an empty git repo."""

from __future__ import annotations

import io
import json
import random
import re
import shutil
import subprocess
import sys
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

import pytest
import yaml
from conftest import Cli, script

from llm_eval.authoring.corpus_coverage import coverage
from llm_eval.authoring.synthesis import (
    Deduplicator,
    MeaningDeduplicator,
    Target,
    choose_chunks,
    targets,
)
from llm_eval.commands.init import point_workflow, scaffold_text
from llm_eval.corpus import Document
from llm_eval.gate import Power

REPO = Path(__file__).resolve().parents[2]
stub = script("stub_openai")


# --- pure parts -----------------------------------------------------------------------


def test_deduplicator_uses_token_f1() -> None:
    dedupe = Deduplicator(["How do I sort a list?"], 0.7)
    assert dedupe.closest("how do i sort a list") == pytest.approx(1.0)
    assert not dedupe.admit("How do I sort a list!")
    assert dedupe.admit("What does zip do with unequal lengths?")
    assert not dedupe.admit("what does zip do with unequal lengths")  # now remembered
    # 2·|{how, do, i}| / (5 + 5) = 0.6 < 0.7: kept
    assert dedupe.admit("How do I parse json?")


def test_choose_chunks_skips_what_is_covered_and_spreads_over_areas() -> None:
    documents = [Document(f"{a}.f{i}#0", "", "text") for a in ("re", "os", "io") for i in range(4)]
    skip = {"re.f0#0", "re.f1#0", "os.f0#0"}
    chosen = choose_chunks(documents, Target(None, ("re", "os"), 4), skip, random.Random(1))
    ids = [d.doc_id for d in chosen]
    assert len(ids) == 4 and not set(ids) & skip
    assert {i.split(".")[0] for i in ids} == {"re", "os"}  # alternating, io not named
    everything = choose_chunks(documents, Target(None, (), 50), skip, random.Random(1))
    assert len(everything) == len(documents) - len(skip)
    pooled = choose_chunks(documents, Target("t", ("io",), 2, ("os.f3#0",)), (), random.Random(0))
    assert pooled[0].doc_id == "os.f3#0"  # the pool first, then the areas


def power(n: int, drop: float, needed: int) -> Power:
    """What a scope of n questions catches, with a target of 0.1."""
    return Power(n, 0.05, drop, 0.1, needed, "assuming no other query's score changes")


def test_targets_follow_the_plan_in_proportion() -> None:
    from llm_eval.authoring.plan import Need
    from llm_eval.criteria import Gate, Location, Scope

    where = Location("c", 1, "gates[0]")
    gate = Gate("g", "recall@5", 0.5, 0.05, "error", Scope(), where, where)
    needs = [
        Need(gate, Scope(tier="A"), 10, power(10, 0.2, 40), 40, ("re",)),  # 30 more
        Need(gate, Scope(tags=("x",)), 10, power(10, 0.2, 20), 20, ("os",)),  # 10 more
        Need(gate, Scope(tags=("y",)), 50, power(50, 0.05, 20), 20, ("io",)),  # none
    ]
    found = coverage([Document("re.a#0", "", "t")], [], {})
    split = targets(needs, found, 8, None)
    assert [(t.tag, t.areas, t.count) for t in split] == [(None, ("re",), 6), ("x", ("os",), 2)]
    assert sum(t.count for t in targets(needs, found, 7, None)) == 7


# --- against the stub -------------------------------------------------------------------


def _judged_by(url: str) -> None:
    """judged.yaml in the working directory: the demo's judged example asking `url`,
    writing to `.out`."""
    config = yaml.safe_load(Path("config/examples/judged.yaml").read_text())
    config["judge"]["base_url"] = url
    config["output"] = ".out"
    Path("judged.yaml").write_text(yaml.safe_dump(config))


@pytest.fixture
def project(demo_project: Path, demo_indexes: Path, demo_powers: Path) -> Any:
    """A copy of the demo whose judge is the stub, in a temporary folder, with the BM25
    index of its settings (the demo's) and the power figures of its gates in its cache."""
    shutil.copytree(demo_indexes, demo_project / ".out" / "cache")
    shutil.copytree(demo_powers, demo_project / ".out" / "cache" / "power")
    with stub.serve() as server:
        _judged_by(server.url)
        yield server


def _lines(path: Path) -> list[dict[str, Any]]:
    return [json.loads(line) for line in path.read_text().splitlines()]


def test_synthesize_drafts_unreviewed_candidates_and_costs_nothing_again(
    project: Any, cli: Cli
) -> None:
    args = ["gold", "synthesize", "--config", "judged.yaml", "--n", "6", "--rejection", "2"]
    code, out, _ = cli(*args, "--dry-run")
    assert code == 0
    assert "8 calls (0 answered from the cache)" in out
    assert project.requests == []  # a dry run asks nothing
    code, _, err = cli(*args, "--max-cost", "0.000001")
    assert code == 3
    assert "more than --max-cost" in err
    assert project.requests == []
    code, out, _ = cli(*args)
    assert code == 0
    candidates = _lines(Path(".out/candidates.jsonl"))
    drafted = [c for c in candidates if "relevant" in c]
    rejection = [c for c in candidates if c.get("is_rejection")]
    assert len(drafted) == 6 and len(rejection) == 2
    for c in candidates:
        assert c["tier"] == "candidate" and c["source"] == "synthetic" and c["reviewed"] is False
    assert {c["prompt_version"] for c in drafted} == {"question_writing@1"}
    assert {c["prompt_version"] for c in rejection} == {"off_corpus_question@1"}
    # Each question was written from the chunk it labels, and no chunk was near a question.
    coverage_json = Path(".out/coverage.json")
    assert cli("gold", "coverage", "--config", "judged.yaml", "--out", coverage_json)[0] == 0
    written_from = {next(iter(c["relevant"])) for c in drafted}
    asked = [r for r in project.requests if "question_writing" in json.dumps(r)]
    assert len(asked) == 6
    for request in asked:
        passage = request["messages"][1]["content"]
        assert any(doc in passage or doc.split("#")[0] in passage for doc in written_from)
    checks = [r for r in project.requests if "chunk_relevance" in json.dumps(r)]
    assert len(checks) == 2 * 5  # each rejection question against the top 5 BM25 results
    assert "8 candidates written" in out.replace("\n", " ")
    # The next command names the config the draft was made with.
    assert (
        "llm-eval gold review .out/candidates.jsonl --tier A --config judged.yaml"
        in out.replace("\n", " ")
    )
    # The same draft with a fresh candidates file is answered from the call cache.
    project.requests.clear()
    assert cli(*args, "--out", "again.jsonl")[0] == 0
    assert project.requests == []
    assert _lines(Path("again.jsonl")) == candidates


def test_synthesize_drops_near_duplicates_and_needs_a_judge(project: Any, cli: Cli) -> None:
    args = ["gold", "synthesize", "--config", "judged.yaml", "--n", "4"]
    code, out, _ = cli(*args, "--max-overlap", "0.2")
    assert code == 0  # the stub's questions share words
    assert "dropped as near-duplicates (token F1 >= 0.2)" in out.replace("\n", " ")
    code, _, err = cli("gold", "synthesize", "--n", "2")
    assert code == 3  # the demo config has no judge
    assert "add a `judge:` section" in err
    assert cli(*args, "--tag", "nope")[0] == 3


def test_a_failing_judge_stops_synthesize(project: Any, cli: Cli) -> None:
    project.faults.extend([stub.Fault(status=400)] * 3)
    code, _, err = cli("gold", "synthesize", "--config", "judged.yaml", "--n", "3")
    assert code == 4
    assert err == (
        "llm-eval: error: the judge failed on 3 of 3 calls (more than max_error_rate 0%): "
        "3 http 400; 0 candidates were not written\n"
    )
    not_json = json.dumps({"choices": [{"message": {"content": "I cannot help with that."}}]})
    project.faults.extend([stub.Fault(status=200, body=not_json.encode())] * 3)
    code, _, err = cli("gold", "synthesize", "--config", "judged.yaml", "--n", "3")
    assert code == 4
    assert err.startswith(
        "llm-eval: error: the judge failed on 3 of 3 calls (more than max_error_rate 0%): "
        "3 unreadable answer; the cause: 3 of 3 calls: unreadable answer: "
    )
    assert not Path(".out/candidates.jsonl").exists()


@pytest.fixture
def review(
    monkeypatch: pytest.MonkeyPatch, cli: Cli
) -> Callable[..., subprocess.CompletedProcess[str]]:
    """`llm-eval gold review ARGS` answered from a text, as through a pipe."""

    def run(stdin: str, *args: str) -> subprocess.CompletedProcess[str]:
        monkeypatch.setattr(sys, "stdin", io.StringIO(stdin))
        code, out, err = cli("gold", "review", *args)
        return subprocess.CompletedProcess(args, code, out, err)

    return run


def test_synthesize_then_review_adds_reviewed_questions_that_gate(
    project: Any,
    cli: Cli,
    review: Callable[..., subprocess.CompletedProcess[str]],
) -> None:
    args = ["gold", "synthesize", "--config", "judged.yaml", "--n", "4", "--rejection", "1"]
    assert cli(*args)[0] == 0
    candidates = _lines(Path(".out/candidates.jsonl"))
    target = [".out/candidates.jsonl", "--config", "judged.yaml", "--tier", "A"]
    # accept; edit then accept; quit (the rest stays for later)
    first = review("a\ne\nHow do I tell two versions apart?\nt\nhowto\na\nq\n", *target)
    assert first.returncode == 0, first.stderr
    assert "Accepted 2 into gold/python-docs-A.jsonl" in first.stdout.replace("\n", " ")
    gold_a = _lines(Path("gold/python-docs-A.jsonl"))
    added = gold_a[-2:]
    assert [q["query_id"] for q in added] == [c["query_id"] for c in candidates[:2]]
    assert added[0]["reviewed"] is True and added[0]["tier"] == "A"
    assert added[1]["query"] == "How do I tell two versions apart?" and added[1]["tags"] == [
        "howto"
    ]
    # Resumed: starts at the third; relabel to the second document shown, accept; reject
    # the next; the input ends (Ctrl-D) and the rest waits.
    second = review("l\n2\na\nr\n", *target)
    assert second.returncode == 0, second.stderr
    assert "2 decided before" in second.stdout
    relabelled = _lines(Path("gold/python-docs-A.jsonl"))[-1]
    assert relabelled["query_id"] == candidates[2]["query_id"]
    assert list(relabelled["relevant"]) != list(candidates[2]["relevant"])
    decisions = _lines(Path(".out/candidates.jsonl.review.jsonl"))
    assert [d["decision"] for d in decisions] == ["accepted", "accepted", "accepted", "rejected"]
    # The reviewed questions pass validation in the gating tier and the gate reads them.
    assert cli("gold", "validate", "--baseline", "none")[0] == 0
    code, out, _ = cli("gate", "--allow-gold-change", "--format", "json")
    assert code in (0, 1)
    report = json.loads(out)
    before = sum((REPO / "gold" / f"python-docs-{t}.jsonl").read_text().count("\n") for t in "AB")
    assert report["queries"]["gold"] == before + 3  # the three accepted are read
    added_ids = {q["query_id"] for q in _lines(Path("gold/python-docs-A.jsonl"))[-3:]}
    assert set(report["gold_changes"]["added"]) == added_ids


def concurrent_synthesize(runs: int, into: str) -> list[subprocess.CompletedProcess[str]]:
    """`runs` `gold synthesize` processes started at once, writing into one file; seeds
    0 and 1 in turn, so that some runs ask the same questions and some do not."""
    args = ["gold", "synthesize", "--config", "judged.yaml", "--n", "3", "--rejection", "1"]
    started = [
        subprocess.Popen(
            [sys.executable, "-m", "llm_eval.cli", *args, "--seed", str(i % 2), "--out", into],
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )
        for i in range(runs)
    ]
    done = []
    for process in started:
        out, err = process.communicate(timeout=1800)  # a guard against a hang, not a measure
        done.append(subprocess.CompletedProcess(process.args, process.returncode, out, err))
    return done


def test_concurrent_synthesize_runs_into_one_file_leave_unique_ids(
    project: Any, review: Callable[..., subprocess.CompletedProcess[str]]
) -> None:
    """Each run appends under the candidates file's lock, and leaves out the questions
    another run wrote since it read the file (an id is its question's digest)."""
    done = concurrent_synthesize(4, "shared.jsonl")
    assert [d.returncode for d in done] == [0] * 4, [d.stderr[-500:] for d in done]
    assert not any("Traceback" in d.stderr for d in done)
    ids = [c["query_id"] for c in _lines(Path("shared.jsonl"))]
    assert len(ids) == len(set(ids)) > 0
    result = review("q\n", "shared.jsonl", "--config", "judged.yaml", "--tier", "A")
    assert (result.returncode, result.stderr) == (0, "")


def test_review_refuses_candidates_with_duplicate_ids_naming_the_lines(
    project: Any, review: Callable[..., subprocess.CompletedProcess[str]]
) -> None:
    line = {"query": "How do I sort?", "relevant": {"sorting-howto#0": 1}, "tier": "candidate"}
    rows = [{"query_id": "syn-1", **line}, {"query_id": "syn-2", **line}]
    rows.append({"query_id": "syn-1", **line, "query": "How do I sort a list?"})
    Path("c.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows))
    result = review("a\n", "c.jsonl", "--config", "judged.yaml", "--tier", "A")
    assert (result.returncode, result.stdout) == (3, "")
    assert result.stderr == (
        "llm-eval: error: c.jsonl:3: query_id: duplicate query_id 'syn-1' (first at line 1)\n"
    )
    assert not Path("c.jsonl.review.jsonl").exists()


def test_review_refuses_an_unclear_target(
    project: Any, review: Callable[..., subprocess.CompletedProcess[str]]
) -> None:
    Path("c.jsonl").write_text("")
    result = review("", "c.jsonl", "--config", "judged.yaml")
    assert result.returncode == 3
    assert "--tier TIER or --to FILE" in result.stderr


# --- init -------------------------------------------------------------------------------


def test_init_in_an_empty_git_repo_gives_a_setup_whose_gate_runs(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, cli: Cli
) -> None:
    subprocess.run(["git", "init", "-q", str(tmp_path)], check=True)
    monkeypatch.chdir(tmp_path)
    source = "acme/llm-eval@" + "0" * 40
    code, out, err = cli("init", "--source", source)
    assert code == 0, err
    # on day one, in one line, what the starter gold set can see, as gold stats says it
    sight = (
        "12 gated questions catch a drop of 61.9 pp in recall@5 (tier A) 4 times in 5; "
        "`llm-eval gold plan` says how many see its 5.0 pp limit."
    )
    assert sight in " ".join(out.split())
    assert "with 12 queries, a drop of 61.9 pp is caught 4 times in 5" in " ".join(
        cli("gold", "stats")[1].split()
    )
    # The count it says is the count it lists, and each listed file is there.
    head, *rest = out.split("\n\n", 1)[0].splitlines()
    listed = [line.split(" (")[0].strip() for line in rest]
    assert head.startswith(f"Wrote {len(listed)} files and gold/baseline.json in ")
    assert all((tmp_path / name).is_file() for name in listed) and ".gitignore" in listed
    assert (tmp_path / "gold" / "baseline.json").is_file()
    assert ".llm-eval/" in (tmp_path / ".gitignore").read_text()
    code, out, err = cli("gate")
    assert code == 0, out + err
    assert "PASS" in out
    assert cli("gold", "validate")[0] == 0
    # plan keeps BM25 over `gold/corpus.jsonl` for the life of its process: this corpus,
    # not the demo's, gets a process of its own.
    plan = subprocess.run([sys.executable, "-m", "llm_eval.cli", "gold", "plan"], check=False)
    assert plan.returncode == 0
    code, _, err = cli("init")
    assert code == 3 and "already exist" in err
    # the first refresh of a baseline says it too; a later one does not
    (tmp_path / "gold" / "baseline.json").unlink()
    code, out, err = cli("baseline", "refresh")
    assert code == 0, err
    assert out.endswith(
        "\n\n12 gated questions catch a drop of 61.9 pp in recall@5 (tier A) 4 times in 5;\n"
        "`llm-eval gold plan` says how many see its 5.0 pp limit.\n"
    )
    code, out, err = cli("baseline", "refresh", "--force")
    assert code == 0 and "gated questions" not in out, out + err
    lint = subprocess.run(
        [str(Path(sys.executable).parent / "actionlint"), "-no-color", "-oneline"],
        cwd=tmp_path,
        capture_output=True,
        text=True,
        check=False,
    )
    assert lint.returncode == 0, lint.stdout
    workflow = (tmp_path / ".github" / "workflows" / "retrieval-gate.yml").read_text()
    assert f"uses: {source}" in workflow and "uses: ./" not in workflow
    comment = (tmp_path / ".github" / "workflows" / "retrieval-gate-comment.yml").read_text()
    assert "llm-eval.git@" + "0" * 40 in comment and "--quiet .\n" not in comment


def test_the_starter_criteria_can_judge_every_scope_of_the_starter_gold_set() -> None:
    """min_n is no more than the questions each starter gate scores: the first pull
    request of a new team is judged, not met with "cannot tell" for want of questions."""
    from llm_eval.authoring.plan import scored_ids
    from llm_eval.criteria_io import load_criteria
    from llm_eval.gold import GoldSource
    from llm_eval.gold_io import load_gold

    scaffold = REPO / "llm_eval" / "scaffold"
    criteria = load_criteria(scaffold / "ship-criteria.yaml")
    queries = load_gold([GoldSource(str(scaffold / "gold-A.jsonl"), "A")]).queries
    assert len(queries) == 14
    for gate in criteria.gates:
        scored = scored_ids(queries, gate.scope, gate.metric)
        assert gate.statistics.min_n <= len(scored) == 12, gate.name


def test_the_scaffold_workflows_are_this_repositorys() -> None:
    for name in (
        "retrieval-gate.yml",
        "retrieval-gate-comment.yml",
        "baseline-refresh.yml",
        "dashboard.yml",
    ):
        ours = (REPO / ".github" / "workflows" / name).read_text()
        assert scaffold_text(f"workflows/{name}") == ours
        assert point_workflow(ours, "a/b@c") != ours  # every one is pointed at the source


SYNONYMS = {
    **{"sort": "order", "order": "order", "list": "seq", "sequence": "seq", "reverse": "back"},
    **{"socket": "net", "timeout": "wait"},
}


def _concepts(texts: Sequence[str]) -> list[list[float]]:
    """A deterministic stand-in for an embedding model: one axis per concept, synonyms
    on the same axis, so a paraphrase is close in meaning while sharing few words."""
    axes = sorted(set(SYNONYMS.values()))
    return [
        [
            float(sum(SYNONYMS.get(w) == axis for w in re.findall("[a-z]+", text.lower())))
            for axis in axes
        ]
        for text in texts
    ]


def test_a_paraphrase_sharing_few_words_is_caught_by_meaning_not_by_token_f1() -> None:
    known = ["How do I sort a list in reverse?"]
    paraphrase = "Order a sequence backwards, reverse it"
    assert Deduplicator(known, 0.7).admit(paraphrase)  # few shared words: let through
    meaning = MeaningDeduplicator(known, 0.9, _concepts)
    assert meaning.closest(paraphrase) == pytest.approx(1.0)
    assert not meaning.admit(paraphrase)
    assert meaning.admit("What is a socket timeout?")  # far from every known one
    assert not meaning.admit("socket timeout, what is it?")  # now remembered itself


def test_with_embeddings_synthesize_drops_paraphrases_and_says_so(project: Any, cli: Cli) -> None:
    """The stub's embeddings behind `embeddings:`; at a limit every drafted question
    reaches, each one is dropped as a paraphrase, and the summary says how many."""
    config = yaml.safe_load(Path("judged.yaml").read_text())
    config["embeddings"] = {"base_url": config["judge"]["base_url"], "model": "stub-embed"}
    Path("judged.yaml").write_text(yaml.safe_dump(config))
    args = ["gold", "synthesize", "--config", "judged.yaml", "--n", "3"]
    code, out, _ = cli(*args, "--max-similarity", "-0.999")
    assert code == 0
    out = out.replace("\n", " ")
    assert "3 dropped as paraphrases (embedding cosine >= -0.999)" in out
    assert "0 candidates written" in out
    assert any(r["path"].endswith("/embeddings") for r in project.requests)
    code, out, _ = cli(*args)
    assert code == 0  # at the default limit, the drafts are not paraphrases
    assert "3 candidates written" in out.replace("\n", " ")
