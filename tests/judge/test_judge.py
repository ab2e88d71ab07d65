"""The judge: RAGAS arithmetic by hand, calibration, and a real local OpenAI-compatible
server (scripts/stub_openai.py) for the client, the cache, costs and faults."""

from __future__ import annotations

import json
import re
import shutil
import sys
from pathlib import Path
from typing import Any

import pytest
from conftest import Cli, script

from llm_eval.judged.arithmetic import (
    BadVerdict,
    attributions,
    calibration,
    context_precision,
    score,
    statements,
    verdict,
)

REPO = Path(__file__).resolve().parents[2]
stub = script("stub_openai")


# --- arithmetic --------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("verdicts", "k", "expected"),
    [
        ([1, 0, 1], 3, (1 / 1 + 2 / 3) / 2),  # RAGAS: Σ precision@i · v_i / Σ v_i
        ([0, 1, 1], 3, (1 / 2 + 2 / 3) / 2),
        ([1, 1, 1], 3, 1.0),
        ([0, 0, 0], 3, 0.0),  # no useful chunk: 0, as RAGAS
        ([0, 1, 1, 1], 2, 1 / 2),  # only the top k count
        ([1], 5, 1.0),  # fewer results than k: the missing ranks are not useful
    ],
)
def test_context_precision_by_hand(verdicts: list[int], k: int, expected: float) -> None:
    assert context_precision(verdicts, k) == pytest.approx(expected, abs=1e-12)


def test_statements_are_the_reference_sentences() -> None:
    assert statements("Use sorted(). It returns a new list!  Or sort in place; fine") == [
        "Use sorted().",
        "It returns a new list!",
        "Or sort in place;",
        "fine",
    ]


def test_calibration_by_hand() -> None:
    # judge/gold: 3 both yes, 1 judge-only, 2 gold-only, 4 both no
    pairs = [(1, True)] * 3 + [(1, False)] + [(0, True)] * 2 + [(0, False)] * 4
    got = calibration(pairs)
    assert got is not None
    chance = (4 * 5 + 6 * 5) / 100
    assert (got.n, got.agreement) == (10, 0.7)
    assert got.kappa == pytest.approx((0.7 - chance) / (1 - chance))
    assert (got.precision, got.recall) == (3 / 4, 3 / 5)
    same = calibration([(1, True), (1, True)])
    assert same is not None and same.kappa is None  # chance agreement 1: undefined
    assert calibration([]) is None


@pytest.mark.parametrize(
    ("content", "parse", "expected"),
    [
        ('{"verdict": 1, "reason": "x"}', verdict, 1),
        ('```json\n{"verdict": 0}\n```', verdict, 0),
        ('{"attributed": [1, 0, 1]}', lambda c: attributions(c, 3), [1, 0, 1]),
        ('{"score": 0.75}', score, 0.75),
    ],
)
def test_answers_are_read(content: str, parse: Any, expected: object) -> None:
    assert parse(content) == expected


@pytest.mark.parametrize(
    ("content", "parse"),
    [
        ("yes", verdict),
        ('{"verdict": true}', verdict),
        ('{"verdict": 2}', verdict),
        ('{"attributed": [1, 0]}', lambda c: attributions(c, 3)),
        ('{"score": 1.5}', score),
        ('{"score": NaN}', score),
        ('{"score": 1' + "0" * 399 + "}", score),  # valid JSON, beyond a float's range
        ('{"verdict": ' + "[" * 5000 + "1}", verdict),  # too deep for Python's parser
    ],
)
def test_an_answer_not_in_the_asked_shape_is_refused(content: str, parse: Any) -> None:
    with pytest.raises(BadVerdict):
        parse(content)


# --- a project judged by the stub ------------------------------------------------------

