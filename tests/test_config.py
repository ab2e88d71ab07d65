"""Config and ship-criteria validation: exact one-line errors naming file, line and key."""

from __future__ import annotations

from pathlib import Path

import pytest

from llm_eval.config_io import load_config
from llm_eval.criteria import Scope, Statistics
from llm_eval.criteria_io import check_against_gold, load_criteria
from llm_eval.errors import ExitCode, InputError
from llm_eval.gold_io import load_gold
from llm_eval.metrics import valid_metric_names


def write(tmp_path: Path, name: str, text: str) -> Path:
    path = tmp_path / name
    path.write_text(text)
    return path


def error_of(call: object, path: Path) -> str:
    with pytest.raises(InputError) as caught:
        call(path)  # type: ignore[operator]
    assert caught.value.exit_code == ExitCode.BAD_INPUT
    return str(caught.value).replace(str(path), "FILE")


GOOD_GATES = """\
gates:
  - name: retrieval_recall_at_5
    threshold: 0.85
    regression_max: 0.03
    severity: error
    scope: {tier: A}
  - name: retrieval_mrr
    threshold: 0.62
    regression_max: 0.05
    severity: warning
"""


def test_the_seed_format_loads_and_derives_metrics(tmp_path: Path) -> None:
    criteria = load_criteria(write(tmp_path, "c.yaml", GOOD_GATES))
    first, second = criteria.gates
    assert (first.metric, first.threshold, first.regression_max) == ("recall@5", 0.85, 0.03)
    assert first.scope == Scope(tier="A")
    assert (second.metric, second.severity, second.scope) == ("mrr", "warning", Scope())
    assert criteria.metrics() == ("recall@5", "mrr")


@pytest.mark.parametrize(
    ("text", "message"),
    [
        (
            GOOD_GATES.replace("severity: warning", "severity: eror"),
            "FILE:10: gates[1].severity: expected 'error' or 'warning', got 'eror'",
        ),
        (
            GOOD_GATES.replace("regression_max: 0.03", "regresion_max: 0.03"),
            "FILE:4: gates[0].regresion_max: unknown key (valid keys: drift_max, judged, "
            "metric, name, per_tag, regression_max, scope, severity, since, statistics, "
            "threshold)",
        ),
        (
            GOOD_GATES.replace("threshold: 0.85", "threshold: 85"),
            "FILE:3: gates[0].threshold: must be a number between 0 and 1, got 85",
        ),
        (
            GOOD_GATES.replace("regression_max: 0.05", "regression_max: -0.05"),
            "FILE:9: gates[1].regression_max: must be a number between 0 and 1, got -0.05",
        ),
        (
            GOOD_GATES.replace("name: retrieval_mrr", "name: mrr_gate"),
            "FILE:7: gates[1].name: cannot tell the metric from this name; add `metric:` "
            "(names like recall_at_10, retrieval_recall_at_5 or retrieval_mrr say it)",
        ),
        (
            GOOD_GATES.replace("name: retrieval_mrr", "name: x\n    metric: mrr@@5"),
            "FILE:8: gates[1].metric: metric 'mrr@@5': the cutoff must be a whole number >= 1",
        ),
        (
            GOOD_GATES.replace("name: retrieval_mrr", "name: x\n    metric: recal@5"),
            "FILE:8: gates[1].metric: unknown metric 'recal@5'; valid metrics: "
            + valid_metric_names(),
        ),
        (
            GOOD_GATES.replace("scope: {tier: A}", "scope: {teir: A}"),
            "FILE:6: gates[0].scope.teir: unknown key (valid keys: tags, tier)",
        ),
        (
            GOOD_GATES.replace("name: retrieval_mrr", "name: retrieval_recall_at_5"),
            "FILE:7: gates[1]: duplicate gate name 'retrieval_recall_at_5' (first at line 2)",
        ),
        (
            "gates:\n  - name: retrieval_mrr\n    severity: error\n",
            "FILE:2: gates[0]: a gate needs a `threshold`, a `regression_max`, or both",
        ),
        ("gate: []\n", "FILE:1: gate: unknown key (valid keys: gates, statistics)"),
        ("gates: {}\n", "FILE:1: gates: expected a list, got a mapping"),
        (
            "gates:\n  - name: [\n",
            "FILE:3: invalid YAML: expected the node content, but found '<stream end>'",
        ),
        ("gates:\n  - name: a\n    name: b\n", "FILE:3: gates[0].name: duplicate key"),
    ],
)
def test_criteria_errors(tmp_path: Path, text: str, message: str) -> None:
    assert error_of(load_criteria, write(tmp_path, "c.yaml", text)) == message


