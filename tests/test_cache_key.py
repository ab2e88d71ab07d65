"""`llm-eval cache-key`: the key CI keeps the output folder's cache under, made from the
config alone (no model loaded, no index built)."""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

import pytest
from conftest import Cli

from llm_eval.commands.cache_key import CacheKey, cache_key

HEAD = "gold: [{path: gold.jsonl, tier: A}]\ncorpus: corpus.jsonl\noutput: out\n"
KEY = re.compile(r"llm-eval-linux-([0-9a-f]{16})-([0-9a-f]{16})")


@pytest.fixture
def project(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """A folder with a corpus and a model folder that is no model at all: the key reads
    its files' digests and never loads it."""
    (tmp_path / "corpus.jsonl").write_text('{"_id": "a", "text": "one"}\n')
    model = tmp_path / "models" / "e5"
    model.mkdir(parents=True)
    (model / "modules.json").write_text("[]")
    (model / "weights.bin").write_bytes(b"\x00" * 64)
    monkeypatch.chdir(tmp_path)
    return tmp_path


def key_of(retriever: str, system: str = "Linux") -> CacheKey | None:
    Path("llm-eval.yaml").write_text(HEAD + retriever, encoding="utf-8")
    return cache_key(Path("llm-eval.yaml"), system)


EMBEDDING = "retriever: {kind: embedding, model_path: models/e5}\n"


def test_the_key_is_the_system_the_retriever_and_the_corpus(project: Path) -> None:
    found = key_of(EMBEDDING)
    assert found is not None
    assert KEY.fullmatch(found.key), found.key
    assert found.restore_key == found.key[: -len("0123456789abcdef")]
    assert found.path == project / "out" / "cache"
    assert found.outputs() == (
        f"key={found.key}\nrestore-key={found.restore_key}\npath={project / 'out' / 'cache'}"
    )
    assert key_of(EMBEDDING, "Windows") != found  # another system's files are others
    assert key_of(EMBEDDING) == found


def test_a_changed_corpus_changes_the_key_but_not_the_restore_key(project: Path) -> None:
    before = key_of(EMBEDDING)
    (project / "corpus.jsonl").write_text('{"_id": "a", "text": "two"}\n')
    after = key_of(EMBEDDING)
    assert before is not None and after is not None
    assert after.key != before.key
    assert after.restore_key == before.restore_key


@pytest.mark.parametrize(
    "change",
    [
        "model file",
        "prefix",
        "fields",
    ],
)
def test_a_changed_retriever_changes_both(project: Path, change: str) -> None:
    before = key_of(EMBEDDING)
    retriever = EMBEDDING
    if change == "model file":
        (project / "models" / "e5" / "weights.bin").write_bytes(b"\x01" * 64)
    elif change == "prefix":
        retriever = EMBEDDING.replace("}", ", query_prefix: 'query: '}")
    else:
        retriever = EMBEDDING.replace("}", ", fields: [text]}")
    after = key_of(retriever)
    assert before is not None and after is not None
    assert after.restore_key != before.restore_key
    assert not after.key.startswith(before.restore_key)


def test_the_same_model_at_another_path_is_the_same_retriever(project: Path) -> None:
    before = key_of(EMBEDDING)
    (project / "models" / "e5").rename(project / "models" / "moved")
    assert key_of(EMBEDDING.replace("models/e5", "models/moved")) == before


def test_an_endpoint_is_its_url_and_model(project: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    endpoint = "retriever: {kind: embedding, base_url: '${EMBED_URL}', model: e5}\n"
    monkeypatch.setenv("EMBED_URL", "http://127.0.0.1:8000/v1")
    first = key_of(endpoint)
    monkeypatch.setenv("EMBED_URL", "http://10.0.0.7:8000/v1")
    second = key_of(endpoint)
    third = key_of(endpoint.replace("model: e5", "model: e5-large"))
    assert first is not None and second is not None and third is not None
    assert len({first.restore_key, second.restore_key, third.restore_key}) == 3


@pytest.mark.parametrize(
    "retriever",
    ["", "retriever: {kind: run, path: run.jsonl}\n"],
    ids=["no retriever", "a run file"],
)
def test_nothing_to_cache_prints_nothing(project: Path, retriever: str, cli: Cli) -> None:
    (project / "run.jsonl").write_text("")
    Path("llm-eval.yaml").write_text(HEAD + retriever, encoding="utf-8")
    assert cli("cache-key", "--config", "llm-eval.yaml")[:2] == (0, "")


def test_the_command_prints_the_outputs(project: Path, cli: Cli) -> None:
    Path("llm-eval.yaml").write_text(HEAD + EMBEDDING, encoding="utf-8")
    code, out, _ = cli("cache-key", "--config", "llm-eval.yaml")
    assert code == 0
    found = cache_key(Path("llm-eval.yaml"))
    assert found is not None
    assert out == found.outputs() + "\n"


def test_a_config_that_cannot_be_read_is_exit_3(
    project: Path, cli: Cli, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.delenv("EMBED_URL", raising=False)
    Path("llm-eval.yaml").write_text(
        HEAD + "retriever:\n  kind: embedding\n  base_url: ${EMBED_URL}\n  model: e5\n"
    )
    code, _, err = cli("cache-key", "--config", "llm-eval.yaml")
    assert code == 3
    assert err == (
        "llm-eval: error: llm-eval.yaml:6: retriever.base_url: environment variable "
        "EMBED_URL is not set (used by the base_url setting)\n"
    )


def test_a_model_named_in_a_python_retrievers_init_is_part_of_the_key(
    project: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """`init: {model_path: ...}` counts by the folder's files when it is a folder, and by
    its text when it names a model some other way."""
    python = "retriever: {kind: python, target: 'm:R', init: {model_path: '${MODEL}'}}\n"
    keys = []
    for model in ("models/e5", "org/model-a", "org/model-b"):
        monkeypatch.setenv("MODEL", model)
        found = key_of(python)
        assert found is not None
        keys.append(found.restore_key)
    (project / "models" / "e5" / "weights.bin").write_bytes(b"\x02" * 64)
    monkeypatch.setenv("MODEL", "models/e5")
    found = key_of(python)
    assert found is not None
    assert len({*keys, found.restore_key}) == 4


FORGED = "key=forged-key/cache"


@pytest.mark.parametrize(
    ("output", "where"),
    [
        ('"out\\nkey=forged-key/cache"', "a line break (at character 4)"),
        ('"out\\rkey=forged-key/cache"', "a carriage return (at character 4)"),
        ('"out\\0key=forged-key/cache"', "a NUL character (at character 4)"),
    ],
    ids=["line break", "carriage return", "NUL"],
)
def test_an_output_folder_that_would_forge_a_step_output_is_refused(
    project: Path, cli: Cli, output: str, where: str
) -> None:
    """A pull request's config must never add a line to $GITHUB_OUTPUT: `path=out`
    followed by `key=…` would choose the key a later step saves the cache under."""
    config = f"gold: [{{path: gold.jsonl, tier: A}}]\ncorpus: corpus.jsonl\noutput: {output}\n"
    Path("llm-eval.yaml").write_text(config + EMBEDDING, encoding="utf-8")
    code, out, err = cli("cache-key", "--config", "llm-eval.yaml")
    assert (code, out) == (3, "")
    assert err == f"llm-eval: error: llm-eval.yaml:3: output: holds {where}; it must be one line\n"
    assert FORGED not in out + err


def test_an_output_folder_under_a_file_is_refused(project: Path, cli: Cli) -> None:
    (project / "notes.txt").write_text("a file, not a folder\n")
    config = "gold: [{path: gold.jsonl, tier: A}]\ncorpus: corpus.jsonl\noutput: notes.txt/out\n"
    Path("llm-eval.yaml").write_text(config + EMBEDDING, encoding="utf-8")
    code, out, err = cli("cache-key", "--config", "llm-eval.yaml")
    assert (code, out) == (3, "")
    assert err == (
        "llm-eval: error: llm-eval.yaml:3: output: notes.txt is not a folder "
        "(the output folder is made under it)\n"
    )


def test_a_working_folder_with_a_line_break_prints_no_path(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, cli: Cli
) -> None:
    """The path printed is absolute: a line break in the folder it is run from would
    split it too."""
    folder = tmp_path / "repo\nkey=forged-key"
    folder.mkdir()
    (folder / "corpus.jsonl").write_text('{"_id": "a", "text": "one"}\n')
    monkeypatch.chdir(folder)
    Path("llm-eval.yaml").write_text(HEAD + "retriever: {kind: bm25}\n", encoding="utf-8")
    code, out, err = cli("cache-key", "--config", "llm-eval.yaml")
    assert (code, out) == (3, "")
    at = len(str(tmp_path / "repo")) + 1
    assert err == (
        f"llm-eval: error: llm-eval.yaml: output: the cache folder holds a line break "
        f"(at character {at}); it must be one line\n"
    )


def test_a_corpus_that_is_a_fifo_is_refused_not_waited_on(project: Path) -> None:
    """Opening a FIFO for reading waits for a writer; no writer ever comes. The command
    runs in a process of its own, the timeout a guard against the wait, not a measure."""
    (project / "corpus.jsonl").unlink()
    os.mkfifo(project / "corpus.jsonl")
    Path("llm-eval.yaml").write_text(HEAD + "retriever: {kind: bm25}\n", encoding="utf-8")
    done = subprocess.run(
        [sys.executable, "-m", "llm_eval.cli", "cache-key", "--config", "llm-eval.yaml"],
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert (done.returncode, done.stdout) == (3, "")
    assert done.stderr == "llm-eval: error: corpus.jsonl: is a FIFO, expected a regular file\n"