GOLD = [
    {
        "query_id": "q1",
        "query": "how to sort a list of dicts by key",
        "relevant": {"d1": 2},
        "expected_answer": "Use sorted with a key function. The itemgetter builds the key.",
    },
    {
        "query_id": "q2",
        "query": "read a json file",
        "relevant": {"d3": 1},
        "expected_answer": "Open the file and call json load.",
    },
    {"query_id": "q3", "query": "no reference here", "relevant": {"d2": 1}},
]
RUN = [
    {
        "query_id": "q1",
        "results": [
            {"doc_id": "d2", "text": "Unrelated text about sockets."},
            {"doc_id": "d1", "text": "sorted list dicts key: sorted with a key function."},
        ],
    },
    {
        "query_id": "q2",
        "results": [{"doc_id": "d3", "text": "json read file: open the file, call json load."}],
    },
    {"query_id": "q3", "results": [{"doc_id": "d2", "text": "no reference here at all"}]},
]


def write_project(root: Path, url: str, gates: str = "", **judge: object) -> Path:
    (root / "gold.jsonl").write_text("".join(json.dumps(q) + "\n" for q in GOLD))
    (root / "run.jsonl").write_text("".join(json.dumps(r) + "\n" for r in RUN))
    settings = {"base_url": url, "model": "stub", "retries": 2, "backoff_s": 0.01, **judge}
    config = {
        "gold": ["gold.jsonl"],
        "retriever": {"kind": "run", "path": "run.jsonl"},
        "metrics": ["recall@2", "context_precision@2", "context_recall", "context_sufficiency"],
        "top_k": 2,
        "output": "out",
        "judge": settings,
    }
    (root / "llm-eval.yaml").write_text(json.dumps(config))
    gates = gates or "gates:\n  - name: recall\n    metric: recall@2\n    threshold: 0.5\n"
    (root / "criteria.yaml").write_text(gates)
    return root


def gate(cli: Cli, root: Path, monkeypatch: pytest.MonkeyPatch, *args: str) -> tuple[int, str, str]:
    """`llm-eval gate` on the project in `root`: (exit code, stdout, stderr)."""
    monkeypatch.chdir(root)
    monkeypatch.delenv("GITHUB_ACTIONS", raising=False)
    return cli("gate", "--config", "llm-eval.yaml", "--criteria", "criteria.yaml", *args)


def report(root: Path) -> dict[str, Any]:
    return json.loads((root / "out" / "report.json").read_text(encoding="utf-8"))


def overall(root: Path) -> dict[str, Any]:
    entry = next(s for s in report(root)["slices"] if s["kind"] == "overall")
    return {m: v["value"] for m, v in entry["metrics"].items()}


def test_judged_metrics_match_the_rules_and_a_second_run_costs_nothing(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, cli: Cli
) -> None:
    with stub.serve() as server:
        root = write_project(tmp_path, server.url, price_per_1k_input=1.0)
        code, out, _ = gate(cli, root, monkeypatch)
        assert code == 0
        first = len(server.requests)
        assert gate(cli, root, monkeypatch)[0] == 0
        assert len(server.requests) == first  # every answer from the call cache
    # q1: chunk 1 not useful, chunk 2 useful -> (1/2)/1; q2: one useful chunk -> 1.
    # q3 has no reference: unscored, not 0.
    values = overall(root)
    assert values["context_precision@2"] == pytest.approx((0.5 + 1.0) / 2)
    judged = report(root)["judge"]
    assert judged["unscored"] == {"q3": "no expected_answer or reference_passages to judge against"}
    assert (judged["calls"], judged["cached"], judged["failed"]) == (0, first, 0)
    # 2 + 1 chunk calls, and a recall and a sufficiency call for q1 and q2
    assert first == 7
    lines = out.splitlines()
    assert lines[2].startswith("The judge (stub) agrees with your labels on ")
    assert "Judge cost: 7 calls made, 0 answered from the cache, 0 failed;" in out
    assert "Judged (advisory), all queries: context precision@2 0.750," in out