def test_missing_criteria_file(tmp_path: Path) -> None:
    assert error_of(load_criteria, tmp_path / "none.yaml") == "FILE: no such file"


GOOD_CONFIG = """\
gold:
  - path: gold/a.jsonl
    tier: A
  - gold/b.jsonl
corpus: gold/corpus.jsonl
retriever:
  kind: bm25
  k1: 1.2
metrics: [recall@5, mrr]
top_k: 10
"""


def test_config_defaults(tmp_path: Path) -> None:
    config = load_config(write(tmp_path, "c.yaml", "gold: [g.jsonl]\n"))
    assert config.metrics == ("recall@5", "mrr")
    assert (config.top_k, config.relevance_level) == (10, 1)
    assert config.retriever is None
    assert str(config.baseline) == "gold/baseline.json"
    assert str(config.output) == ".llm-eval"
    assert config.labels_in_corpus is True
    off = load_config(write(tmp_path, "off.yaml", "gold: [g.jsonl]\nlabels_in_corpus: off\n"))
    assert off.labels_in_corpus is False


@pytest.mark.parametrize(
    ("text", "message"),
    [
        (
            GOOD_CONFIG.replace("top_k: 10", "top_k: 0"),
            "FILE:10: top_k: must be a whole number >= 1, got 0",
        ),
        (
            GOOD_CONFIG.replace("top_k: 10", "top_k: 3"),
            "FILE:9: metrics: recall@5 needs the top 5 results but top_k is 3",
        ),
        (
            GOOD_CONFIG.replace("kind: bm25", "kind: bm52"),
            "FILE:7: retriever.kind: unknown retriever kind 'bm52'; valid kinds: bm25, run, http, "
            "python, fusion, embedding, mcp, rerank",
        ),
        (
            GOOD_CONFIG.replace("k1: 1.2", "k2: 1.2"),
            "FILE:8: retriever.k2: unknown key (valid keys: b, builds, fields, k1, kind, "
            "max_error_rate, method, stemmer, stopwords)",
        ),
        (
            GOOD_CONFIG.replace("tier: A", "tier: ''"),
            "FILE:3: gold[0].tier: must be a non-empty string",
        ),
        (
            GOOD_CONFIG.replace("corpus: gold/corpus.jsonl\n", ""),
            "FILE:6: retriever: the bm25 retriever needs a `corpus` file in the config",
        ),
        (
            "gold: [a]\nlabels_in_corpus: no-thanks\n",
            "FILE:2: labels_in_corpus: expected on or off, got 'no-thanks'",
        ),
        (
            "gold: [a]\nlabel_in_corpus: off\n",
            "FILE:2: label_in_corpus: unknown key (valid keys: baseline, cache, corpus, "
            "embeddings, experiment, f1_threshold, gain, gold, judge, labels_in_corpus, metrics, "
            "output, page_tolerance, rejection_score_threshold, relevance_level, retriever, "
            "top_k, variants, versions)",
        ),
        ("metrics: [mrr]\n", "FILE:1: missing required key 'gold'"),
        ("gold: []\n", "FILE:1: gold: list at least one gold file"),
        (
            "gold: [a]\nrelevance_level: true\n",
            "FILE:2: relevance_level: must be a whole number >= 1, got True",
        ),
    ],
)
def test_config_errors(tmp_path: Path, text: str, message: str) -> None:
    assert error_of(load_config, write(tmp_path, "c.yaml", text)) == message


