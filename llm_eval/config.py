"""The two config files, validated whole before any work starts.

- `config/llm-eval.yaml`: what to evaluate (gold files and tiers, corpus, retriever,
  metrics, relevance level, top_k, baseline path, output folder).
- `config/ship-criteria.yaml`: the gates.

Every error names the file, the line and the key path. Unknown keys are errors: a
mistyped key must never switch a gate off silently. Relative paths are relative to
the working directory (the repository root in CI and in git hooks).
"""

from __future__ import annotations

import math
import re
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

from llm_eval import defaults
from llm_eval.criteria import Criteria, Gate, Location, Scope, Severity, Statistics
from llm_eval.errors import InputError
from llm_eval.gain import Weights
from llm_eval.gold import MATCHINGS, GoldSet, GoldSource
from llm_eval.matching import MatchSettings
from llm_eval.metrics import parse_metric
from llm_eval.retrievers import RetrieverKind, retriever_kind
from llm_eval.settings import checked_settings
from llm_eval.versions import context_metrics
from llm_eval.yamlfile import Node, load_yaml


@dataclass(frozen=True, slots=True)
class RetrieverConfig:
    """The configured retriever kind and its validated settings."""

    kind: str
    settings: Mapping[str, Any]
    max_error_rate: float = 0.0
    """The largest share of queries that may fail; more makes the run invalid (exit 4)."""
    where: Location | None = None
    """The `retriever` entry of the config."""
    setting_lines: tuple[tuple[str, int], ...] = ()
    """(setting, line) for each setting written in the config."""

    def locate(self, error: InputError) -> InputError:
        """An error raised while building the retriever, pointed at its setting."""
        if error.path is not None or self.where is None:
            return error
        line = dict(self.setting_lines).get(error.key or "", self.where.line)
        key = f"{self.where.key}.{error.key}" if error.key else self.where.key
        return InputError(error.reason, path=self.where.file, line=line, key=key)


@dataclass(frozen=True, slots=True)
class Variant:
    """One retriever configuration of an experiment (`variants:` in the config)."""

    name: str
    retriever: RetrieverConfig
    top_k: int


@dataclass(frozen=True, slots=True)
class Lift:
    """A derived column of an experiment: `metric` of `variant` minus that of `base`."""

    name: str
    metric: str
    base: str
    variant: str


@dataclass(frozen=True, slots=True)
class ExperimentSettings:
    """The `experiment:` section: how variants are compared."""

    reference: str | None = None
    """The variant every other is paired with; None: the first."""
    quality: str | None = None
    """The Pareto front's quality metric; None: the first relevance metric."""
    lifts: tuple[Lift, ...] = ()


@dataclass(frozen=True, slots=True)
class EvalConfig:
    """The contents of `config/llm-eval.yaml`."""

    path: str
    gold: tuple[GoldSource, ...]
    corpus: Path | None
    retriever: RetrieverConfig | None
    metrics: tuple[str, ...]
    """Canonical metric names to report."""
    relevance_level: int
    top_k: int
    baseline: Path
    output: Path
    matching: MatchSettings = field(default_factory=MatchSettings)
    """`page_tolerance` and `f1_threshold`: how pages and passages are matched."""
    rejection_score_threshold: float | None = None
    """A rejection query whose top score is below this was rejected (None: only an
    abstention or an empty result list counts)."""
    cache: bool = False
    """Answer from the retrieval cache of earlier runs (`--cache` / `--no-cache` win)."""
    versions: Path | None = None
    """The corpus-versions sidecar (JSONL), for the stale and conflict metrics."""
    judge: Mapping[str, Any] | None = None
    """The judge model's checked settings (`llm_eval.endpoints.settings`), for judged metrics."""
    embeddings: Mapping[str, Any] | None = None
    """The embeddings model's checked settings, for answer relevance and novelty."""
    gain: Weights = field(default_factory=Weights)
    """The weights of `llm-eval gain`."""
    variants: tuple[Variant, ...] = ()
    """Retriever configurations that `llm-eval experiment` compares."""
    experiment: ExperimentSettings = field(default_factory=ExperimentSettings)


# --- helpers over nodes -------------------------------------------------------------


def _where(node: Node) -> Location:
    return Location(node.file, node.line, node.path)


def _string(node: Node) -> str:
    if not isinstance(node.value, str) or not node.value.strip():
        raise node.error("must be a non-empty string")
    return node.value