def test_tokens_and_cost_are_the_endpoints_usage_at_the_configured_prices(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, cli: Cli
) -> None:
    with stub.serve() as server:
        root = write_project(tmp_path, server.url, price_per_1k_input=2.0, price_per_1k_output=10.0)
        assert gate(cli, root, monkeypatch)[0] == 0
        prompt_words = sum(
            len(m["content"].split()) for r in server.requests for m in r["messages"]
        )
    judged = report(root)["judge"]
    assert judged["prompt_tokens"] == prompt_words
    expected = (judged["prompt_tokens"] * 2.0 + judged["completion_tokens"] * 10.0) / 1000
    assert judged["cost"] == pytest.approx(expected)


def test_the_calibration_compares_chunk_verdicts_with_the_labels(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, cli: Cli
) -> None:
    with stub.serve() as server:
        assert gate(cli, write_project(tmp_path, server.url), monkeypatch)[0] == 0
    # q1: d2 (not relevant) judged not useful, d1 (relevant) useful; q2: d3 relevant, useful.
    assert report(tmp_path)["judge"]["calibration"] == {
        "chunks": 3,
        "agreement": 1.0,
        "kappa": 1.0,
        "precision": 1.0,
        "recall": 1.0,
    }


def test_the_api_key_is_sent_but_never_cached_or_reported(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, cli: Cli
) -> None:
    monkeypatch.setenv("JUDGE_KEY", "sk-very-secret")
    with stub.serve() as server:
        root = write_project(tmp_path, server.url, api_key="${JUDGE_KEY}")
        assert gate(cli, root, monkeypatch)[0] == 0
        assert set(server.authorizations) == {"Bearer sk-very-secret"}
    written = [p.read_text(errors="replace") for p in (root / "out").rglob("*") if p.is_file()]
    assert written and not any("sk-very-secret" in text for text in written)


def test_retries_follow_retry_after_and_5xx(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, cli: Cli
) -> None:
    faults = [stub.Fault(429, headers={"Retry-After": "0"}), stub.Fault(503)]
    with stub.serve(stub.StubOpenAI(faults=faults)) as server:
        assert gate(cli, write_project(tmp_path, server.url), monkeypatch)[0] == 0
        assert len(server.authorizations) == 7 + 2  # two failed attempts, then answers
    assert report(tmp_path)["judge"]["failed"] == 0


@pytest.mark.parametrize(
    ("fault", "reason"),
    [
        (stub.Fault(200, body=b"not json"), "judge call failed: malformed answer"),
        (stub.Fault(400), "judge call failed: http 400"),
        (
            stub.Fault(200, body=b'{"choices": [{"message": {"content": "maybe"}}]}'),
            "judge answer unreadable: no JSON object in the answer",
        ),
    ],
)
def test_a_failed_call_leaves_its_query_unscored_never_zero(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, fault: Any, reason: str, cli: Cli
) -> None:
    with stub.serve(stub.StubOpenAI(faults=[fault])) as server:
        root = write_project(tmp_path, server.url, max_error_rate=0.5, concurrency=1)
        assert gate(cli, root, monkeypatch)[0] == 0
    judged = report(root)["judge"]
    (query_id,) = [q for q, why in judged["unscored"].items() if q != "q3"]
    assert judged["unscored"][query_id].startswith(reason)
    rows = overall(root)
    # The other answered query alone makes the judged means: nothing scored 0 in its place.
    assert rows["context_precision@2"] in (0.5, 1.0)


def test_more_failures_than_max_error_rate_stop_the_run(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, cli: Cli
) -> None:
    with stub.serve(stub.StubOpenAI(faults=[stub.Fault(400)] * 7)) as server:
        code, _, err = gate(cli, write_project(tmp_path, server.url), monkeypatch)
    assert code == 4
    assert "the judge failed on 7 of 7 calls (more than max_error_rate 0%): http 400" in err


def test_a_timeout_is_a_failure_after_retries(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, cli: Cli
) -> None:
    slow = [stub.Fault(200, delay_s=0.5)] * 3
    with stub.serve(stub.StubOpenAI(faults=slow)) as server:
        root = write_project(tmp_path, server.url, timeout_s=0.1, concurrency=1, max_error_rate=1)
        assert gate(cli, root, monkeypatch)[0] == 0
    assert "judge call failed: timeout" in report(root)["judge"]["unscored"].values()


