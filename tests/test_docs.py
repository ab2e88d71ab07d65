"""The documentation site: it builds strictly, its generated reference covers the command
line and the loaders, and a browser shows its pages.

The site is built once per module with `mkdocs build --strict` in a subprocess, as a
person or CI builds it: a broken link, a missing anchor or a page left out of the nav
fails the build. Two built pages are then served from 127.0.0.1 and opened in headless
Chromium (skipped, with the reason, where Debian's chromium is missing).
"""

from __future__ import annotations

import ast
import contextlib
import functools
import html as _html
import importlib.util
import os
import re
import shutil
import subprocess
import sys
import threading
from collections.abc import Iterator
from http.server import SimpleHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from types import ModuleType

import click
import pytest
import yaml
from conftest import script

from llm_eval.cli import cli
from llm_eval.errors import ExitCode

REPO = Path(__file__).resolve().parents[1]
DOCS = REPO / "docs"
CHROMIUM = shutil.which("chromium")
needs_chromium = pytest.mark.skipif(
    CHROMIUM is None, reason="Debian's chromium is not installed (.ci/run installs it)"
)
BROWSER_FLAGS = [*script("render_screenshots").CHROMIUM_FLAGS, "--window-size=1280,1000"]
"""The flags the docs' pictures are taken with, at a laptop's window size."""


def commands(
    command: click.Command, path: tuple[str, ...] = ()
) -> Iterator[tuple[tuple[str, ...], click.Command]]:
    """Every command under `llm-eval`, walked here apart from the hook's own walk."""
    yield path, command
    for name, sub in getattr(command, "commands", {}).items():
        yield from commands(sub, (*path, name))


def reference_hook() -> ModuleType:
    """docs/_hooks/reference.py, the module mkdocs loads as a hook."""
    spec = importlib.util.spec_from_file_location(
        "reference_hook", DOCS / "_hooks" / "reference.py"
    )
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


