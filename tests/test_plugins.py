"""Metric plugins: a distribution installed with pip adds a metric the gate can gate on.

Each test writes a tiny plugin distribution (a wheel: one module, its dist-info with
the `llm_eval.metrics` entry points), installs it with pip into a folder of its own,
and runs `llm-eval` in a child interpreter that has that folder on its path, as an
environment with the plugin installed has. Installing into a folder instead of the
shared environment keeps other test runs from seeing the plugin.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import zipfile
from pathlib import Path

import pytest

PLUGIN = """
import numpy as np

from llm_eval.metrics import Family, register


def _power_of_reciprocal_rank(power):
    def kernel(judgments, k):
        first = judgments.first_relevant_rank().astype(np.float64)
        if k is not None:
            first[first > k] = 0
        out = np.zeros_like(first)
        found = first > 0
        out[found] = 1.0 / first[found] ** power
        return out

    return kernel


register(
    Family("rr_squared", "relevance", "optional", "1 / rank squared of the first relevant",
           "RR squared", "score", kernel=_power_of_reciprocal_rank(2))
)


def more():
    register(
        Family("rr_cubed", "relevance", "none", "1 / rank cubed of the first relevant",
               "RR cubed", "score", kernel=_power_of_reciprocal_rank(3))
    )
"""


def build_wheel(folder: Path, dist: str, modules: dict[str, str], entry_points: str) -> Path:
    """A pure-Python wheel of `modules` declaring `entry_points` in the metrics group."""
    info = f"{dist.replace('-', '_')}-0.1.dist-info"
    files = {f"{name}.py": text for name, text in modules.items()}
    files[f"{info}/METADATA"] = f"Metadata-Version: 2.1\nName: {dist}\nVersion: 0.1\n"
    files[f"{info}/WHEEL"] = (
        "Wheel-Version: 1.0\nGenerator: tests\nRoot-Is-Purelib: true\nTag: py3-none-any\n"
    )
    files[f"{info}/entry_points.txt"] = f"[llm_eval.metrics]\n{entry_points}"
    files[f"{info}/RECORD"] = "".join(f"{name},,\n" for name in [*files, f"{info}/RECORD"])
    wheel = folder / f"{dist.replace('-', '_')}-0.1-py3-none-any.whl"
    with zipfile.ZipFile(wheel, "w") as archive:
        for name, text in files.items():
            archive.writestr(name, text)
    return wheel


def install(tmp_path: Path, dist: str, modules: dict[str, str], entry_points: str) -> Path:
    """pip-install the plugin wheel into a folder of its own; returns the folder."""
    target = tmp_path / "site"
    wheel = build_wheel(tmp_path, dist, modules, entry_points)
    subprocess.run(
        [sys.executable, "-m", "pip", "install", "-q", "--no-deps", "--no-index",
         "--disable-pip-version-check", "--target", str(target), str(wheel)],
        check=True,
    )  # fmt: skip
    return target


def llm_eval(site: Path, cwd: Path, *args: str) -> subprocess.CompletedProcess[str]:
    """`llm-eval ARGS` in a child interpreter with the plugin's folder on its path."""
    path = os.pathsep.join([str(site), os.environ.get("PYTHONPATH", "")])
    env = {**os.environ, "PYTHONPATH": path, "COLUMNS": "80"}
    command = [sys.executable, "-m", "llm_eval.cli", *args]
    return subprocess.run(command, cwd=cwd, env=env, capture_output=True, text=True, check=False)


FIRST_RELEVANT_RANK = {"q0": 1, "q1": 2, "q2": 3, "q3": 4, "q4": 0}


def write_project(root: Path, gates: str) -> Path:
    """Five queries whose relevant document the run puts at rank 1, 2, 3, 4 and nowhere."""
    (root / "config").mkdir(parents=True)
    (root / "gold").mkdir()
    (root / "config" / "llm-eval.yaml").write_text(
        "gold:\n  - {path: gold/q.jsonl, tier: A}\nretriever: {kind: run, path: run.jsonl}\n",
        encoding="utf-8",
    )
    (root / "config" / "ship-criteria.yaml").write_text(f"gates:\n{gates}", encoding="utf-8")
    gold, run = [], []
    for query_id, rank in FIRST_RELEVANT_RANK.items():
        gold.append({"query_id": query_id, "query": f"question {query_id}", "tier": "A",
                     "relevant": {f"{query_id}-gold": 1}})  # fmt: skip
        ids = [f"{query_id}-other{i}" for i in range(5)]
        if rank:
            ids.insert(rank - 1, f"{query_id}-gold")
        results = [{"doc_id": d, "score": 10.0 - i} for i, d in enumerate(ids)]
        run.append({"query_id": query_id, "results": results})
    for name, rows in (("gold/q.jsonl", gold), ("run.jsonl", run)):
        text = "".join(json.dumps(row) + "\n" for row in rows)
        (root / name).write_text(text, encoding="utf-8")
    return root