@pytest.mark.parametrize(
    ("config", "criteria", "message"),
    [
        (
            {"judge": None},
            "",
            "llm-eval.yaml:1: metrics: context_precision@2 is judged by a model; add `judge:` "
            "(base_url, model) to llm-eval.yaml",
        ),
        (
            {},
            "gates:\n  - name: cr\n    metric: context_recall\n    threshold: 0.5\n",
            "criteria.yaml:3: gates[0].metric: context_recall is judged by a model, so it only "
            "reports; write `judged: true` in this gate to let it block the merge",
        ),
    ],
)
def test_judged_metrics_need_a_judge_and_gates_on_them_opt_in(
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    cli: Cli,
    config: dict[str, Any],
    criteria: str,
    message: str,
) -> None:
    root = write_project(tmp_path, "http://127.0.0.1:9/v1", criteria)
    settings = json.loads((root / "llm-eval.yaml").read_text())
    settings.update(config)
    if settings.get("judge") is None:
        settings.pop("judge")
    (root / "llm-eval.yaml").write_text(json.dumps(settings))
    code, _, err = gate(cli, root, monkeypatch)
    assert code == 3
    assert err == f"llm-eval: error: {message}\n"


def test_a_gate_that_opts_in_blocks_on_a_judged_metric(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, cli: Cli
) -> None:
    criteria = (
        "gates:\n  - name: sufficiency\n    metric: context_sufficiency\n    threshold: 0.99\n"
        "    judged: true\n"
    )
    with stub.serve() as server:
        code, out, _ = gate(cli, write_project(tmp_path, server.url, criteria), monkeypatch)
    assert code == 1
    assert "context sufficiency" in out


def test_dry_run_and_max_cost_ask_nothing(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, cli: Cli
) -> None:
    with stub.serve() as server:
        root = write_project(tmp_path, server.url, price_per_1k_input=1.0)
        code, out, _ = gate(cli, root, monkeypatch, "--dry-run")
        assert code == 0
        assert out.startswith("llm-eval gate --dry-run: the judge would be asked 7 of 7 calls")
        code, _, err = gate(cli, root, monkeypatch, "--max-cost", "0.0001")
        assert code == 3
        assert "more than --max-cost 0.0001; nothing was asked" in err
        assert server.authorizations == []  # not one request
        assert not (root / "out" / "report.json").exists()
        assert gate(cli, root, monkeypatch)[0] == 0
        code, out, _ = gate(cli, root, monkeypatch, "--dry-run")
        assert code == 0
        said = " ".join(out.split())
        assert "asked 0 of 7 calls (7 are answered by the call cache)" in said


def test_repeats_report_spread_and_flipped_verdicts(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, cli: Cli
) -> None:
    with stub.serve(stub.StubOpenAI(flaky=True)) as server:
        root = write_project(tmp_path, server.url, concurrency=1)
        code, out, _ = gate(cli, root, monkeypatch, "--judge-repeat", "2")
        assert code == 0
        assert len(server.requests) == 14  # every call twice: each repeat its own entry
    judged = report(root)["judge"]
    # Three chunk verdicts, asked twice each; every second ask is turned around.
    assert judged["repeats"] == 2
    assert judged["flips_count"] == 3
    assert judged["calibration"]["chunks"] == 3  # each chunk once, however often it is asked
    assert judged["spread"]["context_precision@2"] > 0
    assert "Judge steadiness over 2 repeats: mean range context precision@2" in out


def test_a_steady_judge_has_no_spread(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, cli: Cli
) -> None:
    with stub.serve() as server:
        assert (
            gate(cli, write_project(tmp_path, server.url), monkeypatch, "--judge-repeat", "3")[0]
            == 0
        )
    judged = report(tmp_path)["judge"]
    assert (judged["flips_count"], set(judged["spread"].values())) == (0, {0.0})


