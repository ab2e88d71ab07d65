"""JSON Schemas of `llm-eval.yaml`, `ship-criteria.yaml` and `report.json`, for editors.

The keys come from the loaders' own tables (`config_io.CONFIG_KEYS` and its sections',
`criteria_io.GATE_KEYS` and the rest), the settings of a retriever kind and of a model
endpoint from their `Setting` tables, with the JSON types their checks accept, and
report.json's schema from the checks `report_schema.REPORT` reads it with. A key a
loader gains without a type here fails the generation (`KeyError`), so the schemas
cannot fall behind the loaders. The committed files (`llm_eval/scaffold/schemas/`, and
`docs/schemas/` for the site) are written by `scripts/build_schemas.py`; a test checks
that they equal what this module makes.

A schema checks keys, types, ranges and the few rules between keys it can state; what
only the loader can check is listed in `docs/reference/configuration.md` (Editors).
"""

from __future__ import annotations

import json
from collections.abc import Callable, Iterable, Mapping
from typing import Any

from llm_eval import config_io, criteria_io
from llm_eval.defaults import MAX_BUILDS
from llm_eval.experiment.latency_clock import CLOCKS
from llm_eval.gold import MATCHINGS
from llm_eval.metrics import families
from llm_eval.report_schema import REPORT
from llm_eval.retrievers import RetrieverKind, retriever_kinds
from llm_eval.schema import json_schema
from llm_eval.settings import Setting

DRAFT = "http://json-schema.org/draft-07/schema#"
"""Draft 7: the newest the YAML language server (VS Code's YAML extension) reads whole."""

Schema = dict[str, Any]

_LARGEST = 1.7976931348623157e308
_TEXT: Schema = {"type": "string", "pattern": r"\S"}
_FINITE: Schema = {"type": "number", "minimum": -_LARGEST, "maximum": _LARGEST}
_PROPORTION: Schema = {"type": "number", "minimum": 0, "maximum": 1}
_SWITCH: Schema = {"anyOf": [{"type": "boolean"}, {"enum": ["on", "off"]}]}


def _whole(minimum: int) -> Schema:
    return {"type": "integer", "minimum": minimum}


def _object(
    keys: Iterable[str], values: Mapping[str, Schema], required: Iterable[str] = ()
) -> Schema:
    """An object of exactly the loader's `keys`, each typed from `values`."""
    schema: Schema = {
        "type": "object",
        "properties": {key: values[key] for key in sorted(keys)},
        "additionalProperties": False,
    }
    return schema | ({"required": sorted(required)} if required else {})


def _metric() -> Schema:
    """A metric name, with the built-in ones as examples (any name of the registry, or a
    plugin's, is accepted: `llm-eval metrics` lists them)."""
    names = [
        f"{family.name}@10" if family.cutoff == "required" else family.name
        for family in families()
        if family.source == "built-in"
    ]
    return _TEXT | {"examples": names}


def _list(item: Schema, minimum: int = 0) -> Schema:
    return {"type": "array", "items": item} | ({"minItems": minimum} if minimum else {})


# Values a numeric or true/false setting's check is tried with; a type is allowed when
# the check accepts one of its values. Other settings (text, lists, mappings, paths) are
# left untyped: no set of probes can show every shape their checks accept.
_PROBES: dict[str, tuple[Any, ...]] = {
    "boolean": (True, False),
    "integer": (0, 1, 2, 3, 5, 8, 10, 16, 32, 64, 100, 384, 1000, 10**6),
    "number": (0.1, 0.25, 0.5, 0.75, 0.9, 1.2, 1.5, 2.5, 10.5, 1000.5),
    "string": ("x", "1", "on", "true"),
    "null": (None,),
}


def _setting_types(setting: Setting) -> list[str]:
    """The JSON types a numeric or true/false setting's check accepts a value of; none
    (any value) for the others."""
    if not isinstance(setting.default, bool | int | float):
        return []
    types = [
        name
        for name, values in _PROBES.items()
        if any(setting.check(value) is None for value in values)
    ]
    if "integer" in types and "number" in types:
        types.remove("integer")
    return types