def test_scopes_must_name_known_tiers_and_tags(tmp_path: Path) -> None:
    gold = write(
        tmp_path,
        "g.jsonl",
        '{"query_id": "q", "query": "x", "tier": "A", "tags": ["howto"], "relevant": ["d"]}\n',
    )
    gold_set = load_gold([gold])
    criteria = write(tmp_path, "c.yaml", GOOD_GATES.replace("tier: A", "tier: C"))
    with pytest.raises(InputError) as caught:
        check_against_gold(load_criteria(criteria), gold_set)
    assert (
        str(caught.value)
        == f"{criteria}:6: gates[0].scope: unknown tier 'C'; the gold set has tiers A"
    )
    criteria = write(tmp_path, "c.yaml", GOOD_GATES.replace("tier: A", "tags: [how-to]"))
    with pytest.raises(InputError) as caught:
        check_against_gold(load_criteria(criteria), gold_set)
    assert (
        str(caught.value)
        == f"{criteria}:6: gates[0].scope: unknown tag 'how-to'; it is on no gold query"
    )


STATS = """\
statistics: {alpha: 0.01, significance: off, resamples: 2000, seed: 7, min_n: 20}
gates:
  - name: retrieval_recall_at_5
    regression_max: 0.03
    per_tag: [howto, lookup]
    statistics: {alpha: 0.05}
  - name: retrieval_mrr
    threshold: 0.5
"""


def test_statistics_defaults_and_per_gate_overrides(tmp_path: Path) -> None:
    criteria = load_criteria(write(tmp_path, "c.yaml", STATS))
    first, second = criteria.gates
    assert criteria.statistics == Statistics(0.01, False, 2000, 7, 20)
    assert first.statistics == Statistics(0.05, False, 2000, 7, 20)
    assert (first.per_tag, first.per_tag_tags) == (True, ("howto", "lookup"))
    assert second.statistics == criteria.statistics
    assert (second.per_tag, second.per_tag_tags) == (False, ())
    assert load_criteria(write(tmp_path, "d.yaml", GOOD_GATES)).statistics == Statistics()


@pytest.mark.parametrize(
    ("text", "message"),
    [
        (
            STATS.replace("significance: off", "significance: maybe"),
            "FILE:1: statistics.significance: expected on or off, got 'maybe'",
        ),
        (
            STATS.replace("alpha: 0.01", "alpha: 0"),
            "FILE:1: statistics.alpha: must be between 0 and 0.5 (exclusive), got 0.0",
        ),
        (
            STATS.replace("resamples: 2000", "resamples: 10"),
            "FILE:1: statistics.resamples: must be a whole number >= 100, got 10",
        ),
        (
            STATS.replace("{alpha: 0.05}", "{alpha: 0.05, seeds: 1}"),
            "FILE:6: gates[0].statistics.seeds: unknown key (valid keys: alpha, min_n, "
            "on_inconclusive, resamples, seed, significance)",
        ),
        (
            STATS.replace("per_tag: [howto, lookup]", "per_tag: yes please"),
            "FILE:5: gates[0].per_tag: expected true, false or a list of tags",
        ),
        (
            STATS.replace("    regression_max: 0.03\n", "    threshold: 0.3\n"),
            "FILE:5: gates[0].per_tag: per-tag checks need a `regression_max` on the gate",
        ),
    ],
)
def test_statistics_errors(tmp_path: Path, text: str, message: str) -> None:
    assert error_of(load_criteria, write(tmp_path, "c.yaml", text)) == message


SERVICE_GATES = """\
gates:
  - name: latency
    metric: latency_p95
    threshold: 250
    regression_max: "+20%"
  - name: retrieval_error_rate
    threshold: 0.0
    severity: error
"""


def test_service_metric_gates(tmp_path: Path) -> None:
    latency, errors = load_criteria(write(tmp_path, "c.yaml", SERVICE_GATES)).gates
    assert (latency.metric, latency.threshold, latency.regression_max) == (
        "latency_p95",
        250.0,
        0.2,
    )
    assert latency.regression_relative
    assert (errors.metric, errors.threshold, errors.regression_relative) == (
        "error_rate",
        0.0,
        False,
    )