def with_answers(root: Path, url: str, metrics: list[str], **config: object) -> Path:
    """The project with an answer in q1's run line and the given judged metrics."""
    lines = [json.loads(line) for line in (root / "run.jsonl").read_text().splitlines()]
    lines[0]["answer"] = "Use sorted with a key function. Sockets are fast."
    (root / "run.jsonl").write_text("".join(json.dumps(r) + "\n" for r in lines))
    settings = json.loads((root / "llm-eval.yaml").read_text())
    settings["metrics"] = ["recall@2", *metrics]
    settings.update(config)
    (root / "llm-eval.yaml").write_text(json.dumps(settings))
    return root


def relevance_project(tmp_path: Path, url: str, **embeddings: object) -> Path:
    """A project judging answer relevance, its chat and embeddings both from the stub at
    `url` (`embeddings` adds to or overrides the embeddings settings)."""
    settings = {"base_url": url, "model": "stub-embed", **embeddings}
    return with_answers(
        write_project(tmp_path, url), url, ["answer_relevance"], embeddings=settings
    )


def test_faithfulness_is_the_share_of_answer_statements_the_context_supports(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, cli: Cli
) -> None:
    with stub.serve() as server:
        root = with_answers(write_project(tmp_path, server.url), server.url, ["faithfulness"])
        assert gate(cli, root, monkeypatch)[0] == 0
    # "Use sorted with a key function." has 3 of its 4 words in q1's context: supported;
    # "Sockets are fast." has 1 of 3: not. Only q1 has an answer.
    assert overall(root)["faithfulness"] == 0.5
    unscored = report(root)["judge"]["unscored"]
    assert unscored["q2"] == "the run has no answer to judge"


def test_a_blank_answer_is_no_answer(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, cli: Cli
) -> None:
    with stub.serve() as server:
        root = with_answers(write_project(tmp_path, server.url), server.url, ["faithfulness"])
        lines = (root / "run.jsonl").read_text().replace('"Use sorted', '"  ", "x": "Use sorted')
        (root / "run.jsonl").write_text(lines)
        assert gate(cli, root, monkeypatch)[0] == 0
    assert report(root)["judge"]["unscored"]["q1"] == "the run has no answer to judge"


def test_answer_relevance_is_the_mean_cosine_to_the_generated_questions(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, cli: Cli
) -> None:
    np = pytest.importorskip("numpy")
    with stub.serve() as server:
        root = relevance_project(tmp_path, server.url, batch_size=2)
        assert gate(cli, root, monkeypatch)[0] == 0
        embedded = [r for r in server.requests if r["path"].endswith("/embeddings")]
        assert gate(cli, root, monkeypatch)[0] == 0
        assert [r for r in server.requests if r["path"].endswith("/embeddings")] == embedded
    answer = "Use sorted with a key function. Sockets are fast."
    generated = stub.judge(f"task: question_generation\n<answer>\n{answer}\n</answer>")
    question = np.array(stub.embed(GOLD[0]["query"]))
    cosines = [float(question @ np.array(stub.embed(g))) for g in generated["questions"]]
    assert overall(root)["answer_relevance"] == pytest.approx(sum(cosines) / len(cosines))
    # The question of q1 (the one query with an answer) and its 3 generated ones,
    # embedded 2 a request on the first run; the second run (whose report this is)
    # found all 4 vectors in the cache.
    assert len(embedded) == 2
    assert report(root)["judge"]["embeddings"] == {
        "calls": 0,
        "cached": 4,
        "tokens": 0,
        "pooled": 0,
    }


def test_answer_relevance_needs_embeddings(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, cli: Cli
) -> None:
    root = with_answers(write_project(tmp_path, "http://127.0.0.1:9/v1"), "", ["answer_relevance"])
    code, _, err = gate(cli, root, monkeypatch)
    assert code == 3
    assert err == (
        "llm-eval: error: llm-eval.yaml:1: metrics: answer_relevance compares embeddings; add "
        "`embeddings:` (base_url and model, or model_path) to llm-eval.yaml\n"
    )