def mean_of_power(power: int, k: int | None = None) -> float:
    """What the plugin computes, from the ranks the test put the relevant documents at."""
    values = [
        1 / rank**power if rank and (k is None or rank <= k) else 0.0
        for rank in FIRST_RELEVANT_RANK.values()
    ]
    return sum(values) / len(values)


@pytest.fixture(scope="module")
def plugin_site(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return install(
        tmp_path_factory.mktemp("plugin"),
        "llm-eval-rr-power",
        {"rr_power": PLUGIN},
        "squared = rr_power\ncubed = rr_power:more\n",
    )


@pytest.mark.parametrize(("threshold", "code", "status"), [(0.25, 0, "pass"), (0.3, 1, "fail")])
def test_a_gate_on_a_plugin_metric_decides_on_what_the_plugin_computes(
    plugin_site: Path, tmp_path: Path, threshold: float, code: int, status: str
) -> None:
    gates = (
        f"  - {{name: rr2, metric: rr_squared@3, threshold: {threshold}, severity: error}}\n"
        "  - {name: rr3, metric: rr_cubed, threshold: 0.01, severity: warning}\n"
    )
    project = write_project(tmp_path, gates)
    done = llm_eval(plugin_site, project, "gate")
    assert (done.returncode, done.stderr) == (code, "")
    report = json.loads((project / ".llm-eval" / "report.json").read_text(encoding="utf-8"))
    values = {g["name"]: (g["value"], g["status"]) for g in report["gates"]}
    assert mean_of_power(2, k=3) == pytest.approx((1 + 1 / 4 + 1 / 9) / 5)
    assert values == {
        "rr2": (pytest.approx(mean_of_power(2, k=3), abs=1e-12), status),
        "rr3": (pytest.approx(mean_of_power(3), abs=1e-12), "pass"),
    }


def test_evaluate_computes_a_plugin_metric(plugin_site: Path, tmp_path: Path) -> None:
    project = write_project(tmp_path, "")
    args = ["evaluate", "--gold", "gold/q.jsonl", "--run", "run.jsonl", "--format", "json"]
    done = llm_eval(plugin_site, project, *args, "-m", "rr_squared", "-m", "mrr")
    assert done.returncode == 0, done.stderr
    means = json.loads(done.stdout)["metrics"]
    assert means["rr_squared"] == pytest.approx(mean_of_power(2), abs=1e-12)
    assert means["mrr"] == pytest.approx(mean_of_power(1), abs=1e-12)


def test_metrics_lists_a_plugin_metric_with_its_distribution(
    plugin_site: Path, tmp_path: Path
) -> None:
    done = llm_eval(plugin_site, tmp_path, "metrics")
    assert done.returncode == 0, done.stderr
    assert (
        "  rr_squared, rr_squared@k\n    1 / rank squared of the first relevant; a score from 0 "
        "to 1, higher is\n    better; from the plugin llm-eval-rr-power 0.1\n  rr_cubed\n"
    ) in done.stdout
    assert "  mrr, mrr@k (alias recip_rank)\n    1 / rank of the first relevant document; a" in (
        done.stdout
    )
    assert "plugin" not in done.stdout.split("rr_squared")[0]  # built-ins carry no source


BROKEN = [
    (
        "import missing_dependency_of_the_plugin\n",
        "ModuleNotFoundError: No module named 'missing_dependency_of_the_plugin'",
    ),
    (
        "from llm_eval.metrics import Family, register\n"
        "register(Family('MRR', 'relevance', 'none', 'd', 'l', 'score', kernel=len))\n",
        "ValueError: metric 'mrr' is already registered",
    ),
    (
        "from llm_eval.metrics import Family, register\n"
        "register(Family('judge_me', 'judged', 'none', 'd', 'l', 'score'))\n",
        "ValueError: judge_me: a plugin metric must be of kind relevance",
    ),
]


@pytest.mark.parametrize(("module", "reason"), BROKEN)
def test_a_broken_plugin_is_one_line_naming_its_entry_point(
    tmp_path: Path, module: str, reason: str
) -> None:
    site = install(tmp_path, "llm-eval-broken", {"broken_metric": module}, "b = broken_metric\n")
    line = (
        "llm-eval: error: metric plugin 'b = broken_metric' (llm-eval-broken 0.1) failed to "
        f"load: {reason}\n"
    )
    # The plugins are read when a name is not a built-in one (a plugin's, or a typo) ...
    gates = "  - {name: rr, metric: rr_squared, threshold: 0.1}\n"
    project = write_project(tmp_path / "project", gates)
    done = llm_eval(site, project, "gate")
    assert (done.returncode, done.stdout, done.stderr) == (3, "", line)
    # ... and when the metrics are listed.
    done = llm_eval(site, project, "metrics")
    assert (done.returncode, done.stdout, done.stderr) == (3, "", line)
    # A gate on built-in metrics never reads them: it neither loads nor trips over the
    # broken plugin, and neither does help.
    gates = "  - {name: retrieval_mrr, threshold: 0.1}\n"
    project = write_project(tmp_path / "built-in", gates)
    done = llm_eval(site, project, "gate")
    assert (done.returncode, done.stderr) == (0, "")
    assert llm_eval(site, project, "--help").returncode == 0


FAULTY = """
import warnings

import numpy as np

from llm_eval.metrics import Family, register


def kernel(judgments, k):
    n = len(judgments.query_ids)
    {body}


register(Family("faulty", "relevance", "none", "a kernel with a fault", "faulty", "score",
                kernel=kernel))
"""

KERNEL_FAULTS = [
    ("return 1 / 0", "failed: ZeroDivisionError: division by zero"),
    ("return np.ones(n + 1)", "gave values of shape (6,), not one per query (5,)"),
    ("return [0.5] * n", None),  # a list is fine: it is read as numbers
    ("return np.full(n, np.nan)", "gave 5 value(s) that are NaN or infinite"),
    ("return np.array([np.inf] + [0.0] * (n - 1))", "gave 1 value(s) that are NaN or infinite"),
    ("return np.full(n, 2.5)", "gave 5 value(s) outside its range [0, 1], e.g. 2.5"),
    ("return np.array(['x'] * n)", "gave text values (str32), not one real number per query"),
    ("return np.array([0.5 + 1j] * n)", "gave complex values (complex128), not one real"),
    ("return np.zeros(n, dtype=complex)", "gave complex values (complex128), not one real"),
    ("return [0.5] * (n - 1) + [1j]", "gave complex values (complex128), not one real"),
    ("return np.array([True] * n)", "gave bool values (bool), not one real number per query"),
    ("return [0.5] * (n - 1) + [None]", "gave object values (object), not one real number"),
    ("return np.array([b'x'] * n)", "gave bytes values (bytes8), not one real number per query"),
    ("return np.arange(n) % 2", None),  # whole numbers are real numbers
    (
        "return np.log(np.zeros(n))",
        "gave 5 value(s) that are NaN or infinite (RuntimeWarning: divide by zero "
        "encountered in log)",
    ),
    (
        "warnings.warn('shaky'); return np.full(n, 0.5)",
        None,
    ),  # sound values: the warning stays off stderr
    ("return np.where(np.ones(n) > 0, 0.5, np.zeros(n) / np.zeros(n))", None),
]


@pytest.fixture(scope="module")
def faulty_site(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The faulty plugin pip-installed once, with a sound kernel; each test writes its
    own kernel into the installed module."""
    sound = FAULTY.format(body="return np.full(n, 0.5)")
    return install(tmp_path_factory.mktemp("faulty"), "llm-eval-faulty", {"faulty": sound},
                   "f = faulty\n")  # fmt: skip


@pytest.mark.parametrize(("body", "reason"), KERNEL_FAULTS)
def test_a_plugin_kernel_that_fails_or_gives_bad_values_is_one_line_exit_3(
    tmp_path: Path, faulty_site: Path, body: str, reason: str | None
) -> None:
    site = Path(shutil.copytree(faulty_site, tmp_path / "site"))
    shutil.rmtree(site / "__pycache__", ignore_errors=True)
    (site / "faulty.py").write_text(FAULTY.format(body=body), encoding="utf-8")
    project = write_project(
        tmp_path / "project", "  - {name: faulty, metric: faulty, threshold: 0.1}\n"
    )
    done = llm_eval(site, project, "gate")
    assert "Traceback" not in done.stderr
    if reason is None:
        assert done.returncode == 0, done.stderr
        assert "Warning" not in done.stderr  # a kernel's warnings never reach the user
        return
    assert (done.returncode, done.stdout) == (3, "")
    assert done.stderr.startswith(
        f"llm-eval: error: metric faulty of the plugin llm-eval-faulty 0.1 {reason}"
    )
    assert done.stderr.count("\n") == 1
    if "Warning" not in reason:
        assert "Warning" not in done.stderr