def setting_schema(setting: Setting) -> Schema:
    """A declared setting's schema: the types its check accepts, its help, its default."""
    schema: Schema = {"description": setting.help}
    types = _setting_types(setting)
    if types:
        schema["type"] = types[0] if len(types) == 1 else types
    if "number" in types:  # finite: YAML's 1e400 reads as an infinity
        schema |= {"minimum": -_LARGEST, "maximum": _LARGEST}
    if setting.default is not None and not setting.required:
        schema["default"] = setting.default
    return schema


def _settings_object(settings: Mapping[str, Setting], extra: Mapping[str, Schema]) -> Schema:
    values = {name: setting_schema(s) for name, s in settings.items()} | dict(extra)
    required = [name for name, s in settings.items() if s.required]
    return _object(values, values, required)


def _retriever(kind: RetrieverKind[Any]) -> Schema:
    extra: dict[str, Schema] = {"kind": {"const": kind.name, "description": kind.description}}
    extra["max_error_rate"] = _PROPORTION | {
        "description": "the share of queries the retriever may fail on before the run does"
    }
    extra["builds"] = {
        "type": "integer",
        "minimum": 1,
        "maximum": MAX_BUILDS,
        "description": "how many times the retriever is built, each build answering every "
        "query, so that the gate's test holds the variance between builds",
    }
    keys = set(config_io.RETRIEVER_KEYS) | set(kind.settings)
    schema = _settings_object(kind.settings, extra)
    assert set(schema["properties"]) == keys, "a retriever key has no schema"
    schema["required"] = sorted({"kind", *schema.get("required", ())})
    return schema


def _retrievers() -> Schema:
    kinds = retriever_kinds()
    return {
        "type": "object",
        "required": ["kind"],
        "properties": {"kind": {"enum": [kind.name for kind in kinds]}},
        "oneOf": [_retriever(kind) for kind in kinds],
    }


def _variant_retriever() -> Schema:
    """A variant's retriever: a kind of its own, or settings over the base retriever's."""
    names = {name for kind in retriever_kinds() for name in kind.settings}
    names |= set(config_io.RETRIEVER_KEYS) - {"kind"}
    overrides = {
        "type": "object",
        "not": {"required": ["kind"]},
        "propertyNames": {"enum": sorted(names)},
    }
    return {"anyOf": [{"$ref": "#/definitions/retriever"}, overrides]}


def _gold_entry() -> Schema:
    tier = _TEXT | {"description": "the tier every query of the entry is in"}
    values = {
        "path": _TEXT | {"description": "a gold JSONL file"},
        "tier": tier,
        "matching": {"enum": list(MATCHINGS)},
        "beir": _TEXT | {"description": "a BEIR folder"},
        "split": _TEXT | {"description": "the qrels split (default test)"},
        "topics": _TEXT | {"description": "TREC topics"},
        "qrels": _TEXT | {"description": "TREC qrels or a BEIR TSV"},
    }
    return {
        "anyOf": [
            _TEXT,
            _object(config_io.GOLD_FILE_KEYS, values, ["path"]),
            _object(config_io.GOLD_BEIR_KEYS, values, ["beir"]),
            _object(config_io.GOLD_TOPICS_KEYS, values, ["topics", "qrels"]),
        ]
    }


def _endpoint(table: str) -> Schema:
    from llm_eval.endpoints import settings

    declared: Mapping[str, Setting] = getattr(settings, table)
    return _settings_object(declared, {})


