"""`config/llm-eval.yaml`, validated whole before any work starts.

Every error names the file, the line and the key path. Unknown keys are errors: a
mistyped key must never switch a check off silently. Relative paths are relative to
the working directory (the repository root in CI and in git hooks).
"""

from __future__ import annotations

import os
from collections.abc import Callable, Mapping
from dataclasses import replace
from pathlib import Path
from typing import TYPE_CHECKING, Any

from llm_eval import defaults
from llm_eval.beir_io import CORPUS
from llm_eval.config import (
    EvalConfig,
    ExperimentSettings,
    Lift,
    RetrieverConfig,
    Variant,
    variant_name_problem,
)
from llm_eval.errors import InputError
from llm_eval.experiment.latency_clock import CLOCKS
from llm_eval.finite import is_finite_number
from llm_eval.gain import Weights
from llm_eval.gold import MATCHINGS, GoldSource
from llm_eval.matching import MatchSettings
from llm_eval.metrics import parse_metric
from llm_eval.retrievers import RetrieverKind, retriever_kind
from llm_eval.settings import Setting, checked_settings
from llm_eval.versions import context_metrics
from llm_eval.yamlfile import Node, load_yaml
from llm_eval.yamlvalues import (
    integer,
    location_of,
    metric_name,
    path_string,
    proportion,
    string,
    switch,
)

if TYPE_CHECKING:
    from llm_eval.endpoints.settings import ChatSettings, EmbeddingSettings

CONFIG_KEYS = frozenset(
    {
        "gold",
        "corpus",
        "labels_in_corpus",
        "retriever",
        "metrics",
        "relevance_level",
        "top_k",
        "baseline",
        "output",
        "page_tolerance",
        "f1_threshold",
        "rejection_score_threshold",
        "versions",
        "cache",
        "judge",
        "embeddings",
        "gain",
        "variants",
        "experiment",
    }
)
"""The keys `llm-eval.yaml` may hold at its top level; the tables below are its
sections'. The JSON Schema editors read (`json_schemas.py`) is made from them."""
GAIN_KEYS = frozenset({"alpha", "beta", "gamma", "k", "chunk_words"})
GOLD_FILE_KEYS = frozenset({"path", "tier", "matching"})
GOLD_BEIR_KEYS = frozenset({"beir", "split", "tier"})
GOLD_TOPICS_KEYS = frozenset({"topics", "qrels", "tier"})
RETRIEVER_KEYS = frozenset({"kind", "max_error_rate", "builds"})
"""Besides its kind's own settings (`RetrieverKind.settings`)."""
VARIANT_KEYS = frozenset({"name", "retriever", "top_k"})
EXPERIMENT_KEYS = frozenset({"reference", "quality", "lift", "latency"})
LIFT_KEYS = frozenset({"name", "metric", "base", "variant"})


def load_config(path: str | Path = defaults.CONFIG) -> EvalConfig:
    """Read and validate `llm-eval.yaml`."""
    root = load_yaml(path)
    keys = root.mapping(CONFIG_KEYS, required=frozenset({"gold"}))
    metrics = (
        tuple(metric_name(m) for m in keys["metrics"].items())
        if "metrics" in keys
        else defaults.METRICS
    )
    top_k = integer(keys["top_k"], 1) if "top_k" in keys else defaults.TOP_K
    gold = tuple(_gold_source(n) for n in keys["gold"].items())
    corpus = Path(path_string(keys["corpus"])) if "corpus" in keys else _beir_corpus(gold)
    retriever = _retriever(keys["retriever"], corpus) if "retriever" in keys else None
    config = EvalConfig(
        path=str(path),
        gold=gold,
        corpus=corpus,
        retriever=retriever,
        metrics=metrics,
        relevance_level=integer(keys["relevance_level"], 1) if "relevance_level" in keys else 1,
        top_k=top_k,
        baseline=Path(path_string(keys["baseline"])) if "baseline" in keys else defaults.BASELINE,
        output=_output(keys["output"]) if "output" in keys else defaults.OUTPUT,
        cache=switch(keys["cache"]) if "cache" in keys else False,
        judge=_judge(keys["judge"]) if "judge" in keys else None,
        embeddings=_embeddings(keys["embeddings"]) if "embeddings" in keys else None,
        gain=_gain(keys["gain"]) if "gain" in keys else Weights(),
        variants=_variants(keys["variants"], retriever, corpus, top_k)
        if "variants" in keys
        else (),
        labels_in_corpus=switch(keys["labels_in_corpus"]) if "labels_in_corpus" in keys else True,
        **_beyond_ids(keys),
    )
    if not config.gold:
        raise keys["gold"].error("list at least one gold file")
    if "experiment" in keys:
        config = replace(config, experiment=_experiment(keys["experiment"], config))
    if "metrics" in keys:
        check_cutoffs(config.metrics, top_k, keys["metrics"])
        check_versions(config, config.metrics, keys["metrics"].error)
        check_judge(config, config.metrics, keys["metrics"].error)
    return config


