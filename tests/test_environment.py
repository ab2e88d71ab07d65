"""`${NAME}` in config strings: `expand_environment` on one string, `expand_nested` on a
setting's whole value, and which settings read the environment when the config is
loaded (every string) and which where they are used (secrets, request templates)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from conftest import Cli

from llm_eval.config_io import load_config
from llm_eval.environment import expand_environment, expand_nested
from llm_eval.errors import ExitCode, InputError

ENVIRON = {"HOST": "db.internal", "EMPTY": "", "MODEL": "/models/e5"}


@pytest.mark.parametrize(
    ("template", "expected"),
    [
        ("${HOST}", "db.internal"),
        ("http://${HOST}:${PORT:-5432}/x", "http://db.internal:5432/x"),
        ("${EMPTY:-fallback}", "fallback"),
        ("${EMPTY}", ""),
        # A `$` that does not open `${` is text: prices, shell-looking words, `$$`.
        ("costs $5, $HOME and $$ stay", "costs $5, $HOME and $$ stay"),
        ("{HOST} and $ {HOST}", "{HOST} and $ {HOST}"),
    ],
)
def test_a_string_reads_its_variables(template: str, expected: str) -> None:
    assert expand_environment(template, ENVIRON, "the url setting", "url") == expected


def test_nested_strings_are_read_in_mappings_and_lists_and_the_rest_is_kept() -> None:
    value = {
        "model_path": "${MODEL}",
        "hosts": ["${HOST}", "backup-${BACKUP:-none}", 3],
        "inner": {"price": "$5", "flag": True, "nothing": None},
        "${HOST}": "keys are names, kept as written",
    }
    assert expand_nested(value, ENVIRON, "init") == {
        "model_path": "/models/e5",
        "hosts": ["db.internal", "backup-none", 3],
        "inner": {"price": "$5", "flag": True, "nothing": None},
        "${HOST}": "keys are names, kept as written",
    }


@pytest.mark.parametrize(
    ("value", "key", "reason"),
    [
        (
            {"inner": {"path": "${MISSING}"}},
            "init.inner.path",
            "environment variable MISSING is not set (used by the init.inner.path setting)",
        ),
        (
            {"hosts": ["${HOST}", "${MISSING}"]},
            "init.hosts[1]",
            "environment variable MISSING is not set (used by the init.hosts[1] setting)",
        ),
        (
            {"bad": "${1X}"},
            "init.bad",
            "${1X} is not a variable reference (write ${NAME} or ${NAME:-default}; used by "
            "the init.bad setting)",
        ),
    ],
)
def test_an_unset_or_malformed_variable_names_the_key_path(
    value: Any, key: str, reason: str
) -> None:
    with pytest.raises(InputError) as raised:
        expand_nested(value, ENVIRON, "init")
    assert (raised.value.key, raised.value.reason) == (key, reason)


# --- through the config ----------------------------------------------------------------

HEAD = "gold: [{path: gold.jsonl, tier: A}]\ncorpus: corpus.jsonl\n"


def config_file(tmp_path: Path, retriever: str) -> Path:
    (tmp_path / "corpus.jsonl").write_text('{"_id": "d", "text": "x"}\n')
    path = tmp_path / "llm-eval.yaml"
    path.write_text(HEAD + retriever, encoding="utf-8")
    return path


def line_of(path: Path, text: str) -> int:
    lines = path.read_text(encoding="utf-8").splitlines()
    return next(number for number, line in enumerate(lines, 1) if text in line)


PYTHON = """\
retriever:
  kind: python
  target: my_rag.search:Retriever
  python_path: ["${SRC:-src}"]
  init:
    model_path: "${EMBEDDING_MODEL}"
    index:
      hosts: ["${INDEX_HOST}", "replica"]
      note: "costs $5"
