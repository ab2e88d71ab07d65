"""The JSON Schemas editors read: equal to what the code makes, and in step with the
loaders on every config file the repository holds and on the hostile corpus.

Each file is read by the loader and checked by an independent validator (jsonschema)
against the schema: what the loader accepts the schema must accept, and what the loader
refuses the schema must refuse, but for the refusals listed in OUT_OF_REACH, which no
JSON Schema can see.
"""

from __future__ import annotations

import re
import tomllib
from collections.abc import Callable
from pathlib import Path
from typing import Any

import jsonschema
import pytest

from llm_eval.config_io import load_config
from llm_eval.criteria_io import load_criteria
from llm_eval.errors import InputError
from llm_eval.json_schemas import SCHEMAS, schema_text
from llm_eval.yamlfile import load_yaml

ROOT = Path(__file__).resolve().parent.parent
HOSTILE = ROOT / "tests" / "hostile"
COMMITTED = (ROOT / "llm_eval" / "scaffold" / "schemas", ROOT / "docs" / "schemas")

OUT_OF_REACH = {
    "YAML the loader refuses before any key is read (anchors, tags, duplicate keys, "
    "encoding, nesting)": (
        r"invalid YAML|YAML nested deeper|YAML anchors|not valid UTF-8|duplicate key|"
        r"keys must be strings"
    ),
    "a number that is not a number (NaN)": r"got nan\b",
    "a file or folder that does not exist": r"no such (file|folder)|does not exist",
    "a gate's limit, whose range and form depend on its metric's unit": (
        r"gates\[\d+\]\.(threshold|regression_max|drift_max): "
        r"(must be a number between 0 and 1|a relative limit)"
    ),
    "a metric name the registry does not know": r"unknown metric",
    "a metric cutoff above top_k": r"needs the top \d+ results but top_k",
    "a metric that needs another section (versions, judge, embeddings)": (
        r"needs a corpus-versions sidecar|is judged by a model|compares embeddings"
    ),
    "a gate name that does not say its metric": r"cannot tell the metric from this name",
    "a duplicate gate or variant name": r"duplicate (gate|variant) name",
    "a variant name with characters a report cannot show": r"a variant name may not hold",
    "an experiment naming a variant that does not exist": r"no variant is named",
    "an environment variable that is not set": r"environment variable|variable reference",
    "a `${...}` form inside a value that the tool does not support (nested, unclosed)": (
        r"inside a default is not supported|unclosed \$\{"
    ),
    "a path where a folder must be made under a file": r"is not a folder",
    "a value that reaches a step output, a header or a shell holding a line break": (
        r"holds a line break"
    ),
    "the range or form of a retriever's or endpoint's setting (their checks are code)": (
        r"(retriever|judge|embeddings)\.(?!max_error_rate)\w+(\.\w+)*: must"
    ),
    "settings of a retriever or endpoint that depend on each other": (
        r"\bnot both\b|\beither\b|needs a `corpus`|no base `retriever`"
    ),
}
"""Refusals a schema cannot make, each with the pattern of the loader's message."""

SCHEMA_FOR = {"config": "llm-eval.schema.json", "criteria": "ship-criteria.schema.json"}
LOADERS: dict[str, Callable[[Path], Any]] = {"config": load_config, "criteria": load_criteria}


@pytest.mark.parametrize("name", sorted(SCHEMAS))
@pytest.mark.parametrize("folder", COMMITTED, ids=lambda p: p.parent.name)
def test_committed_schemas_are_what_the_code_makes(name: str, folder: Path) -> None:
    assert (folder / name).read_text(encoding="utf-8") == schema_text(name), (
        f"{folder / name} is stale: run python scripts/build_schemas.py"
    )


@pytest.mark.parametrize("name", sorted(SCHEMAS))
def test_schemas_are_valid_draft_7(name: str) -> None:
    jsonschema.Draft7Validator.check_schema(SCHEMAS[name]())


