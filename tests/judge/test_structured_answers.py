"""Structured answers: `response_format` with each prompt's schema, the step down when an
endpoint refuses it, tolerant reading, per-prompt unreadable shares, and embeddings that
come back one vector per token. Against scripts/stub_openai.py on 127.0.0.1."""

from __future__ import annotations

import math
from pathlib import Path
from typing import Any

import pytest
from conftest import Cli, script
from test_judge import gate, relevance_project, report, write_project

from llm_eval.endpoints.chat import ChatClient, Message
from llm_eval.endpoints.client import EndpointFailed
from llm_eval.endpoints.embeddings import EmbeddingClient, one_vector
from llm_eval.endpoints.settings import (
    EMBEDDING_SETTINGS,
    SETTINGS,
    ChatSettings,
    EmbeddingSettings,
)
from llm_eval.judge.prompts import prompt
from llm_eval.judged.arithmetic import BadVerdict, answer_json, verdict

stub = script("stub_openai")

QUESTION = "task: chunk_relevance\n<question>\nsort a list\n</question>\n<passage>\n"


def chat(url: str, cache: Path | None = None, **settings: Any) -> ChatClient:
    values = {name: s.default for name, s in SETTINGS.items()}
    values |= {"base_url": url, "model": "stub", "concurrency": 1, "backoff_s": 0.01}
    return ChatClient(ChatSettings.create(values | settings), cache)


def ask(client: ChatClient, passage: str) -> str:
    template = prompt("chunk_relevance")
    messages = [Message("system", "judge"), Message("user", f"{QUESTION}{passage}\n</passage>")]
    with client.session() as session:
        return session.ask(template.key, messages, schema=template.schema()).content


def formats(server: Any) -> list[str]:
    """The response_format type of each chat request, in order ('none' without one)."""
    return [
        (r.get("response_format") or {}).get("type", "none")
        for r in server.requests
        if r["path"].endswith("/chat/completions")
    ]


def test_an_endpoint_that_accepts_it_gets_the_prompts_schema_in_openais_shape() -> None:
    with stub.serve() as server:
        assert verdict(ask(chat(server.url), "sort a list with sorted")) == 1
        sent = server.requests[0]["response_format"]
    assert sent == {
        "type": "json_schema",
        "json_schema": {
            "name": "chunk_relevance_2",
            "schema": prompt("chunk_relevance").schema(),
            "strict": True,
        },
    }


@pytest.mark.parametrize(
    ("accepts", "shapes"),
    [
        # llama-cpp-python's server: a 500 naming response_format, then json_object
        (("json_object",), ["json_schema", "json_object", "json_object", "json_object"]),
        # a server that knows no such field: a 400, then the prompt alone
        ((), ["json_schema", "json_object", "none", "none", "none"]),
    ],
)
def test_a_refused_shape_is_asked_once_then_remembered_for_the_endpoint(
    accepts: tuple[str, ...], shapes: list[str]
) -> None:
    with stub.serve(stub.StubOpenAI(accepts=accepts)) as server:
        client = chat(server.url)
        # The refusal is neither retried (its 500 names the field) nor asked again.
        assert verdict(ask(client, "sort a list with sorted")) == 1
        assert verdict(ask(client, "sockets and ports")) == 0
        assert verdict(ask(chat(server.url), "a list to sort")) == 1  # another client
        assert formats(server) == shapes


def test_response_format_false_sends_the_prompt_alone_and_is_cached_apart(
    tmp_path: Path,
) -> None:
    with stub.serve() as server:
        structured = chat(server.url, tmp_path)
        plain = chat(server.url, tmp_path, response_format=False)
        ask(structured, "sort a list with sorted")
        ask(plain, "sort a list with sorted")
        ask(structured, "sort a list with sorted")
        ask(plain, "sort a list with sorted")
        assert formats(server) == ["json_schema", "none"]
    assert (structured.usage.calls, structured.usage.cached) == (1, 1)
    assert (plain.usage.calls, plain.usage.cached) == (1, 1)


def test_a_chatty_answer_is_read_from_its_fence() -> None:
    with stub.serve(stub.StubOpenAI(chatty=True)) as server:
        content = ask(chat(server.url, response_format=False), "sort a list with sorted")
    assert content.startswith("Sure! Here is my answer:\n```json\n")
    assert verdict(content) == 1


@pytest.mark.parametrize(
    ("content", "expected"),
    [
        ('{"verdict": 1}', {"verdict": 1}),
        ('```json\n{"verdict": 0}\n```', {"verdict": 0}),
        ('I think {"verdict": 1} and also {"verdict": 0}.', {"verdict": 1}),
        ('{broken {"verdict": 1} trailing {', {"verdict": 1}),
        ('{"a": {"verdict": 1}}', {"a": {"verdict": 1}}),
    ],
)
def test_the_first_json_object_in_an_answer_is_read(content: str, expected: object) -> None:
    assert answer_json(content) == expected