"""


def test_a_python_retrievers_init_reads_the_environment_when_the_config_is_loaded(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("EMBEDDING_MODEL", "/models/e5")
    monkeypatch.setenv("INDEX_HOST", "search.internal")
    monkeypatch.delenv("SRC", raising=False)
    config = load_config(config_file(tmp_path, PYTHON))
    assert config.retriever is not None
    assert config.retriever.settings["init"] == {
        "model_path": "/models/e5",
        "index": {"hosts": ["search.internal", "replica"], "note": "costs $5"},
    }
    assert config.retriever.settings["python_path"] == ["src"]


def test_an_unset_variable_in_init_is_one_line_at_its_own_line(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, cli: Cli
) -> None:
    monkeypatch.setenv("EMBEDDING_MODEL", "/models/e5")
    monkeypatch.delenv("INDEX_HOST", raising=False)
    path = config_file(tmp_path, PYTHON)
    code, _, err = cli("retrieve", "--config", path, "--out", tmp_path / "run.jsonl")
    assert code == ExitCode.BAD_INPUT == 3
    line = line_of(path, "${INDEX_HOST}")
    assert err == (
        f"llm-eval: error: {path}:{line}: retriever.init.index.hosts[0]: environment "
        "variable INDEX_HOST is not set (used by the init.index.hosts[0] setting)\n"
    )


def test_a_secret_read_into_init_is_never_shown_in_an_error(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("VENDOR_TOKEN", "tok-0123456789-secret")
    retriever = (
        'retriever:\n  kind: python\n  target: m:R\n  init: {token: "${VENDOR_TOKEN}", 2bad: 1}\n'
    )
    with pytest.raises(InputError) as raised:
        load_config(config_file(tmp_path, retriever))
    assert raised.value.reason == "'2bad' is not a keyword argument name (letters, digits, _)"
    assert "tok-0123456789" not in str(raised.value)


@pytest.mark.parametrize(
    ("retriever", "setting", "expected"),
    [
        # Every string setting of every kind, and of each fused component.
        ("kind: bm25\n  stemmer: ${STEMMER:-english}", "stemmer", "english"),
        (
            "kind: mcp\n  command: [python, '${SERVER_DIR}/server.py']\n  tool: ${TOOL}",
            "command",
            ["python", "/srv/server.py"],
        ),
        ("kind: run\n  path: ${RUNS}/run.jsonl", "path", "/srv/run.jsonl"),
        # Read where they are used: a secret never enters the settings, and a request
        # template keeps placeholders of its own.
        (
            "kind: http\n  url: http://h/${TOOL}\n  headers: {Authorization: 'Bearer ${TOKEN}'}",
            "headers",
            {"Authorization": "Bearer ${TOKEN}"},
        ),
        (
            "kind: http\n  url: http://h/x\n  body: {q: '${query}', k: '${top_k}'}",
            "body",
            {"q": "${query}", "k": "${top_k}"},
        ),
        (
            "kind: embedding\n  base_url: http://${TOOL}/v1\n  model: m\n  api_key: ${TOKEN}",
            "api_key",
            "${TOKEN}",
        ),
        ("kind: http\n  url: http://h/x\n  cache_key: ${TOOL}", "cache_key", "${TOOL}"),
    ],
)
def test_which_settings_read_the_environment_when_the_config_is_loaded(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, retriever: str, setting: str, expected: Any
) -> None:
    values = {"SERVER_DIR": "/srv", "RUNS": "/srv", "TOOL": "search", "TOKEN": "t-1"}
    for name, value in values.items():
        monkeypatch.setenv(name, value)
    monkeypatch.delenv("STEMMER", raising=False)
    config = load_config(config_file(tmp_path, f"retriever:\n  {retriever}\n"))
    assert config.retriever is not None
    assert config.retriever.settings[setting] == expected


def test_a_fused_components_init_reads_the_environment(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.delenv("INDEX_HOST", raising=False)
    retriever = (
        "retriever:\n  kind: fusion\n  retrievers:\n    lexical: {kind: bm25}\n"
        '    mine: {kind: python, target: "m:R", init: {host: "${INDEX_HOST}"}}\n'
    )
    path = config_file(tmp_path, retriever)
    with pytest.raises(InputError) as raised:
        load_config(path)
    # The component's own line, and the setting's key path below it.
    line = line_of(path, "mine:")
    assert str(raised.value) == (
        f"{path}:{line}: retriever.retrievers.mine.init.host: environment variable INDEX_HOST "
        "is not set (used by the init.host setting)"
    )


def test_a_variables_value_is_read_once_also_by_a_variant_of_the_retriever(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A variant takes the base retriever's settings, variables read already: a `${`
    inside a value is text, not another variable."""
    monkeypatch.setenv("PASSWORD", "pa${ss}word")
    retriever = (
        'retriever:\n  kind: python\n  target: m:R\n  init: {password: "${PASSWORD}"}\n'
        "variants:\n  - name: base\n  - name: wider\n    retriever: {concurrency: 2}\n"
    )
    config = load_config(config_file(tmp_path, retriever))
    assert [v.retriever.settings["init"] for v in config.variants] == [
        {"password": "pa${ss}word"},
        {"password": "pa${ss}word"},
    ]
    assert config.variants[1].retriever.settings["concurrency"] == 2