def _repository_files() -> list[tuple[str, str, Path, Path]]:
    """(id, kind, file, the folder its relative paths are read from)."""
    files = []
    for path in sorted(ROOT.glob("config/**/*.yaml")) + sorted(ROOT.glob("gold/**/*.yaml")):
        files.append((path, ROOT))
    for path in sorted(ROOT.glob("examples/**/*.yaml")):
        files.append((path, ROOT))
    files += [(p, HOSTILE / "base") for p in sorted((HOSTILE / "base" / "config").glob("*.yaml"))]
    files += [(p, ROOT) for p in sorted((ROOT / "llm_eval" / "scaffold").glob("*.yaml"))]
    files = [(path, cwd) for path, cwd in files if not path.name.startswith("beir-")]
    return [
        (
            str(path.relative_to(ROOT)),
            "criteria" if "criteria" in path.name else "config",
            path,
            cwd,
        )
        for path, cwd in files
    ]


def _hostile_files() -> list[tuple[str, str, Path, Path]]:
    manifest = tomllib.loads((HOSTILE / "manifest.toml").read_text(encoding="utf-8"))
    files = []
    for case in manifest["case"]:
        for target, source in case.get("replace", {}).items():
            config = target in ("config/llm-eval.yaml", "config/ship-criteria.yaml")
            if config and source.startswith("cases/"):
                kind = "criteria" if "criteria" in target else "config"
                files.append((case["name"], kind, HOSTILE / source, HOSTILE / "base"))
    return files


BASE_CONFIG = (HOSTILE / "base" / "config" / "llm-eval.yaml").read_text(encoding="utf-8")
BASE_CRITERIA = "gates:\n  - name: retrieval_recall_at_5\n"
EDITS = [
    ("config", "top_k: 0"),
    ("config", "top_k: '5'"),
    ("config", "relevance_level: true"),
    ("config", "cache: maybe"),
    ("config", "page_tolerance: -1"),
    ("config", "f1_threshold: 0"),
    ("config", "metrics: recall@5"),
    ("config", "judge: {model: m, base_url: http://127.0.0.1:1/v1, temperature: hot}"),
    ("config", "retriever_: {kind: bm25}"),
    ("config", "gain: {alpha: -1}"),
    ("config", "gain: {k: 0}"),
    ("config", "variants: [{name: a}]"),
    ("config", "experiment: {latency: slow}"),
    ("config", "rejection_score_threshold: low"),
    ("config", "max_error_rate: 0.5"),
    ("config", "retriever: {kind: bm25, k1: -1}"),
    ("config", "retriever: {kind: bm25, kl: 1.2}"),
    ("config", "retriever: {kind: bm26}"),
    ("config", "retriever: {k1: 1.2}"),
    ("config", "retriever: {kind: bm25, max_error_rate: 2}"),
    ("config", "retriever: {kind: run}"),
    ("config", "gold: []"),
    ("config", "gold: [{path: gold.jsonl, tier: A, matching: fuzzy}]"),
    ("config", "gold: [{beir: folder, path: gold.jsonl}]"),
    ("config", "gold: [{topics: topics.tsv}]"),
    ("config", "gold: [{tier: A}]"),
    ("criteria", "    threshold: 1.5"),
    ("criteria", "    threshold: 0.5\n    severity: eror"),
    ("criteria", "    threshold: 0.5\n    scope: {tier: A, tag: x}"),
    ("criteria", "    threshold: 0.5\n    statistics: {alpha: 0.5}"),
    ("criteria", "    threshold: 0.5\n    statistics: {min_n: 0}"),
    ("criteria", "    threshold: 0.5\n    per_tag: true"),
    ("criteria", "    threshold: 0.5\n    per_tag: []"),
    ("criteria", "    threshold: 0.5\n    judged: yes please"),
    ("criteria", "    regression_max: 0.1\n    drift_max: 0.1"),
    ("criteria", "    regression_max: 0.1\n    since: -3"),
    ("criteria", "    regression_max: '+20%'"),
    ("criteria", "    severity: warning"),
    ("criteria", "    treshold: 0.5"),
]
"""One edit each of the hostile corpus's base files, most of which the loader refuses."""