def _beyond_ids(keys: Mapping[str, Node]) -> dict[str, Any]:
    """The EvalConfig fields of page and text matching, rejection and stale context."""
    default = MatchSettings()
    tolerance = (
        integer(keys["page_tolerance"], 0) if "page_tolerance" in keys else default.page_tolerance
    )
    f1 = _f1_threshold(keys["f1_threshold"]) if "f1_threshold" in keys else default.f1_threshold
    rejection = (
        _number(keys["rejection_score_threshold"]) if "rejection_score_threshold" in keys else None
    )
    return {
        "matching": MatchSettings(tolerance, f1),
        "rejection_score_threshold": rejection,
        "versions": Path(path_string(keys["versions"])) if "versions" in keys else None,
    }


def _f1_threshold(node: Node) -> float:
    value = proportion(node)
    if value == 0:
        raise node.error("must be above 0 (every chunk would match), got 0")
    return value


def _number(node: Node) -> float:
    value = node.value
    if not is_finite_number(value):
        raise node.error(f"must be a number, got {value!r}")
    return float(value)


def _gain(node: Node) -> Weights:
    keys = node.mapping(GAIN_KEYS)
    changes: dict[str, Any] = {}
    for name in ("alpha", "beta", "gamma"):
        if name in keys:
            changes[name] = weight = _number(keys[name])
            if weight < 0:
                raise keys[name].error(f"must be a number >= 0, got {weight:g}")
    for name in ("k", "chunk_words"):
        if name in keys:
            changes[name] = integer(keys[name], 1)
    return replace(Weights(), **changes)


def _judge(node: Node) -> ChatSettings:
    """The `judge:` section, checked against `llm_eval.endpoints.settings.SETTINGS`."""
    from llm_eval.endpoints.settings import SETTINGS, ChatSettings

    return ChatSettings.create(_endpoint(node, SETTINGS))


def _embeddings(node: Node) -> EmbeddingSettings:
    """The `embeddings:` section: an endpoint or a model on disk, exactly one."""
    from llm_eval.endpoints.settings import EMBEDDING_SETTINGS, EmbeddingSettings

    return EmbeddingSettings.create(_endpoint(node, EMBEDDING_SETTINGS))


def _endpoint(node: Node, known: Mapping[str, Setting]) -> dict[str, Any]:
    """A model endpoint's settings, checked against their table; an error points at the
    bad setting (a missing one at the entry)."""
    from llm_eval.endpoints.settings import (
        EMBEDDING_SETTINGS,
        EmbeddingSettings,
        check_embedding_source,
    )

    keys = node.mapping(frozenset(known))
    given = {name: keys[name].plain() for name in known if name in keys}
    try:
        values = checked_settings(given, known, environ=os.environ)
        if known is EMBEDDING_SETTINGS:
            check_embedding_source(EmbeddingSettings.create(values))
        return values
    except InputError as exc:  # a bad setting is pointed at; a missing one at the entry
        where = node.find(exc.key) if exc.key is not None else None
        raise (where or node).error(exc.reason) from None