def _integer(node: Node, minimum: int) -> int:
    value = node.value
    if isinstance(value, bool) or not isinstance(value, int) or value < minimum:
        raise node.error(f"must be a whole number >= {minimum}, got {value!r}")
    return value


def _proportion(node: Node) -> float:
    value = node.value
    if isinstance(value, bool) or not isinstance(value, int | float) or not 0 <= value <= 1:
        raise node.error(f"must be a number between 0 and 1, got {value!r}")
    return float(value)


def _metric(node: Node) -> str:
    try:
        return parse_metric(_string(node)).name
    except InputError as exc:
        raise node.error(exc.reason) from None


def _limit(node: Node, metric: str) -> float:
    """A threshold: a proportion, a number for a ratio, for latency milliseconds."""
    if parse_metric(metric).family.unit == "ms":
        value = node.value
        if (
            isinstance(value, bool)
            or not isinstance(value, int | float)
            or not 0 <= value < 1e12  # also refuses .inf and .nan
        ):
            raise node.error(f"must be a number of milliseconds >= 0, got {value!r}")
        return float(value)
    if parse_metric(metric).family.unit == "ratio":
        value = node.value
        if isinstance(value, bool) or not isinstance(value, int | float) or not -1e9 < value < 1e9:
            raise node.error(f"must be a number, got {value!r}")
        return float(value)
    return _proportion(node)


_RELATIVE = re.compile(r"^\+\s*(\d+(?:\.\d+)?)\s*%$")


def _regression(node: Node, metric: str) -> tuple[float, bool]:
    """regression_max: in metric units, or relative (`+20%`) for service metrics."""
    if isinstance(node.value, str):
        match = _RELATIVE.match(node.value.strip())
        if match is None or not parse_metric(metric).lower_is_better:
            reason = "a relative limit like '+20%' is for latency and error_rate gates"
            if parse_metric(metric).lower_is_better:
                reason = f"expected a number or a relative limit like '+20%', got {node.value!r}"
            raise node.error(reason)
        share = float(match.group(1)) / 100
        if not math.isfinite(share) or share > 1e9:
            raise node.error(f"expected a relative limit like '+20%', got {node.value!r}")
        return share, True
    return _limit(node, metric), False


# --- llm-eval.yaml ------------------------------------------------------------------