@pytest.fixture(scope="module")
def site(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The site, built strictly into a temporary folder."""
    out = tmp_path_factory.mktemp("site")
    done = subprocess.run(
        [sys.executable, "-m", "mkdocs", "build", "--strict", "--site-dir", str(out)],
        cwd=REPO,
        env={**os.environ, "NO_MKDOCS_2_WARNING": "1"},
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
    )
    assert done.returncode == 0, done.stderr
    return out


def test_the_site_builds_strictly_with_every_page_in_the_nav(site: Path) -> None:
    settings = yaml.safe_load((REPO / "mkdocs.yml").read_text(encoding="utf-8"))
    nav = settings["nav"]
    excluded = tuple(settings["exclude_docs"].split())

    def pages(entry: object) -> Iterator[str]:
        if isinstance(entry, str):
            yield entry
        elif isinstance(entry, dict):
            for value in entry.values():
                yield from pages(value)
        elif isinstance(entry, list):
            for item in entry:
                yield from pages(item)

    listed = set(pages(nav))
    written = {str(p.relative_to(DOCS)) for p in DOCS.rglob("*.md")}
    assert listed == {page for page in written if not page.startswith(excluded)}
    for page in listed:
        built = site / ("index.html" if page == "index.md" else page[: -len(".md")] + "/index.html")
        assert built.is_file(), page


def test_a_broken_link_fails_the_build(tmp_path: Path) -> None:
    """The strict build is what catches a broken link: a copy with one fails."""
    shutil.copytree(DOCS, tmp_path / "docs")
    shutil.copy(REPO / "mkdocs.yml", tmp_path / "mkdocs.yml")
    page = tmp_path / "docs" / "tutorials" / "demo.md"
    page.write_text(page.read_text(encoding="utf-8") + "\n[gone](no-such-page.md)\n")
    done = subprocess.run(
        [sys.executable, "-m", "mkdocs", "build", "--strict", "--site-dir", str(tmp_path / "s")],
        cwd=tmp_path,
        env={**os.environ, "NO_MKDOCS_2_WARNING": "1"},
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
    )
    assert done.returncode != 0
    assert "no-such-page.md" in done.stderr


def test_the_command_reference_lists_every_command_and_option() -> None:
    generated = reference_hook().command_reference()
    sections = re.split(r"^#+ `(llm-eval[^`]*)`$", generated, flags=re.M)[1:]
    by_command = dict(zip(sections[::2], sections[1::2], strict=True))
    for path, command in commands(cli):
        name = " ".join(("llm-eval", *path))
        assert name in by_command, name
        for param in command.params:
            if isinstance(param, click.Option) and not param.hidden:
                for flag in (*param.opts, *param.secondary_opts):
                    assert f"`{flag}`" in by_command[name], (name, flag)
            elif isinstance(param, click.Argument):
                assert (param.human_readable_name or "") in by_command[name], (name, param)


def test_the_overview_table_has_a_row_for_every_command() -> None:
    page = (DOCS / "reference" / "commands.md").read_text(encoding="utf-8")
    overview = page.split("## All commands and options")[0]
    first_cells = re.findall(r"^\| (.+?) \|", overview, re.M)
    for path, command in commands(cli):
        if path and not isinstance(command, click.Group):
            words = " ".join(path)
            pattern = rf"`(llm-eval )?{re.escape(words)}[` ]"
            assert any(re.search(pattern, cell) for cell in first_cells), words


def accepted_keys(module: Path) -> set[str]:
    """Every key a loader accepts: the strings of each `frozenset({...})` in its source."""
    keys: set[str] = set()
    for node in ast.walk(ast.parse(module.read_text(encoding="utf-8"))):
        if isinstance(node, ast.Call) and getattr(node.func, "id", None) == "frozenset":
            for literal in ast.walk(node):
                if isinstance(literal, ast.Constant) and isinstance(literal.value, str):
                    keys.add(literal.value)
    return keys


@pytest.mark.parametrize("loader", ["config_io.py", "criteria_io.py"])
def test_the_configuration_page_names_every_key_the_loaders_accept(loader: str) -> None:
    keys = accepted_keys(REPO / "llm_eval" / loader)
    assert {"gold", "retriever", "gates", "min_n"} & keys  # the walk found the tables
    page = (DOCS / "reference" / "configuration.md").read_text(encoding="utf-8")
    assert sorted(key for key in keys if f"`{key}`" not in page) == []


def test_the_generated_tables_come_from_the_registries() -> None:
    from llm_eval.metrics import families
    from llm_eval.retrievers import retriever_kinds

    hook = reference_hook()
    metrics = hook.metric_reference()
    assert all(f"`{family.usage()}`" in metrics for family in families())
    retrievers = hook.retriever_reference()
    for kind in retriever_kinds():
        assert f"## `{kind.name}`" in retrievers
        assert all(f"| `{name}` |" in retrievers for name in kind.settings)
    assert [code for code, _, _ in hook.exit_codes()] == [int(code) for code in ExitCode]


def test_the_readme_exit_code_table_has_every_code() -> None:
    readme = (REPO / "README.md").read_text(encoding="utf-8")
    table = readme.split("## Exit codes\n", 1)[1].split("\n## ", 1)[0]
    assert [int(code) for code in re.findall(r"^\| (\d) \|", table, re.M)] == list(ExitCode)


@contextlib.contextmanager
def served(folder: Path) -> Iterator[str]:
    """The folder over HTTP on 127.0.0.1 (a free port), for as long as the block runs."""
    handler = functools.partial(SimpleHTTPRequestHandler, directory=str(folder))
    handler.log_message = lambda *args: None  # type: ignore[attr-defined]
    server = ThreadingHTTPServer(("127.0.0.1", 0), handler)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}"
    finally:
        server.shutdown()
        server.server_close()
        thread.join()


def browse(url: str, profile: Path, *action: str) -> subprocess.CompletedProcess[str]:
    """Headless Chromium on one page: `--dump-dom` or `--screenshot=FILE`."""
    assert CHROMIUM is not None
    return subprocess.run(
        [CHROMIUM, *BROWSER_FLAGS, f"--user-data-dir={profile}", *action, url],
        capture_output=True,
        text=True,
        timeout=120,
        check=True,
    )


def visible_text(dom: str) -> str:
    """The DOM's text, without scripts, styles and tags."""
    dom = re.sub(r"<(script|style)\b.*?</\1>", " ", dom, flags=re.S)
    return " ".join(re.sub(r"<[^>]+>", " ", dom).split())


@needs_chromium
def test_the_command_reference_shows_every_command_in_a_browser(site: Path, tmp_path: Path) -> None:
    with served(site) as root:
        dom = browse(f"{root}/reference/commands/", tmp_path / "profile", "--dump-dom").stdout
    text = visible_text(dom)
    for path, _ in commands(cli):
        assert " ".join(("llm-eval", *path)) in text, path
    assert "Tutorials" in text and "Explanation" in text  # the site's navigation drew


@needs_chromium
def test_the_home_page_renders_with_its_styles(site: Path, tmp_path: Path) -> None:
    from PIL import Image

    shot = tmp_path / "home.png"
    with served(site) as root:
        dom = browse(root + "/", tmp_path / "profile", "--dump-dom").stdout
        browse(root + "/", tmp_path / "profile", f"--screenshot={shot}")
    text = visible_text(dom)
    assert "retrieval-quality gate for RAG systems" in text
    assert "pip install -e . && llm-eval gate" in text.replace("&amp;", "&")
    with Image.open(shot) as image:
        assert image.size == (1280, 1000)
        # A styled page: the header's colour, text and code blocks, not a blank canvas.
        colours = image.convert("RGB").getcolors(maxcolors=1 << 20)
    assert colours is not None and len(colours) > 50


def test_every_metric_has_the_anchor_the_comment_links_to(site: Path) -> None:
    """The built metrics page has an id per metric family, on its row beside its
    definition; the comment's metric links land on them."""
    from llm_eval.docs_address import Docs
    from llm_eval.formats._markup import Links
    from llm_eval.formats.markdown import render_comment
    from llm_eval.metrics import families
    from llm_eval.textio import read_json_file

    page = (site / "reference" / "metrics" / "index.html").read_text(encoding="utf-8")
    for family in families():
        row = re.search(rf'<tr>\s*<td><span id="{family.anchor}"></span>(.*?)</tr>', page, re.S)
        assert row is not None, family.anchor
        assert _html.unescape(family.description) in _html.unescape(row.group(1))
    report = read_json_file(REPO / "tests" / "gold" / "reports" / "failure_stats.json")
    site_links = Links(docs=Docs("https://docs.example.org/"))  # a published site
    linked = re.findall(r"/reference/metrics/#([\w-]+)", render_comment(report, site_links))
    assert linked == ["recall-at-k", "mrr", "judged-at-k"]
    assert all(f'id="{anchor}"' in page for anchor in linked)