def check_judge(
    config: EvalConfig, metrics: tuple[str, ...], error: Callable[[str], InputError]
) -> None:
    """Judged metrics need a judge."""
    judged = [m for m in metrics if parse_metric(m).kind == "judged"]
    if judged and config.judge is None:
        raise error(
            f"{judged[0]} is judged by a model; add `judge:` (base_url, model) to {config.path}"
        )
    if "answer_relevance" in judged and config.embeddings is None:
        raise error(
            "answer_relevance compares embeddings; add `embeddings:` (base_url and model, or "
            f"model_path) to {config.path}"
        )


def check_versions(
    config: EvalConfig, metrics: tuple[str, ...], error: Callable[[str], InputError]
) -> None:
    """Stale and conflict metrics need the corpus-versions sidecar."""
    needing = context_metrics(metrics)
    if needing and config.versions is None:
        raise error(
            f"{needing[0].name} needs a corpus-versions sidecar; add `versions: PATH` to "
            f"{config.path}"
        )


def check_cutoffs(metrics: tuple[str, ...], top_k: int, node: Node) -> None:
    """A cutoff above top_k would score results that were never retrieved."""
    for name in metrics:
        k = parse_metric(name).k
        if k is not None and k > top_k:
            raise node.error(f"{name} needs the top {k} results but top_k is {top_k}")


def _gold_source(node: Node) -> GoldSource:
    """A gold JSONL file (`path`, or the bare path), a BEIR folder (`beir`, `split`) or
    TREC topics with their qrels (`topics`, `qrels`)."""
    if isinstance(node.value, str):
        return GoldSource(path_string(node))
    if isinstance(node.value, dict) and "beir" in node.value:
        keys = node.mapping(GOLD_BEIR_KEYS)
        split = string(keys["split"]) if "split" in keys else defaults.BEIR_SPLIT
        tier = string(keys["tier"]) if "tier" in keys else None
        return GoldSource(path_string(keys["beir"]), tier, split=split)
    if isinstance(node.value, dict) and "topics" in node.value:
        keys = node.mapping(GOLD_TOPICS_KEYS, frozenset({"qrels"}))
        tier = string(keys["tier"]) if "tier" in keys else None
        return GoldSource(path_string(keys["topics"]), tier, qrels=path_string(keys["qrels"]))
    keys = node.mapping(GOLD_FILE_KEYS, required=frozenset({"path"}))
    tier = string(keys["tier"]) if "tier" in keys else None
    matching = _matching(keys["matching"]) if "matching" in keys else "auto"
    return GoldSource(path_string(keys["path"]), tier, matching)


def _output(node: Node) -> Path:
    """The output folder: a path on one line that is a folder where it exists, and not
    under a file (where nothing could be written, and a cache path would point inside
    the file)."""
    folder = Path(path_string(node))
    for part in (folder, *folder.parents):
        if part.is_dir():
            break
        if part.exists() or part.is_symlink():
            raise node.error(f"{part} is not a folder (the output folder is made under it)")
    return folder


def _beir_corpus(gold: tuple[GoldSource, ...]) -> Path | None:
    """Without a `corpus` key, the first BEIR folder's `corpus.jsonl`."""
    folders = [source.path for source in gold if source.split is not None]
    return Path(folders[0]) / CORPUS if folders else None


def _matching(node: Node) -> str:
    if node.value not in MATCHINGS:
        raise node.error(f"expected one of {', '.join(MATCHINGS)}, got {node.value!r}")
    return str(node.value)


def _retriever(node: Node, corpus: Path | None) -> RetrieverConfig:
    if not isinstance(node.value, dict):
        raise node.error("expected a mapping with a `kind` key")
    if "kind" not in node.value:
        raise node.error("missing required key 'kind'")
    kind_node = node.value["kind"]
    try:
        kind = retriever_kind(string(kind_node))
    except InputError as exc:
        raise kind_node.error(exc.reason) from None
    return _configured(node, kind, frozenset({"kind"}), RetrieverConfig(kind.name, {}), corpus)