@pytest.mark.parametrize(
    ("content", "why"),
    [
        ("The passage is useful.", "no JSON object in the answer"),
        ('{"verdict": 1', "the answer's JSON does not parse"),
        ("[1, 2] {oops}", "the answer's JSON does not parse"),
    ],
)
def test_an_answer_without_a_json_object_is_unreadable(content: str, why: str) -> None:
    with pytest.raises(BadVerdict, match=f"^{why}$"):
        answer_json(content)


def test_the_report_gives_each_prompts_share_of_unreadable_answers(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, cli: Cli
) -> None:
    # The first answer is prose: one chunk verdict unreadable, its query unscored.
    prose = stub.Fault(200, body=b'{"choices": [{"message": {"content": "useful, I think"}}]}')
    with stub.serve(stub.StubOpenAI(faults=[prose])) as server:
        root = write_project(tmp_path, server.url, max_error_rate=0.5, concurrency=1)
        code, out, _ = gate(cli, root, monkeypatch)
        assert code == 0
    judged = report(root)["judge"]
    assert judged["answers"] == {
        "chunk_relevance": {"answers": 3, "unreadable": 1, "unreadable_share": 1 / 3},
        "context_sufficiency": {"answers": 2, "unreadable": 0, "unreadable_share": 0.0},
        "statement_attribution": {"answers": 2, "unreadable": 0, "unreadable_share": 0.0},
    }
    assert judged["unscored"]["q1"] == "judge answer unreadable: no JSON object in the answer"
    assert (
        "Unreadable judge answers (failures, never scores): chunk relevance 33% of 3,\n"
        "  context sufficiency 0% of 2, statement attribution 0% of 2.\n"
    ) in out


def test_synthesis_asks_for_the_question_schema_and_counts_unreadable_answers(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, cli: Cli
) -> None:
    from conftest import copy_demo

    root = copy_demo(tmp_path)
    monkeypatch.chdir(root)
    example = root / "config" / "examples" / "judged.yaml"
    text = example.read_text().replace("concurrency: 8", "concurrency: 1")
    example.write_text(text + "  max_error_rate: 0.5\n")  # under `judge:`
    prose = stub.Fault(200, body=b'{"choices": [{"message": {"content": "How about sets?"}}]}')
    with stub.serve(stub.StubOpenAI(accepts=("json_object",), faults=[prose])) as server:
        monkeypatch.setenv("JUDGE_PORT", server.url.split(":")[2].split("/")[0])
        code, out, _ = cli(
            "gold", "synthesize", "--config", "config/examples/judged.yaml", "--n", "4"
        )
        assert code == 0
        asked = formats(server)
    # The first call got the prose (a fault, not recorded); the second was refused
    # json_schema and asked again with json_object, which the last two used at once.
    assert asked == ["json_schema", "json_object", "json_object", "json_object"]
    assert "1 of 4 answers unreadable (25%)" in " ".join(out.split())


# --- embeddings that come back one vector per token -----------------------------------


def embedder(url: str) -> EmbeddingClient:
    values = {name: s.default for name, s in EMBEDDING_SETTINGS.items()}
    return EmbeddingClient(
        EmbeddingSettings.create(values | {"base_url": url, "model": "stub"}), None
    )


def test_per_token_vectors_are_mean_pooled_and_counted() -> None:
    with stub.serve(stub.StubOpenAI(per_token=True)) as server:
        client = embedder(server.url)
        vectors = client.embed(["sorted list", "sockets"])
    words = [stub.embed("sorted"), stub.embed("list")]
    assert vectors[0] == pytest.approx([(a + b) / 2 for a, b in zip(*words, strict=True)])
    assert vectors[1] == pytest.approx(stub.embed("sockets"))
    assert client.usage.pooled == 2


@pytest.mark.parametrize(
    ("value", "message"),
    [
        ([[1.0, 2.0], [3.0]], "per-token vectors of different lengths for one text"),
        ([[]], "per-token vectors of different lengths for one text"),
        ([[1.0], 2.0], "an embedding is neither a list of numbers nor a list of per-token vectors"),
        ({"x": 1}, "an embedding is neither a list of numbers nor a list of per-token vectors"),
    ],
)
def test_an_embedding_of_another_shape_is_refused_in_one_line(value: Any, message: str) -> None:
    with pytest.raises(EndpointFailed, match=f"^malformed embeddings: {message}$"):
        one_vector(value)


def test_a_pooled_embedding_is_one_vector_and_said_in_the_report(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, cli: Cli
) -> None:
    assert one_vector([[1.0, 3.0], [3.0, 5.0]]) == ([2.0, 4.0], True)
    assert one_vector([0.5, 1]) == ([0.5, 1.0], False)

    with stub.serve(stub.StubOpenAI(per_token=True)) as server:
        root = relevance_project(tmp_path, server.url)
        code, printed, _ = gate(cli, root, monkeypatch)
        assert code == 0
    judged = report(root)["judge"]
    assert judged["embeddings"]["pooled"] == 4  # q1's question and its 3 generated ones
    value = next(s for s in report(root)["slices"] if s["kind"] == "overall")
    assert math.isfinite(value["metrics"]["answer_relevance"]["value"])
    out = " ".join(printed.split())
    assert "one vector per token for 4 texts; each was mean-pooled into one vector." in out
