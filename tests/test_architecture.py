"""The layout ARCHITECTURE.md describes: five layers that import only downwards, and
a pure core that reads no file.

The core (metrics, stats, gate, comparison, report, slices, matching, wording and the
records they read) decides and words the verdict from records; reading YAML, JSONL,
run files and the network happens at the edges. The layers are read from the page's
"Modules by layer", so that the map and the check cannot drift apart: every module
sits in one layer, no import runs from a layer to a later one, and each core module
is imported in a fresh interpreter, so that what another test imported cannot hide a
dependency. No module imports itself through others.
"""

from __future__ import annotations

import ast
import json
import re
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
PACKAGE = ROOT / "llm_eval"
PAGE = (ROOT / "ARCHITECTURE.md").read_text(encoding="utf-8")

Layers = list[tuple[str, set[str]]]


def layers(page: str) -> Layers:
    """Each `### ` layer of the page's "Modules by layer", in order, with the `x.py`
    files and `folder/` names its section puts in code spans."""
    section = page.split("## Modules by layer", 1)[1].split("\n## ", 1)[0]
    found: Layers = []
    for part in section.split("\n### ")[1:]:
        title, _, body = part.partition("\n")
        found.append((title.strip(), set(re.findall(r"`([\w/]+(?:\.py|/))`", body))))
    return found


def layer_of(module: str, named: Layers) -> list[int]:
    """The layers that place `module`: those naming its file, else those naming the
    nearest folder that holds it."""
    path = module.removeprefix("llm_eval").lstrip(".").replace(".", "/")
    package = path == "" or (PACKAGE / path / "__init__.py").exists()
    file = f"{path}/__init__.py".lstrip("/") if package else f"{path}.py"
    hits = [i for i, (_, paths) in enumerate(named) if file in paths]
    folders = file.split("/")[:-1]
    while not hits and folders:
        folder = "/".join(folders) + "/"
        hits = [i for i, (_, paths) in enumerate(named) if folder in paths]
        folders.pop()
    return hits


def modules() -> list[str]:
    """Every module of the package, by its dotted name."""
    names = []
    for path in sorted(PACKAGE.rglob("*.py")):
        parts = path.relative_to(ROOT).with_suffix("").parts
        names.append(".".join(parts[:-1] if parts[-1] == "__init__" else parts))
    return names


LAYERS = layers(PAGE)
CORE = [m for m in modules() if layer_of(m, LAYERS) == [0]]
IO_MODULES = {"yaml", "httpx", "jinja2", "github"} | {
    m for m in modules() if layer_of(m, LAYERS) and layer_of(m, LAYERS)[0] > 0
}


def test_the_layers_are_read_from_the_page() -> None:
    example = (
        "## Modules by layer\n\n### Core, pure\n\n- `metrics.py` (not `gate.decide`), "
        "`wording/`\n\n### Edges\n\n- `textio.py`, `judge/`\n\n## Next\n- `stats.py`\n"
    )
    named = layers(example)
    assert named == [("Core, pure", {"metrics.py", "wording/"}), ("Edges", {"textio.py", "judge/"})]
    assert layer_of("llm_eval.wording.gates", named) == [0]
    assert layer_of("llm_eval.judge.calls", named) == [1]
    assert layer_of("llm_eval.stats", named) == []
    # the page's own layers: the core named there, checked here
    assert LAYERS[0][0] == "Core, pure"
    assert {"llm_eval.history.series", "llm_eval.history.dashboard"} <= set(CORE)
    assert {"llm_eval.report_types", "llm_eval.wording.english"} <= set(CORE)
    assert {"llm_eval.textio", "llm_eval.pipeline", "llm_eval.config_io"} <= IO_MODULES
    assert not set(CORE) & IO_MODULES


def test_every_module_sits_in_one_layer() -> None:
    placed = {m: layer_of(m, LAYERS) for m in modules()}
    assert {m: [LAYERS[i][0] for i in hits] for m, hits in placed.items() if len(hits) != 1} == {}


_IMPORT_IN_TURN = """
import importlib, json, sys
found = {}
for name in sys.argv[1:]:
    before = set(sys.modules)
    importlib.import_module(name)
    found[name] = sorted(set(sys.modules) - before)
print(json.dumps(found))
"""


def loaded_by_each(modules: list[str]) -> dict[str, set[str]]:
    """Each module -> the modules its import loaded, imported in turn in one fresh
    interpreter: what an earlier one loaded is not counted again, so a module that
    leaks an import is named first, and one interpreter serves the whole core."""
    out = subprocess.run(
        [sys.executable, "-c", _IMPORT_IN_TURN, *modules],
        capture_output=True,
        text=True,
        check=True,
    )
    return {name: set(loaded) for name, loaded in json.loads(out.stdout).items()}


def test_the_core_imports_no_io_module() -> None:
    loaded = loaded_by_each(CORE)
    assert list(loaded) == CORE
    assert {
        name: sorted(found & IO_MODULES) for name, found in loaded.items() if found & IO_MODULES
    } == {}


def test_the_check_sees_an_io_import() -> None:
    """The same check flags a module that does read files, and names it, so it can fail."""
    loaded = loaded_by_each(["llm_eval.metrics", "llm_eval.config_io"])
    assert not loaded["llm_eval.metrics"] & IO_MODULES
    assert {"yaml", "llm_eval.yamlfile"} <= loaded["llm_eval.config_io"] & IO_MODULES


# --- no import circles, no import up the layers -----------------------------------------


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
    text = PAGE
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
    text = PAGE
    named = named_paths(text)
    top = {p.name for p in PACKAGE.glob("*.py")} - {"__init__.py"}
    unnamed = sorted(name for name in top if name not in named)
    assert unnamed == []


LATE_IMPORTS = {
    # The metric registry looks a name it does not know up in the installed plugins,
    # inside a function on first use: the one edge the core reaches (ARCHITECTURE.md).
    ("llm_eval.metrics", "llm_eval.plugins"),
}


def upward_arrows(graph: dict[str, set[str]], named: Layers) -> list[str]:
    """Each import from a module to one in a later layer, but the LATE_IMPORTS."""
    arrows = []
    for module, targets in sorted(graph.items()):
        (mine,) = layer_of(module, named)
        for target in sorted(targets):
            (theirs,) = layer_of(target, named)
            if theirs > mine and (module, target) not in LATE_IMPORTS:
                arrows.append(f"{module} ({named[mine][0]}) -> {target} ({named[theirs][0]})")
    return arrows


def test_no_import_runs_up_the_layers() -> None:
    assert upward_arrows(import_graph(), LAYERS) == []


def test_the_layer_check_sees_an_upward_arrow() -> None:
    graph = import_graph()
    graph["llm_eval.stats"].add("llm_eval.commands.gate")
    graph["llm_eval.formats.markdown"].add("llm_eval.commands.history")
    assert upward_arrows(graph, LAYERS) == [
        "llm_eval.formats.markdown (Assembly) -> llm_eval.commands.history (Commands)",
        "llm_eval.stats (Core, pure) -> llm_eval.commands.gate (Commands)",
    ]
