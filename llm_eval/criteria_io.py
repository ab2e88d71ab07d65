"""`config/ship-criteria.yaml`, validated whole before any work starts, and checked
against the config and the gold set it will gate.

Every error names the file, the line and the key path. Unknown keys are errors: a
mistyped key must never switch a gate off silently.
"""

from __future__ import annotations

import math
import re
from dataclasses import replace
from pathlib import Path
from typing import Any

from llm_eval import defaults
from llm_eval.config import EvalConfig
from llm_eval.config_io import check_judge, check_versions
from llm_eval.criteria import Criteria, Drift, Gate, Scope, Severity, Statistics
from llm_eval.errors import InputError
from llm_eval.gold import GoldSet
from llm_eval.metrics import parse_metric
from llm_eval.yamlfile import Node, load_yaml
from llm_eval.yamlvalues import integer, location_of, metric_name, proportion, string, switch


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
    return proportion(node)


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


GATE_KEYS = frozenset(
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
        "drift_max",
        "since",
    }
)
STATISTICS_KEYS = frozenset(
    {"alpha", "significance", "resamples", "seed", "min_n", "on_inconclusive"}
)
CRITERIA_KEYS = frozenset({"gates", "statistics"})
SCOPE_KEYS = frozenset({"tier", "tags"})
"""With GATE_KEYS and STATISTICS_KEYS, every key `ship-criteria.yaml` may hold; the JSON
Schema editors read (`json_schemas.py`) is made from them."""
_DERIVED = re.compile(r"^(?:retrieval_)?(?P<metric>.+?)(?:_at_(?P<k>\d+))?$")


def load_criteria(path: str | Path = defaults.CRITERIA) -> Criteria:
    """Read and validate `ship-criteria.yaml`."""
    root = load_yaml(path)
    keys = root.mapping(CRITERIA_KEYS, required=frozenset({"gates"}))
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
    keys = node.mapping(GATE_KEYS, required=frozenset({"name"}))
    name = string(keys["name"])
    metric = metric_name(keys["metric"]) if "metric" in keys else _derived_metric(keys["name"])
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
        where=location_of(node),
        scope_where=location_of(keys.get("scope", node)),
        statistics=_statistics(keys["statistics"], defaults) if "statistics" in keys else defaults,
        per_tag=per_tag,
        per_tag_tags=per_tag_tags,
        drift=_drift(keys, metric),
    )


def _drift(keys: dict[str, Node], metric: str) -> Drift | None:
    """`drift_max` and `since`, which come together."""
    if "drift_max" not in keys and "since" not in keys:
        return None
    if "since" not in keys:
        raise keys["drift_max"].error(
            "drift_max needs `since:` (a git ref, a tag, or a number of refreshes)"
        )
    if "drift_max" not in keys:
        raise keys["since"].error("since: is the reference of `drift_max`; set both or neither")
    since_node = keys["since"]
    since = since_node.value
    if isinstance(since, bool) or not isinstance(since, int | str) or since in ("", 0):
        raise since_node.error(
            f"expected a git ref or tag, or a number of refreshes >= 1, got {since!r}"
        )
    if isinstance(since, str) and since.startswith("-"):
        raise since_node.error(f"expected a git ref or tag, got {since!r}")
    if isinstance(since, int) and since < 1:
        raise since_node.error(f"expected a number of refreshes >= 1, got {since!r}")
    limit = keys["drift_max"]
    if not parse_metric(metric).pairable:
        raise limit.error(f"{metric} is not scored per query, so it has no drift check to pair")
    if isinstance(limit.value, str):
        raise limit.error(f"expected a number in metric units, got {limit.value!r}")
    return Drift(_limit(limit, metric), since, location_of(since_node))


def _flag(node: Node) -> bool:
    if not isinstance(node.value, bool):
        raise node.error(f"expected true or false, got {node.value!r}")
    return node.value


def _per_tag(node: Node) -> tuple[bool, tuple[str, ...]]:
    if isinstance(node.value, bool):
        return node.value, ()
    if not isinstance(node.value, list):
        raise node.error("expected true, false or a list of tags")
    tags = tuple(string(t) for t in node.items())
    if not tags:
        raise node.error("list at least one tag, or write true for every tag")
    return True, tags


def _statistics(node: Node, base: Statistics) -> Statistics:
    keys = node.mapping(STATISTICS_KEYS)
    changes: dict[str, Any] = {}
    if "alpha" in keys:
        alpha = proportion(keys["alpha"])
        if not 0 < alpha < 0.5:  # each one-sided test at alpha: a 1 - 2 alpha interval
            raise keys["alpha"].error(f"must be between 0 and 0.5 (exclusive), got {alpha!r}")
        changes["alpha"] = alpha
    if "significance" in keys:
        changes["significance"] = switch(keys["significance"])
    if "resamples" in keys:
        changes["resamples"] = integer(keys["resamples"], 100)
    if "seed" in keys:
        changes["seed"] = integer(keys["seed"], 0)
    if "min_n" in keys:
        changes["min_n"] = integer(keys["min_n"], 1)
    if "on_inconclusive" in keys:
        node = keys["on_inconclusive"]
        if node.value not in ("fail", "warn"):
            raise node.error(f"expected 'fail' or 'warn', got {node.value!r}")
        changes["on_inconclusive"] = node.value
    return replace(base, **changes)


def _derived_metric(node: Node) -> str:
    match = _DERIVED.match(string(node))
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
    keys = node.mapping(SCOPE_KEYS)
    tier = string(keys["tier"]) if "tier" in keys else None
    tags: tuple[str, ...] = ()
    if "tags" in keys:
        tags_node = keys["tags"]
        items = [tags_node] if isinstance(tags_node.value, str) else list(tags_node.items())
        tags = tuple(string(t) for t in items)
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
        check_versions(config, (gate.metric,), gate.where.error)
        check_judge(config, (gate.metric,), gate.where.error)
        k = parse_metric(gate.metric).k
        if k is not None and k > config.top_k:
            raise gate.where.error(
                f"{gate.metric} needs the top {k} results but {config.path} sets top_k "
                f"{config.top_k}"
            )