def _configured(
    node: Node,
    kind: RetrieverKind,
    other_keys: frozenset[str],
    base: RetrieverConfig,
    corpus: Path | None,
) -> RetrieverConfig:
    """The kind's settings written in `node` over `base`'s, checked; an error points at
    the bad setting (a missing one at the entry)."""
    keys = node.mapping(other_keys | (RETRIEVER_KEYS - {"kind"}) | set(kind.settings))
    given = {name: keys[name].plain() for name in kind.settings if name in keys}
    try:
        settings = kind.checked({**base.settings, **given}, frozenset(base.settings) - set(given))
    except InputError as exc:
        if exc.path is not None:  # a file the setting names is at fault: the error names it
            raise
        where = node.find(exc.key) if exc.key is not None else None
        raise (where or node).error(exc.reason) from None
    if kind.needs_corpus and corpus is None:
        raise node.error(f"the {kind.name} retriever needs a `corpus` file in the config")
    rate = keys.get("max_error_rate")
    max_error_rate = proportion(rate) if rate is not None else base.max_error_rate
    lines = tuple((name, keys[name].line) for name in kind.settings if name in keys)
    builds = _builds(keys["builds"]) if "builds" in keys else base.builds
    return RetrieverConfig(kind.name, settings, max_error_rate, location_of(node), lines, builds)


def _builds(node: Node) -> int:
    """`builds:`, a whole number from 1 to `defaults.MAX_BUILDS`."""
    count = integer(node, 1)
    if count > defaults.MAX_BUILDS:
        raise node.error(f"must be at most {defaults.MAX_BUILDS}, got {count}")
    return count


def _variants(
    node: Node, base: RetrieverConfig | None, corpus: Path | None, top_k: int
) -> tuple[Variant, ...]:
    """Each variant's retriever: its own `kind` and settings, or the base retriever's
    settings with the variant's written over them."""
    variants: list[Variant] = []
    seen: dict[str, int] = {}
    for item in node.items():
        keys = item.mapping(VARIANT_KEYS, frozenset({"name"}))
        name = string(keys["name"])
        if problem := variant_name_problem(name):
            raise keys["name"].error(problem)
        if name in seen:
            raise keys["name"].error(
                f"duplicate variant name {name!r} (first at line {seen[name]})"
            )
        seen[name] = keys["name"].line
        retriever = base
        if "retriever" in keys:
            retriever = _variant_retriever(keys["retriever"], base, corpus)
        if retriever is None:
            raise item.error("no retriever: give the variant a `retriever` with a `kind`")
        k = integer(keys["top_k"], 1) if "top_k" in keys else top_k
        variants.append(Variant(name, retriever, k))
    if len(variants) < 2:
        raise node.error("list two or more variants to compare")
    return tuple(variants)


def _variant_retriever(
    node: Node, base: RetrieverConfig | None, corpus: Path | None
) -> RetrieverConfig:
    if isinstance(node.value, dict) and "kind" in node.value:
        return _retriever(node, corpus)
    if base is None:
        raise node.error("there is no base `retriever` to vary: give a `kind`")
    return _configured(node, retriever_kind(base.kind), frozenset(), base, corpus)


def _experiment(node: Node, config: EvalConfig) -> ExperimentSettings:
    keys = node.mapping(EXPERIMENT_KEYS)
    names = [v.name for v in config.variants]

    def variant(child: Node) -> str:
        name = string(child)
        if name not in names:
            raise child.error(f"no variant is named {name!r} (variants: {', '.join(names)})")
        return name

    lifts = []
    for item in keys["lift"].items() if "lift" in keys else ():
        parts = item.mapping(LIFT_KEYS, frozenset({"metric", "base", "variant"}))
        metric = metric_name(parts["metric"])
        base, over = variant(parts["base"]), variant(parts["variant"])
        label = string(parts["name"]) if "name" in parts else f"{over} over {base}"
        lifts.append(Lift(label, metric, base, over))
    return ExperimentSettings(
        reference=variant(keys["reference"]) if "reference" in keys else None,
        quality=metric_name(keys["quality"]) if "quality" in keys else None,
        lifts=tuple(lifts),
        latency=_clock(keys["latency"]) if "latency" in keys else "auto",
    )


def _clock(node: Node) -> str:
    if node.value not in CLOCKS:
        raise node.error(f"expected one of {', '.join(CLOCKS)}, got {node.value!r}")
    return str(node.value)