_CONFIG_KEYS = frozenset(
    {
        "gold",
        "corpus",
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


def load_config(path: str | Path = defaults.CONFIG) -> EvalConfig:
    """Read and validate `llm-eval.yaml`."""
    root = load_yaml(path)
    keys = root.mapping(_CONFIG_KEYS, required=frozenset({"gold"}))
    metrics = (
        tuple(_metric(m) for m in keys["metrics"].items())
        if "metrics" in keys
        else defaults.METRICS
    )
    top_k = _integer(keys["top_k"], 1) if "top_k" in keys else defaults.TOP_K
    corpus = Path(_string(keys["corpus"])) if "corpus" in keys else None
    retriever = _retriever(keys["retriever"], corpus) if "retriever" in keys else None
    config = EvalConfig(
        path=str(path),
        gold=tuple(_gold_source(n) for n in keys["gold"].items()),
        corpus=corpus,
        retriever=retriever,
        metrics=metrics,
        relevance_level=_integer(keys["relevance_level"], 1) if "relevance_level" in keys else 1,
        top_k=top_k,
        baseline=Path(_string(keys["baseline"])) if "baseline" in keys else defaults.BASELINE,
        output=Path(_string(keys["output"])) if "output" in keys else defaults.OUTPUT,
        cache=_switch(keys["cache"]) if "cache" in keys else False,
        judge=_endpoint(keys["judge"], "SETTINGS") if "judge" in keys else None,
        embeddings=_endpoint(keys["embeddings"], "EMBEDDING_SETTINGS")
        if "embeddings" in keys
        else None,
        gain=_gain(keys["gain"]) if "gain" in keys else Weights(),
        variants=_variants(keys["variants"], retriever, corpus, top_k)
        if "variants" in keys
        else (),
        **_beyond_ids(keys),
    )
    if not config.gold:
        raise keys["gold"].error("list at least one gold file")
    if "experiment" in keys:
        config = replace(config, experiment=_experiment(keys["experiment"], config))
    if "metrics" in keys:
        check_cutoffs(config.metrics, top_k, keys["metrics"])
        _check_versions(config, config.metrics, keys["metrics"].error)
        _check_judge(config, config.metrics, keys["metrics"].error)
    return config


def _beyond_ids(keys: Mapping[str, Node]) -> dict[str, Any]:
    """The EvalConfig fields of page and text matching, rejection and stale context."""
    default = MatchSettings()
    tolerance = (
        _integer(keys["page_tolerance"], 0) if "page_tolerance" in keys else default.page_tolerance
    )
    f1 = _f1_threshold(keys["f1_threshold"]) if "f1_threshold" in keys else default.f1_threshold
    rejection = (
        _number(keys["rejection_score_threshold"]) if "rejection_score_threshold" in keys else None
    )
    return {
        "matching": MatchSettings(tolerance, f1),
        "rejection_score_threshold": rejection,
        "versions": Path(_string(keys["versions"])) if "versions" in keys else None,
    }


def _f1_threshold(node: Node) -> float:
    value = _proportion(node)
    if value == 0:
        raise node.error("must be above 0 (every chunk would match), got 0")
    return value


def _number(node: Node) -> float:
    value = node.value
    if isinstance(value, bool) or not isinstance(value, int | float) or not math.isfinite(value):
        raise node.error(f"must be a number, got {value!r}")
    return float(value)


def _gain(node: Node) -> Weights:
    keys = node.mapping(frozenset({"alpha", "beta", "gamma", "k", "chunk_words"}))
    changes: dict[str, Any] = {}
    for name in ("alpha", "beta", "gamma"):
        if name in keys:
            changes[name] = weight = _number(keys[name])
            if weight < 0:
                raise keys[name].error(f"must be a number >= 0, got {weight:g}")
    for name in ("k", "chunk_words"):
        if name in keys:
            changes[name] = _integer(keys[name], 1)
    return replace(Weights(), **changes)


def _endpoint(node: Node, table: str) -> Mapping[str, Any]:
    """A model endpoint's settings, checked against `llm_eval.endpoints.settings.<table>`."""
    from llm_eval.endpoints import settings as declared

    known = getattr(declared, table)
    keys = node.mapping(frozenset(known))
    given = {name: keys[name].plain() for name in known if name in keys}
    try:
        return checked_settings(given, known)
    except InputError as exc:  # a bad setting is pointed at; a missing one at the entry
        where = keys[exc.key] if exc.key is not None and exc.key in keys else node
        raise where.error(exc.reason) from None


def _check_judge(
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
            f"answer_relevance compares embeddings; add `embeddings:` (base_url, model) to "
            f"{config.path}"
        )


def _check_versions(
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
    if isinstance(node.value, str):
        return GoldSource(_string(node))
    keys = node.mapping(frozenset({"path", "tier", "matching"}), required=frozenset({"path"}))
    tier = _string(keys["tier"]) if "tier" in keys else None
    matching = _matching(keys["matching"]) if "matching" in keys else "auto"
    return GoldSource(_string(keys["path"]), tier, matching)


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
        kind = retriever_kind(_string(kind_node))
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
    keys = node.mapping(other_keys | {"max_error_rate", *kind.settings})
    given = {name: keys[name].plain() for name in kind.settings if name in keys}
    try:
        settings = kind.checked({**base.settings, **given})
    except InputError as exc:
        where = keys[exc.key] if exc.key is not None and exc.key in keys else node
        raise where.error(exc.reason) from None
    if kind.needs_corpus and corpus is None:
        raise node.error(f"the {kind.name} retriever needs a `corpus` file in the config")
    rate = keys.get("max_error_rate")
    max_error_rate = _proportion(rate) if rate is not None else base.max_error_rate
    lines = tuple((name, keys[name].line) for name in kind.settings if name in keys)
    return RetrieverConfig(kind.name, settings, max_error_rate, _where(node), lines)


def _variants(
    node: Node, base: RetrieverConfig | None, corpus: Path | None, top_k: int
) -> tuple[Variant, ...]:
    """Each variant's retriever: its own `kind` and settings, or the base retriever's
    settings with the variant's written over them."""
    variants: list[Variant] = []
    seen: dict[str, int] = {}
    for item in node.items():
        keys = item.mapping(frozenset({"name", "retriever", "top_k"}), frozenset({"name"}))
        name = _string(keys["name"])
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
        k = _integer(keys["top_k"], 1) if "top_k" in keys else top_k
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
    keys = node.mapping(frozenset({"reference", "quality", "lift"}))
    names = [v.name for v in config.variants]

    def variant(child: Node) -> str:
        name = _string(child)
        if name not in names:
            raise child.error(f"no variant is named {name!r} (variants: {', '.join(names)})")
        return name

    lifts = []
    for item in keys["lift"].items() if "lift" in keys else ():
        parts = item.mapping(
            frozenset({"name", "metric", "base", "variant"}),
            frozenset({"metric", "base", "variant"}),
        )
        metric = _metric(parts["metric"])
        base, over = variant(parts["base"]), variant(parts["variant"])
        label = _string(parts["name"]) if "name" in parts else f"{over} over {base}"
        lifts.append(Lift(label, metric, base, over))
    return ExperimentSettings(
        reference=variant(keys["reference"]) if "reference" in keys else None,
        quality=_metric(keys["quality"]) if "quality" in keys else None,
        lifts=tuple(lifts),
    )


# --- ship-criteria.yaml -------------------------------------------------------------

_GATE_KEYS = frozenset(
    {
        "name",
        "metric",
        "threshold",
        "regression_max",
        "severity",
        "scope",
        "statistics",
        "per_tag",
        "judged",
    }
)
_STATISTICS_KEYS = frozenset(
    {"alpha", "significance", "resamples", "seed", "min_n", "on_inconclusive"}
)
_DERIVED = re.compile(r"^(?:retrieval_)?(?P<metric>.+?)(?:_at_(?P<k>\d+))?$")


def load_criteria(path: str | Path = defaults.CRITERIA) -> Criteria:
    """Read and validate `ship-criteria.yaml`."""
    root = load_yaml(path)
    keys = root.mapping(frozenset({"gates", "statistics"}), required=frozenset({"gates"}))
    defaults = (
        _statistics(keys["statistics"], Statistics()) if "statistics" in keys else Statistics()
    )
    gates = tuple(_gate(node, defaults) for node in keys["gates"].items())
    if not gates:  # no gate would pass every change without a word
        raise keys["gates"].error("list at least one gate")
    seen: dict[str, Gate] = {}
    for gate in gates:
        if gate.name in seen:
            first = seen[gate.name].where.line
            raise gate.where.error(f"duplicate gate name {gate.name!r} (first at line {first})")
        seen[gate.name] = gate
    return Criteria(str(path), gates, defaults)


def _gate(node: Node, defaults: Statistics) -> Gate:
    keys = node.mapping(_GATE_KEYS, required=frozenset({"name"}))
    name = _string(keys["name"])
    metric = _metric(keys["metric"]) if "metric" in keys else _derived_metric(keys["name"])
    threshold = _limit(keys["threshold"], metric) if "threshold" in keys else None
    regression, relative = (
        _regression(keys["regression_max"], metric) if "regression_max" in keys else (None, False)
    )
    if threshold is None and regression is None:
        raise node.error("a gate needs a `threshold`, a `regression_max`, or both")
    judged = _flag(keys["judged"]) if "judged" in keys else False
    if parse_metric(metric).kind == "judged" and not judged:
        raise (keys.get("metric") or keys["name"]).error(
            f"{metric} is judged by a model, so it only reports; write `judged: true` in "
            "this gate to let it block the merge"
        )
    per_tag, per_tag_tags = _per_tag(keys["per_tag"]) if "per_tag" in keys else (False, ())
    if per_tag and regression is None:
        raise keys["per_tag"].error("per-tag checks need a `regression_max` on the gate")
    return Gate(
        name=name,
        metric=metric,
        threshold=threshold,
        regression_max=regression,
        regression_relative=relative,
        severity=_severity(keys["severity"]) if "severity" in keys else "error",
        scope=_scope(keys["scope"]) if "scope" in keys else Scope(),
        where=_where(node),
        scope_where=_where(keys.get("scope", node)),
        statistics=_statistics(keys["statistics"], defaults) if "statistics" in keys else defaults,
        per_tag=per_tag,
        per_tag_tags=per_tag_tags,
    )


def _flag(node: Node) -> bool:
    if not isinstance(node.value, bool):
        raise node.error(f"expected true or false, got {node.value!r}")
    return node.value


def _per_tag(node: Node) -> tuple[bool, tuple[str, ...]]:
    if isinstance(node.value, bool):
        return node.value, ()
    if not isinstance(node.value, list):
        raise node.error("expected true, false or a list of tags")
    tags = tuple(_string(t) for t in node.items())
    if not tags:
        raise node.error("list at least one tag, or write true for every tag")
    return True, tags


def _switch(node: Node) -> bool:
    # YAML 1.1 reads on/off as booleans; accept the quoted words too.
    if isinstance(node.value, bool):
        return node.value
    if node.value in ("on", "off"):
        return node.value == "on"
    raise node.error(f"expected on or off, got {node.value!r}")


def _statistics(node: Node, base: Statistics) -> Statistics:
    keys = node.mapping(_STATISTICS_KEYS)
    changes: dict[str, Any] = {}
    if "alpha" in keys:
        alpha = _proportion(keys["alpha"])
        if not 0 < alpha < 0.5:  # each one-sided test at alpha: a 1 - 2 alpha interval
            raise keys["alpha"].error(f"must be between 0 and 0.5 (exclusive), got {alpha!r}")
        changes["alpha"] = alpha
    if "significance" in keys:
        changes["significance"] = _switch(keys["significance"])
    if "resamples" in keys:
        changes["resamples"] = _integer(keys["resamples"], 100)
    if "seed" in keys:
        changes["seed"] = _integer(keys["seed"], 0)
    if "min_n" in keys:
        changes["min_n"] = _integer(keys["min_n"], 1)
    if "on_inconclusive" in keys:
        node = keys["on_inconclusive"]
        if node.value not in ("fail", "warn"):
            raise node.error(f"expected 'fail' or 'warn', got {node.value!r}")
        changes["on_inconclusive"] = node.value
    return replace(base, **changes)


def _derived_metric(node: Node) -> str:
    match = _DERIVED.match(_string(node))
    if match is not None:
        spelled = match["metric"] + (f"@{match['k']}" if match["k"] else "")
        try:
            return parse_metric(spelled).name
        except InputError:
            pass
    raise node.error(
        "cannot tell the metric from this name; add `metric:` "
        "(names like recall_at_10, retrieval_recall_at_5 or retrieval_mrr say it)"
    )


def _severity(node: Node) -> Severity:
    if node.value == "error":
        return "error"
    if node.value == "warning":
        return "warning"
    raise node.error(f"expected 'error' or 'warning', got {node.value!r}")


def _scope(node: Node) -> Scope:
    keys = node.mapping(frozenset({"tier", "tags"}))
    tier = _string(keys["tier"]) if "tier" in keys else None
    tags: tuple[str, ...] = ()
    if "tags" in keys:
        tags_node = keys["tags"]
        items = [tags_node] if isinstance(tags_node.value, str) else list(tags_node.items())
        tags = tuple(_string(t) for t in items)
    return Scope(tier, tags)


def check_against_gold(criteria: Criteria, gold: GoldSet) -> None:
    """Every tier and tag a gate names must exist in the gold set."""
    tiers, tags = set(gold.tiers()), set(gold.tags())
    for gate in criteria.gates:
        scope = gate.scope
        if scope.tier is not None and scope.tier not in tiers:
            raise gate.scope_where.error(
                f"unknown tier {scope.tier!r}; the gold set has tiers {', '.join(sorted(tiers))}"
            )
        for tag in (*scope.tags, *gate.per_tag_tags):
            if tag not in tags:
                raise gate.scope_where.error(f"unknown tag {tag!r}; it is on no gold query")
    _check_reviewed(criteria, gold)


def _check_reviewed(criteria: Criteria, gold: GoldSet) -> None:
    """A synthetic question may gate only once a person has reviewed it."""
    gating = [g for g in criteria.gates if g.severity == "error"]
    for query in gold.queries:
        if query.reviewed:
            continue
        for gate in gating:
            tier = gate.scope.tier
            if tier is None or tier == query.tier:
                raise InputError(
                    f"a synthetic question that nobody reviewed is in tier {query.tier}, which "
                    f"the error gate {gate.name!r} gates; review it with `llm-eval gold review` "
                    "or move it to a tier no error gate reads",
                    path=query.path,
                    line=query.line,
                    key="reviewed",
                )


def check_against_config(criteria: Criteria, config: EvalConfig) -> None:
    """Gate metrics must fit within the retrieved top_k (and find the data they need)."""
    for gate in criteria.gates:
        _check_versions(config, (gate.metric,), gate.where.error)
        _check_judge(config, (gate.metric,), gate.where.error)
        k = parse_metric(gate.metric).k
        if k is not None and k > config.top_k:
            raise gate.where.error(
                f"{gate.metric} needs the top {k} results but {config.path} sets top_k "
                f"{config.top_k}"
            )