def _edited(tmp_path: Path, index: int, where: str, text: str) -> tuple[str, Path]:
    """The base file with the edit's key written over (a top-level key replaced with
    its lines, a gate's keys added to the one gate)."""
    if where == "criteria":
        body, kind = BASE_CRITERIA + text + "\n", "criteria"
    else:
        key, kept, dropping = text.partition(":")[0], [], False
        for line in BASE_CONFIG.splitlines():
            dropping = line.startswith(f"{key}:") or (dropping and line.startswith(" "))
            kept += [] if dropping else [line]
        body, kind = "\n".join([*kept, text]) + "\n", "config"
    path = tmp_path / f"edit-{index}.yaml"
    path.write_text(body, encoding="utf-8")
    return kind, path


def _verdicts(kind: str, path: Path, cwd: Path, monkeypatch: pytest.MonkeyPatch) -> tuple:
    """(the loader's refusal or None, the schema's first error or None, plain data)."""
    monkeypatch.chdir(cwd)
    try:
        data = load_yaml(path).plain()
    except InputError as exc:
        return str(exc), None, None
    try:
        LOADERS[kind](path)
        refusal = None
    except InputError as exc:
        refusal = str(exc)
    schema = SCHEMAS[SCHEMA_FOR[kind]]()
    error = jsonschema.exceptions.best_match(jsonschema.Draft7Validator(schema).iter_errors(data))
    return refusal, (error.message if error is not None else None), data


def _agree(refusal: str | None, schema_error: str | None) -> bool:
    """Whether the schema refused the file as the loader did (an assertion error when
    it accepts a file the loader refuses, but for a refusal out of its reach)."""
    if refusal is None:
        assert schema_error is None, f"the loader accepts it, the schema says {schema_error}"
        return False
    reach = [why for why, pattern in OUT_OF_REACH.items() if re.search(pattern, refusal)]
    if not reach:
        assert schema_error is not None, f"the loader refuses it ({refusal}), the schema not"
    return not reach


CASES = _repository_files() + _hostile_files()


@pytest.mark.parametrize(("kind", "path", "cwd"), [c[1:] for c in CASES], ids=[c[0] for c in CASES])
def test_schema_agrees_with_the_loader(
    kind: str, path: Path, cwd: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    refusal, schema_error, _ = _verdicts(kind, path, cwd, monkeypatch)
    _agree(refusal, schema_error)


@pytest.mark.parametrize(("index", "where", "text"), [(i, *e) for i, e in enumerate(EDITS)])
def test_schema_agrees_with_the_loader_on_one_edit(
    index: int, where: str, text: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    kind, path = _edited(tmp_path, index, where, text)
    refusal, schema_error, _ = _verdicts(kind, path, HOSTILE / "base", monkeypatch)
    _agree(refusal, schema_error)


def test_files_init_writes_name_their_schema_beside_them() -> None:
    from llm_eval.commands.init import FILES, scaffold_text

    for name, source in FILES.items():
        if name.endswith(".yaml"):
            schema = Path(name).name.replace(".yaml", ".schema.json")
            first = scaffold_text(source).splitlines()[0]
            assert first == f"# yaml-language-server: $schema={schema}"
            assert f"config/{schema}" in FILES


def test_the_schema_itself_refuses_most_edits(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The edits are not passed by excusing them: most are refusals in the schema's reach."""
    refused = 0
    for index, (where, text) in enumerate(EDITS):
        kind, path = _edited(tmp_path, index, where, text)
        refused += _agree(*_verdicts(kind, path, HOSTILE / "base", monkeypatch)[:2])
    assert refused >= 34, refused