def test_the_answer_field_of_a_run_must_be_text(tmp_path: Path) -> None:
    from llm_eval.errors import InputError
    from llm_eval.runs_io import load_run

    path = tmp_path / "run.jsonl"
    path.write_text('{"query_id": "q", "results": [], "answer": 3}\n')
    with pytest.raises(InputError) as raised:
        load_run(path)
    assert str(raised.value) == f"{path}:1: answer: must be the generated answer as text, got 3"


def test_the_judged_guide_shows_the_real_judged_demo_output(
    demo_project: Path,
    demo_indexes: Path,
    monkeypatch: pytest.MonkeyPatch,
    cli: Cli,
) -> None:
    shutil.copytree(demo_indexes, demo_project / ".llm-eval" / "judged" / "cache")
    command = "$ llm-eval gate --config config/examples/judged.yaml\n"
    readme = (REPO / "docs" / "how-to" / "judged-diagnostics.md").read_text()
    start = readme.index(command) + len(command)
    shown = readme[start : readme.index("```", start)]
    example = demo_project / "config" / "examples" / "judged.yaml"
    monkeypatch.setenv("COLUMNS", "80")
    assert "base_url: http://127.0.0.1:${JUDGE_PORT:-8765}/v1" in example.read_text()
    with stub.serve() as server:
        # The example reads its port from the environment: no file is edited.
        monkeypatch.setenv("JUDGE_PORT", server.url.split(":")[2].split("/")[0])
        code, out, _ = cli("gate", "--config", "config/examples/judged.yaml")
        assert code == 0
        assert out == shown, "stale: run python scripts/render_examples.py"
        asked = len(server.requests)
        code, out, _ = cli("gate", "--config", "config/examples/judged.yaml")
        assert code == 0
        assert len(server.requests) == asked
    assert "0 calls made, 2,282 answered from the cache" in out
    assert "Run again, the judge line reads `0 calls made, 2,282 answered from the cache`" in readme


@pytest.mark.parametrize(
    ("judge", "message"),
    [
        ({"model": "m"}, "llm-eval.yaml:1: judge: missing required key 'base_url'"),
        (
            {"base_url": "ftp://x", "model": "m"},
            "llm-eval.yaml:1: judge.base_url: must be an http:// or https:// URL, got 'ftp://x'",
        ),
        (
            {"base_url": "http://h/v1", "model": "m", "temprature": 0},
            "llm-eval.yaml:1: judge.temprature: unknown key (valid keys: api_key, backoff_s, "
            "base_url, concurrency, max_answer_bytes, max_backoff_s, max_error_rate, "
            "max_tokens, model, price_per_1k_input, price_per_1k_output, response_format, "
            "retries, seed, "
            "temperature, timeout_s)",
        ),
        (
            {"base_url": "http://h/v1", "model": "m", "price_per_1k_input": -1},
            "llm-eval.yaml:1: judge.price_per_1k_input: must be a number >= 0, got -1",
        ),
    ],
)
def test_bad_judge_settings_name_the_key(
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    cli: Cli,
    judge: dict[str, Any],
    message: str,
) -> None:
    root = write_project(tmp_path, "http://127.0.0.1:9/v1")
    settings = json.loads((root / "llm-eval.yaml").read_text())
    settings["judge"] = judge
    (root / "llm-eval.yaml").write_text(json.dumps(settings))
    code, _, err = gate(cli, root, monkeypatch)
    assert code == 3
    assert err == f"llm-eval: error: {message}\n"