def config_schema() -> Schema:
    """The JSON Schema of `llm-eval.yaml`."""
    number_above_0 = _FINITE | {"minimum": 0}
    gain = {"alpha": number_above_0, "beta": number_above_0, "gamma": number_above_0}
    gain |= {"k": _whole(1), "chunk_words": _whole(1)}
    lift = {"name": _TEXT, "metric": _metric(), "base": _TEXT, "variant": _TEXT}
    experiment = {
        "reference": _TEXT,
        "quality": _metric(),
        "lift": _list(_object(config_io.LIFT_KEYS, lift, ["metric", "base", "variant"])),
        "latency": {"enum": list(CLOCKS)},
    }
    variant = {"name": _TEXT, "retriever": _variant_retriever(), "top_k": _whole(1)}
    values = {
        "gold": _list(_gold_entry(), 1),
        "corpus": _TEXT,
        "retriever": {"$ref": "#/definitions/retriever"},
        "metrics": _list(_metric()),
        "relevance_level": _whole(1),
        "top_k": _whole(1),
        "baseline": _TEXT,
        "output": _TEXT,
        "page_tolerance": _whole(0),
        "f1_threshold": {"type": "number", "exclusiveMinimum": 0, "maximum": 1},
        "rejection_score_threshold": _FINITE,
        "versions": _TEXT,
        "cache": _SWITCH,
        "labels_in_corpus": _SWITCH,
        "judge": _endpoint("SETTINGS"),
        "embeddings": _endpoint("EMBEDDING_SETTINGS"),
        "gain": _object(config_io.GAIN_KEYS, gain),
        "variants": _list(_object(config_io.VARIANT_KEYS, variant, ["name"]), 2),
        "experiment": _object(config_io.EXPERIMENT_KEYS, experiment),
    }
    return _document(
        "llm-eval.yaml",
        _object(config_io.CONFIG_KEYS, values, ["gold"])
        | {"definitions": {"retriever": _retrievers()}},
    )


def criteria_schema() -> Schema:
    """The JSON Schema of `ship-criteria.yaml`."""
    statistics = {
        "alpha": {"type": "number", "exclusiveMinimum": 0, "exclusiveMaximum": 0.5},
        "significance": _SWITCH,
        "resamples": _whole(100),
        "seed": _whole(0),
        "min_n": _whole(1),
        "on_inconclusive": {"enum": ["fail", "warn"]},
    }
    scope = {"tier": _TEXT, "tags": {"anyOf": [_TEXT, _list(_TEXT)]}}
    relative = {"type": "string", "pattern": r"^\s*\+\s*\d+(\.\d+)?\s*%\s*$"}
    gate = {
        "name": _TEXT,
        "metric": _metric(),
        "threshold": _FINITE,
        "regression_max": {"anyOf": [_FINITE, relative]},
        "severity": {"enum": ["error", "warning"]},
        "scope": _object(criteria_io.SCOPE_KEYS, scope),
        "statistics": {"$ref": "#/definitions/statistics"},
        "per_tag": {"anyOf": [{"type": "boolean"}, _list(_TEXT, 1)]},
        "judged": {"type": "boolean"},
        "drift_max": _FINITE,
        "since": {"anyOf": [_whole(1), {"type": "string", "pattern": "^[^-]"}]},
    }
    gate_schema = _object(criteria_io.GATE_KEYS, gate, ["name"]) | {
        "anyOf": [{"required": ["threshold"]}, {"required": ["regression_max"]}],
        "dependencies": {"drift_max": ["since"], "since": ["drift_max"]},
        "if": {"required": ["per_tag"], "properties": {"per_tag": {"not": {"const": False}}}},
        "then": {"required": ["regression_max"]},
    }
    top = {"gates": _list(gate_schema, 1), "statistics": {"$ref": "#/definitions/statistics"}}
    return _document(
        "ship-criteria.yaml",
        _object(criteria_io.CRITERIA_KEYS, top, ["gates"])
        | {"definitions": {"statistics": _object(criteria_io.STATISTICS_KEYS, statistics)}},
    )


def report_json_schema() -> Schema:
    """The JSON Schema of `report.json`: the keys the renderings read (others may be
    added), from the checks it is read with."""
    return _document("report.json", json_schema(REPORT))


def _document(title: str, schema: Schema) -> Schema:
    return {"$schema": DRAFT, "title": f"llm-eval: {title}"} | schema


SCHEMAS: dict[str, Callable[[], Schema]] = {
    "llm-eval.schema.json": config_schema,
    "ship-criteria.schema.json": criteria_schema,
    "report.schema.json": report_json_schema,
}
"""File name → its schema, as committed in `llm_eval/scaffold/schemas/` and
`docs/schemas/`."""


def schema_text(name: str) -> str:
    """The committed text of one schema file."""
    return json.dumps(SCHEMAS[name](), indent=2, ensure_ascii=False) + "\n"