@pytest.mark.parametrize(
    ("text", "message"),
    [
        (
            SERVICE_GATES.replace('"+20%"', '"20 percent"'),
            "FILE:5: gates[0].regression_max: expected a number or a relative limit like "
            "'+20%', got '20 percent'",
        ),
        (
            SERVICE_GATES.replace("threshold: 250", "threshold: -5"),
            "FILE:4: gates[0].threshold: must be a number of milliseconds >= 0, got -5",
        ),
        (
            SERVICE_GATES.replace("threshold: 0.0", "threshold: 2"),
            "FILE:7: gates[1].threshold: must be a number between 0 and 1, got 2",
        ),
        (
            GOOD_GATES.replace("regression_max: 0.03", 'regression_max: "+5%"'),
            "FILE:4: gates[0].regression_max: a relative limit like '+20%' is for latency and "
            "error_rate gates",
        ),
    ],
)
def test_service_metric_errors(tmp_path: Path, text: str, message: str) -> None:
    assert error_of(load_criteria, write(tmp_path, "c.yaml", text)) == message


@pytest.mark.parametrize(
    ("name", "metric"),
    [("recall_at_10", "recall@10"), ("retrieval_ndcg_at_3", "ndcg@3"), ("mrr", "mrr")],
)
def test_the_metric_is_read_from_names_with_or_without_the_prefix(
    tmp_path: Path, name: str, metric: str
) -> None:
    text = GOOD_GATES.replace("name: retrieval_mrr", f"name: {name}")
    assert load_criteria(write(tmp_path, "c.yaml", text)).gates[1].metric == metric


JUDGED = (
    "gold: [g.jsonl]\nmetrics: [recall@5, context_recall]\njudge:\n  model: m\n  base_url: {url}\n"
)


@pytest.mark.parametrize(
    ("url", "environ", "expected"),
    [
        ("http://127.0.0.1:${PORT:-8765}/v1", {}, "http://127.0.0.1:8765/v1"),
        ("http://127.0.0.1:${PORT:-8765}/v1", {"PORT": ""}, "http://127.0.0.1:8765/v1"),
        ("http://127.0.0.1:${PORT:-8765}/v1", {"PORT": "9001"}, "http://127.0.0.1:9001/v1"),
        ("${JUDGE_URL}", {"JUDGE_URL": "https://judge.example/v1"}, "https://judge.example/v1"),
        ("http://h/${A:-x}/${B:-}", {"B": "b"}, "http://h/x/b"),
    ],
)
def test_endpoint_settings_read_the_environment_with_defaults(
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    url: str,
    environ: dict[str, str],
    expected: str,
) -> None:
    for name in ("PORT", "JUDGE_URL", "A", "B"):
        monkeypatch.delenv(name, raising=False)
    for name, value in environ.items():
        monkeypatch.setenv(name, value)
    config = load_config(write(tmp_path, "c.yaml", JUDGED.format(url=url)))
    assert config.judge is not None
    assert config.judge.base_url == expected


@pytest.mark.parametrize(
    ("url", "message"),
    [
        (
            "${JUDGE_URL}",
            "FILE:5: judge.base_url: environment variable JUDGE_URL is not set (used by the "
            "base_url setting)",
        ),
        (
            "http://h:${1PORT:-1}/v1",
            "FILE:5: judge.base_url: ${1PORT:-1} is not a variable reference (write ${NAME} or "
            "${NAME:-default}; used by the base_url setting)",
        ),
        (
            "${JUDGE_URL:-ftp://x}",
            "FILE:5: judge.base_url: must be an http:// or https:// URL, got 'ftp://x'",
        ),
    ],
)
def test_an_unset_variable_or_a_bad_reference_names_the_key(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, url: str, message: str
) -> None:
    monkeypatch.delenv("JUDGE_URL", raising=False)
    assert error_of(load_config, write(tmp_path, "c.yaml", JUDGED.format(url=url))) == message


def test_an_http_retriever_url_reads_the_environment(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("SEARCH_HOST", "search.internal")
    text = "gold: [g.jsonl]\nretriever:\n  kind: http\n  url: http://${SEARCH_HOST}/q\n"
    config = load_config(write(tmp_path, "c.yaml", text))
    assert config.retriever is not None
    assert config.retriever.settings["url"] == "http://search.internal/q"