def test_a_secret_read_into_a_servers_command_is_never_shown_in_an_error(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("SERVER_TOKEN", "tok-9876543210-secret")
    retriever = "retriever:\n  kind: mcp\n  command: [serve, --token, '${SERVER_TOKEN}', 3]\n"
    with pytest.raises(InputError) as raised:
        load_config(config_file(tmp_path, retriever))
    assert raised.value.reason == "must be a list like [python, server.py]: every item a string"
    assert "tok-9876543210" not in str(raised.value)


@pytest.mark.parametrize(
    ("template", "reason"),
    [
        (
            "${A:-${B}}",
            "${A:-${B}: a ${...} inside a default is not supported (write ${NAME} or "
            "${NAME:-default} with a plain default; used by the url setting)",
        ),
        (
            "http://h/${A",
            "a ${ is never closed (write ${NAME} or ${NAME:-default}; used by the url setting)",
        ),
        (
            "http://h/${A}/${B",
            "a ${ is never closed (write ${NAME} or ${NAME:-default}; used by the url setting)",
        ),
    ],
    ids=["nested", "unterminated", "unterminated after one"],
)
def test_forms_a_shell_has_and_this_reading_does_not_are_refused(
    template: str, reason: str
) -> None:
    """`${A:-${B}}` would otherwise be read as the default `${B` and a `}`: the literal
    text `${B}` taken silently where a shell reads B."""
    with pytest.raises(InputError) as raised:
        expand_environment(template, {"A": "", "B": "b"}, "the url setting", "url")
    assert (raised.value.key, raised.value.reason) == ("url", reason)


LINE_BROKEN = "http://127.0.0.1:9/search\nX-Injected: 1"


@pytest.mark.parametrize(
    ("retriever", "key", "reason"),
    [
        (
            'retriever:\n  kind: http\n  url: "http://127.0.0.1:9/search\\nX-Injected: 1"\n',
            "retriever.url",
            "holds a line break (at character 26); it must be one line",
        ),
        (
            "retriever:\n  kind: http\n  url: ${SEARCH_URL}\n",
            "retriever.url",
            "holds a line break (at character 26); it must be one line",
        ),
        (
            "retriever:\n  kind: embedding\n  base_url: ${SEARCH_URL}\n  model: m\n",
            "retriever.base_url",
            "holds a line break (at character 26); it must be one line",
        ),
        (
            "retriever: {kind: bm25}\nembeddings:\n  base_url: ${SEARCH_URL}\n  model: m\n",
            "embeddings.base_url",
            "holds a line break (at character 26); it must be one line",
        ),
        (
            'retriever:\n  kind: http\n  url: http://h/s\n  headers: {X-A: "a\\r\\nX-B: b"}\n',
            "retriever.headers",
            "the value of X-A holds a carriage return (at character 2); it must be one line",
        ),
        (
            'retriever:\n  kind: run\n  path: "run\\0.jsonl"\n',
            "retriever.path",
            "holds a NUL character (at character 4); it must be one line",
        ),
    ],
    ids=["literal url", "url from a variable", "embedding", "embeddings section", "header", "path"],
)
def test_a_line_break_in_a_url_a_header_or_a_path_is_one_line_at_its_key(
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    cli: Cli,
    retriever: str,
    key: str,
    reason: str,
) -> None:
    """Never an internal error from the HTTP client, and never a header of its own."""
    monkeypatch.setenv("SEARCH_URL", LINE_BROKEN)
    path = config_file(tmp_path, retriever)
    line = line_of(path, f"  {key.rsplit('.', 1)[1]}:")
    code, _, err = cli("retrieve", "--config", path, "--out", tmp_path / "run.jsonl")
    assert (code, err) == (3, f"llm-eval: error: {path}:{line}: {key}: {reason}\n")


def test_a_header_whose_variable_holds_a_line_break_is_refused_where_it_is_read(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, cli: Cli
) -> None:
    """Header values read their variables when the retriever is built (secrets stay out
    of the settings): the value is checked there, and the error points at the setting."""
    monkeypatch.setenv("TOKEN", "secret-token-1\nX-Injected: 1")
    retriever = (
        'retriever:\n  kind: http\n  url: http://127.0.0.1:9/s\n  headers: {X-T: "${TOKEN}"}\n'
    )
    path = config_file(tmp_path, retriever)
    (tmp_path / "gold.jsonl").write_text(
        '{"query_id": "q1", "query": "x", "tier": "A", "relevant": ["d"]}\n'
    )
    monkeypatch.chdir(tmp_path)
    code, _, err = cli("retrieve", "--config", path, "--out", tmp_path / "run.jsonl")
    assert code == 3
    assert err == (
        f"llm-eval: error: {path}:{line_of(path, 'headers:')}: retriever.headers: the value of "
        "X-T holds a line break (at character 15); it must be one line\n"
    )
    assert "secret-token-1" not in err
