"""The layout ARCHITECTURE.md describes: a pure core that reads no file.

The core (metrics, stats, gate, comparison, report, slices, matching, wording and the
records they read) decides and words the verdict from records; reading YAML, JSONL,
run files and the network happens at the edges. Each import is checked in a fresh
interpreter, so that what another test imported cannot hide a dependency. No module
imports itself through others.
"""

from __future__ import annotations

import ast
import json
import re
import subprocess
import sys
from pathlib import Path

import pytest

CORE = [
    "llm_eval.metrics",
    "llm_eval.stats",
    "llm_eval.gate",
    "llm_eval.criteria",
    "llm_eval.slices",
    "llm_eval.matching",
    "llm_eval.wording",
    "llm_eval.gold",
    "llm_eval.runs",
    "llm_eval.scoring",
    "llm_eval.ab_test",
    "llm_eval.experiment",
    "llm_eval.ranking",
    "llm_eval.coverage",
    "llm_eval.gold_plan",
    "llm_eval.synthesis",
    "llm_eval.versions",
    # the verdict path and its records
    "llm_eval.against_baseline",
    "llm_eval.report",
    "llm_eval.judgments",
    "llm_eval.evaluation",
    "llm_eval.rejection",
    "llm_eval.service",
    "llm_eval.inputs",
    "llm_eval.config",
    "llm_eval.baseline",
    "llm_eval.fingerprint",
    "llm_eval.digest",
    "llm_eval.settings",
    "llm_eval.judge.correction",
]
IO_MODULES = {
    "yaml",
    "httpx",
    "jinja2",
    "github",
    "llm_eval.config_io",
    "llm_eval.criteria_io",
    "llm_eval.yamlvalues",
    "llm_eval.yamlfile",
    "llm_eval.textio",
    "llm_eval.gold_io",
    "llm_eval.run_io",
    "llm_eval.baseline_io",
    "llm_eval.fingerprint_io",
    "llm_eval.versions_io",
    "llm_eval.pipeline",
}


def loaded_after_import(module: str) -> set[str]:
    code = f"import sys, json, {module}; print(json.dumps(sorted(sys.modules)))"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    return set(json.loads(out.stdout))


@pytest.mark.parametrize("module", CORE)
def test_the_core_imports_no_io_module(module: str) -> None:
    assert loaded_after_import(module) & IO_MODULES == set()


def test_the_check_sees_an_io_import() -> None:
    """The same check flags a module that does read files, so it can fail."""
    assert {"yaml", "llm_eval.yamlfile"} <= loaded_after_import("llm_eval.config_io")


# --- no import circles -----------------------------------------------------------------

PACKAGE = Path(__file__).resolve().parent.parent / "llm_eval"


def _module_name(path: Path) -> str:
    parts = path.relative_to(PACKAGE.parent).with_suffix("").parts
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def _type_checking_only(node: ast.AST) -> bool:
    return isinstance(node, ast.If) and "TYPE_CHECKING" in ast.unparse(node.test)


def import_graph() -> dict[str, set[str]]:
    """Module -> the package's modules it imports anywhere (at the top or inside a
    function, but not under `if TYPE_CHECKING:`); `from package import module` counts
    as importing the module."""
    paths = {_module_name(path): path for path in PACKAGE.rglob("*.py")}
    graph: dict[str, set[str]] = {name: set() for name in paths}
    for name, path in paths.items():
        pending: list[ast.AST] = [ast.parse(path.read_text(encoding="utf-8"))]
        while pending:
            node = pending.pop()
            if _type_checking_only(node):
                continue
            pending.extend(ast.iter_child_nodes(node))
            if isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
                for alias in node.names:
                    sub = f"{node.module}.{alias.name}"
                    target = sub if sub in paths else node.module
                    if target in paths and target != name:
                        graph[name].add(target)
            elif isinstance(node, ast.Import):
                graph[name] |= {a.name for a in node.names if a.name in paths} - {name}
    return graph


def circles(graph: dict[str, set[str]]) -> list[list[str]]:
    """The strongly connected components of more than one module (Tarjan)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    found: list[list[str]] = []

    def visit(node: str) -> None:
        index[node] = low[node] = len(index)
        stack.append(node)
        for other in sorted(graph[node]):
            if other not in index:
                visit(other)
                low[node] = min(low[node], low[other])
            elif other in stack:
                low[node] = min(low[node], index[other])
        if low[node] == index[node]:
            component = []
            while True:
                top = stack.pop()
                component.append(top)
                if top == node:
                    break
            if len(component) > 1:
                found.append(sorted(component))

    for node in sorted(graph):
        if node not in index:
            visit(node)
    return found


def test_no_module_imports_itself_through_others() -> None:
    assert circles(import_graph()) == []


def test_the_circle_check_sees_a_circle() -> None:
    graph = import_graph()
    graph["llm_eval.metrics"].add("llm_eval.gate")  # gate imports metrics
    assert ["llm_eval.gate", "llm_eval.metrics"] in circles(graph)


def test_judge_and_retrievers_do_not_import_each_other() -> None:
    graph = import_graph()
    for name, targets in graph.items():
        if name.startswith("llm_eval.judge"):
            assert not any(t.startswith("llm_eval.retrievers") for t in targets), name
        if name.startswith("llm_eval.retrievers"):
            assert not any(t.startswith("llm_eval.judge") for t in targets), name


# --- ARCHITECTURE.md names what exists -----------------------------------------------------


def named_paths(text: str) -> set[str]:
    """Every `*.py` file and every `folder/` in code spans that the page names."""
    files = set(re.findall(r"(?<![\w/.-])([\w/]+\.py)\b", text))
    folders = set(re.findall(r"`([\w/]+/)`", text))
    return files | folders


def test_every_path_architecture_names_exists() -> None:
    root = PACKAGE.parent
    text = (root / "ARCHITECTURE.md").read_text(encoding="utf-8")
    named = named_paths(text)
    assert len(named) > 60  # the page names the modules; a broken pattern finds none
    missing = sorted(p for p in named if not (PACKAGE / p).exists() and not (root / p).exists())
    assert missing == []


def test_the_path_check_sees_a_missing_path() -> None:
    assert named_paths("`comparison.py` and `judge/` and scoring.py,") == {
        "comparison.py",
        "judge/",
        "scoring.py",
    }
    assert not (PACKAGE / "comparison.py").exists()


def test_every_module_of_the_package_is_on_the_architecture_page() -> None:
    """A new module gets a place on the map (subpackages count as their folder)."""
    text = (PACKAGE.parent / "ARCHITECTURE.md").read_text(encoding="utf-8")
    named = named_paths(text)
    top = {p.name for p in PACKAGE.glob("*.py")} - {"__init__.py"}
    unnamed = sorted(name for name in top if name not in named)
    assert unnamed == []