def test_the_stub_binds_a_free_port_with_port_0_and_prints_it() -> None:
    import socket
    import subprocess
    import urllib.request

    script = [sys.executable, str(REPO / "scripts" / "stub_openai.py")]
    with subprocess.Popen([*script, "--port", "0"], stdout=subprocess.PIPE, text=True) as server:
        try:
            assert server.stdout is not None
            line = server.stdout.readline()
            match = re.fullmatch(
                r"stub OpenAI-compatible server at (http://127\.0\.0\.1:(\d+)/v1) "
                r"\(port (\d+); Ctrl-C stops it\)\n",
                line,
            )
            assert match is not None, line
            assert match[2] == match[3] != "0"
            request = urllib.request.Request(
                match[1] + "/embeddings",
                data=json.dumps({"model": "m", "input": ["a b c"]}).encode(),
                headers={"Content-Type": "application/json"},
            )
            with urllib.request.urlopen(request, timeout=30) as answer:
                assert len(json.load(answer)["data"][0]["embedding"]) == 64
        finally:
            server.terminate()
    # A busy port: one line saying so and what to do, exit 2 (not a traceback).
    with socket.socket() as busy:
        busy.bind(("127.0.0.1", 0))
        busy.listen()
        port = busy.getsockname()[1]
        done = subprocess.run(
            [*script, "--port", str(port)], capture_output=True, text=True, check=False
        )
    assert done.returncode == 2
    assert done.stderr == (
        f"stub_openai: cannot listen on 127.0.0.1:{port}: Address already in use; "
        "pass --port 0 for a free port\n"
    )


def test_the_baseline_is_judged_with_the_gates_repeats_and_a_mismatch_is_reported(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, cli: Cli
) -> None:
    with stub.serve(stub.StubOpenAI(flaky=True)) as server:
        root = write_project(tmp_path, server.url, concurrency=1)
        monkeypatch.chdir(root)
        options = ["--config", "llm-eval.yaml", "--criteria", "criteria.yaml"]
        refresh = ["baseline", "refresh", *options, "--baseline", "base.json"]
        assert cli(*refresh, "--judge-repeat", "2")[0] == 0
        asked = len(server.requests)
        assert asked == 14  # 7 questions, twice each
        assert json.loads((root / "base.json").read_text())["judge_repeats"] == 2
        # The same repeats: every verdict comes from the entries the baseline made, so
        # the judge's noise on unchanged chunks cancels, and nothing is asked.
        assert (
            gate(cli, root, monkeypatch, "--baseline", "base.json", "--judge-repeat", "2")[0] == 0
        )
        assert len(server.requests) == asked
        assert not [n for n in report(root)["notes"] if "repeat" in n]
        assert gate(cli, root, monkeypatch, "--baseline", "base.json")[0] == 0
    notes = [n for n in report(root)["notes"] if "repeat" in n]
    assert notes == [
        "The baseline's judged values are means over 2 repeats, these over 1: on chunks that "
        "did not change the judge's noise does not cancel. Refresh the baseline with "
        "--judge-repeat 1."
    ]


def test_the_dry_run_estimate_tracks_the_tokens_the_endpoint_counts(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, cli: Cli
) -> None:
    """Once some calls are cached, the estimate of the others uses the tokens per
    character the endpoint counted for them (the stub counts words, far from 4
    characters a token): within 15% of what the run then counts."""
    with stub.serve() as server:
        root = write_project(tmp_path, server.url, price_per_1k_input=1.0)
        gold = (root / "gold.jsonl").read_text().splitlines(keepends=True)
        (root / "gold.jsonl").write_text(gold[0])  # q1 alone first: its calls are cached
        assert gate(cli, root, monkeypatch)[0] == 0
        (root / "gold.jsonl").write_text("".join(gold))
        code, out, _ = gate(cli, root, monkeypatch, "--dry-run")
        assert code == 0
        said = " ".join(out.split())
        found = re.search(r"about ([\d,]+) prompt and ([\d,]+) answer tokens", said)
        assert found is not None, said
        assert "as the endpoint counted them on the cached calls" in said
        estimate = sum(int(n.replace(",", "")) for n in found.groups())
        assert gate(cli, root, monkeypatch)[0] == 0
    judged = report(root)["judge"]
    counted = judged["prompt_tokens"] + judged["completion_tokens"]
    assert judged["calls"] == 3  # q2's chunk, recall and sufficiency calls
    assert abs(estimate - counted) <= 0.15 * counted, (estimate, counted)
