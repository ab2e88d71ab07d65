"""CPU time and peak memory of `llm-eval gate` by gold-set size, against another commit.

1. **At scale.** For each of `--sizes` (1,000, 5,000, 20,000 and 50,000 queries), a
   project in a temporary folder: the gold queries in two tiers with 16 tags, read by
   a `run` retriever from a run file, with the demo's metrics and ship criteria
   (`config/ship-criteria.yaml`: a recall@5 gate on tier A and a per-tag MRR gate).
   The baseline is refreshed from one run, by the code measured; the run the gate
   reads then differs from it on a share `--changed` (7%) of the queries (their
   relevant documents redrawn at new ranks), as a pull request that touches a corner
   of the retriever does. Each query has 0 to 6 relevant documents graded 1-2, ranked
   from a power law over ranks 1..50, so recall, MRR and nDCG take many values.
2. **Start-up.** `llm-eval gate` on the bundled demo from the checkout's root (BM25
   over `gold/corpus.jsonl`, its index cached by one unmeasured run), as a developer
   runs it.
3. **The pre-push hook.** `python -m llm_eval.hook` on a push that changes `gold/`, in
   a git repository holding the demo as each code ships it (`config/`, `gold/`): the
   hook checks the pushed commit out into a temporary worktree and runs the gate there
   (BM25's index built each time, as the worktree is new), after one unmeasured push.

Each code is measured against `--against` (by default 4f5a6da, the last commit before
the tests valid at every size and their power simulation landed): that revision is
checked out into a temporary `git worktree` and run with the same interpreter and
packages (`PYTHONPATH`). The rounds are interleaved (each round runs every size with
every code in turn), so a busy spell of the machine falls on both; each figure is the
lowest and the median of `--rounds`. CPU is user + system time of the gate process and
of the processes it waited for (git), and memory its peak resident set, as the kernel
accounts a finished child (`os.wait4`, the figures `resource.getrusage(RUSAGE_CHILDREN)`
adds up over all children). numba changes the demo's figure (bm25s imports it where it
is installed): the output says whether it is.

Usage:
    python scripts/bench_gate_scale.py [--sizes 1000,5000,20000,50000] [--changed 0.07]
        [--rounds 3] [--against REV]
"""

from __future__ import annotations

import argparse
import compileall
import importlib.util
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
from collections.abc import Iterator, Sequence
from contextlib import ExitStack, contextmanager
from dataclasses import dataclass
from pathlib import Path

import numpy as np

REPO = Path(__file__).resolve().parents[1]
RELEASE = "4f5a6da"
"""The last commit before the valid tests and their power simulation."""
TAGS = tuple(f"tag-{i:02}" for i in range(16))
MAX_RANK = 50
"""Rank that stands for "not retrieved"."""
TOP_K = 10
METRICS = "[recall@1, recall@5, recall@10, mrr, ndcg@10, map@10, precision@5, hit_rate@5]"
CONFIG = f"""\
gold:
  - path: gold/gold-A.jsonl
    tier: A
  - path: gold/gold-B.jsonl
    tier: B
retriever:
  kind: run
  path: run.jsonl
metrics: {METRICS}
relevance_level: 1
top_k: {TOP_K}
baseline: gold/baseline.json
output: .llm-eval
"""


@dataclass(frozen=True, slots=True)
class Cost:
    """What one child process used."""

    cpu: float
    """User + system CPU seconds."""
    peak_mib: float
    """Peak resident memory."""


def write_gold(
    folder: Path, queries: int, rng: np.random.Generator, one_relevant: bool = False
) -> list[dict[str, int]]:
    """Two tier files; returns each query's relevant documents and grades (one each
    when `one_relevant`: recall@k then scores 0 or 1)."""
    relevant: list[dict[str, int]] = []
    tiers = {"A": [], "B": []}  # type: dict[str, list[str]]
    for i in range(queries):
        count = int(rng.choice(7, p=[0.04, 0.11, 0.40, 0.29, 0.12, 0.03, 0.01]))
        count = 1 if one_relevant else count
        docs = {f"d{i}-{j}": int(rng.integers(1, 3)) for j in range(count)}
        tier = "A" if rng.random() < 0.55 else "B"
        tags = sorted({TAGS[t] for t in rng.integers(0, len(TAGS), rng.integers(1, 3))})
        record = {
            "query_id": f"q{i:06}",
            "query": f"question {i}",
            "tier": tier,
            "tags": tags,
            "relevant": docs,
            "is_rejection": not docs,
        }
        tiers[tier].append(json.dumps(record))
        relevant.append(docs)
    (folder / "gold").mkdir()
    for tier, lines in tiers.items():
        (folder / "gold" / f"gold-{tier}.jsonl").write_text("\n".join(lines) + "\n")
    return relevant


def ranking(docs: dict[str, int], index: int, rng: np.random.Generator) -> list[str]:
    """The top k of one query: its relevant documents at power-law ranks, others filler."""
    weights = np.arange(1, MAX_RANK + 1, dtype=np.float64) ** -1.3
    ranks = rng.choice(MAX_RANK, size=len(docs), replace=False, p=weights / weights.sum())
    top = [f"other-{index}-{r}" for r in range(TOP_K)]
    for doc, rank in zip(docs, ranks, strict=True):
        if rank < TOP_K:
            top[rank] = doc
    return top


def write_run(path: Path, rankings: list[list[str]]) -> None:
    """One line a query, written as made (a million queries' text is never held whole)."""
    with path.open("w") as file:
        for i, top in enumerate(rankings):
            record = {"query_id": f"q{i:06}", "results": top, "latency_ms": 20.0}
            file.write(json.dumps(record) + "\n")


def write_project(
    folder: Path, queries: int, changed: float, seed: int = 0, one_relevant: bool = False
) -> None:
    """Gold set, config and criteria, and two runs: `run-before.jsonl`, which the
    baseline is refreshed from, and `run-after.jsonl`, which differs from it on a share
    `changed` of the queries. With `one_relevant`, every query has one relevant
    document, so the recall@5 gate is a 0/1 one (the exact test) while the MRR gate
    stays graded."""
    rng = np.random.default_rng(seed)
    relevant = write_gold(folder, queries, rng, one_relevant)
    (folder / "config").mkdir()
    (folder / "config" / "llm-eval.yaml").write_text(CONFIG)
    shutil.copy(REPO / "config" / "ship-criteria.yaml", folder / "config" / "ship-criteria.yaml")
    before = [ranking(docs, i, rng) for i, docs in enumerate(relevant)]
    write_run(folder / "run-before.jsonl", before)
    after = [
        ranking(docs, i, rng) if rng.random() < changed else top
        for i, (docs, top) in enumerate(zip(relevant, before, strict=True))
    ]
    write_run(folder / "run-after.jsonl", after)


def refresh_baseline(folder: Path, code: Path) -> None:
    """The baseline written by the code at `code` from the first run; the gate then
    reads the second."""
    shutil.copy(folder / "run-before.jsonl", folder / "run.jsonl")
    refresh = [sys.executable, "-m", "llm_eval.cli", "baseline", "refresh", "--force"]
    env = {**os.environ, "PYTHONPATH": str(code)}
    subprocess.run(refresh, cwd=folder, env=env, check=True, capture_output=True)
    shutil.copy(folder / "run-after.jsonl", folder / "run.jsonl")


def build_project(
    folder: Path, queries: int, changed: float, seed: int = 0, one_relevant: bool = False
) -> None:
    """A project ready for the gate of this tree: `write_project`, then its baseline."""
    write_project(folder, queries, changed, seed, one_relevant)
    refresh_baseline(folder, REPO)


def run_cost(command: list[str], cwd: Path, pythonpath: Path, stdin: str | None = None) -> Cost:
    """Run `command`, `stdin` on its standard input, and return its own CPU time and peak
    memory (exit 0 or 1 only)."""
    env = {**os.environ, "PYTHONPATH": str(pythonpath)}
    child = subprocess.Popen(
        command,
        cwd=cwd,
        env=env,
        stdin=subprocess.DEVNULL if stdin is None else subprocess.PIPE,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
    )
    if child.stdin is not None:
        child.stdin.write((stdin or "").encode())
        child.stdin.close()
    _, status, usage = os.wait4(child.pid, 0)
    child.returncode = os.waitstatus_to_exitcode(status)
    errors = child.stderr.read().decode() if child.stderr else ""
    if child.returncode not in (0, 1):
        raise SystemExit(f"{' '.join(command)} exited {child.returncode}: {errors}")
    return Cost(usage.ru_utime + usage.ru_stime, usage.ru_maxrss / 1024.0)


def gate_command(out: Path) -> list[str]:
    return [sys.executable, "-m", "llm_eval.cli", "gate", "--out", str(out)]


@contextmanager
def checkout(revision: str) -> Iterator[Path]:
    """The package at `revision`, in a temporary git worktree."""
    folder = Path(tempfile.mkdtemp(prefix="bench-gate-rev-"))
    tree = folder / "tree"
    git = ["git", "-C", str(REPO)]
    add = [*git, "worktree", "add", "--quiet", "--detach", str(tree), revision]
    subprocess.run(add, check=True)
    try:
        yield tree
    finally:
        subprocess.run([*git, "worktree", "remove", "--force", str(tree)], check=True)
        shutil.rmtree(folder, ignore_errors=True)


@dataclass(frozen=True, slots=True)
class Case:
    """One command measured round after round: a size's gate, the demo's or the hook's,
    for one code."""

    size: str
    """`"20,000"`, `"demo"` or `"hook"`."""
    code: str
    """`"this tree"` or the revision."""
    command: list[str]
    cwd: Path
    pythonpath: Path
    stdin: str | None = None
    """What the command reads on its standard input (the hook: the pushed refs)."""


def hook_repository(code: Path, folder: Path) -> str:
    """A git repository in `folder` holding the demo as `code` ships it, in two commits,
    the second adding a file under `gold/`; returns the pre-push line that pushes the
    second over the first."""
    for part in ("config", "gold"):
        shutil.copytree(code / part, folder / part)
    git = ["git", "-C", str(folder), "-c", "user.name=bench", "-c", "user.email=b@example.invalid"]
    subprocess.run([*git, "init", "--quiet"], check=True)
    subprocess.run([*git, "add", "--all"], check=True)
    subprocess.run([*git, "commit", "--quiet", "-m", "the demo"], check=True)
    (folder / "gold" / "NOTE.txt").write_text("a change the hook watches\n")
    subprocess.run([*git, "add", "--all"], check=True)
    subprocess.run([*git, "commit", "--quiet", "-m", "a note under gold/"], check=True)
    shas = subprocess.run(
        [*git, "rev-parse", "HEAD~1", "HEAD"], check=True, capture_output=True, text=True
    ).stdout.split()
    return f"refs/heads/main {shas[1]} refs/heads/main {shas[0]}\n"


HOOK = [sys.executable, "-m", "llm_eval.hook", "origin", "--watch", "config", "--watch", "gold"]


def cases(codes: dict[str, Path], sizes: Sequence[int], changed: float, temp: Path) -> list[Case]:
    """Every size, the demo and the hook, for every code, each project's baseline
    refreshed by the code that then gates it, the demo's index cache filled and one
    push made before."""
    made = []
    for size in sizes:
        source = temp / f"project-{size}"
        source.mkdir()
        write_project(source, size, changed)
        for name, code in codes.items():
            project = temp / f"project-{size}-{len(made)}"
            shutil.copytree(source, project)
            refresh_baseline(project, code)
            out = project / "out"
            made.append(Case(f"{size:,}", name, gate_command(out), project, code))
    for name, code in codes.items():
        demo = Case("demo", name, gate_command(temp / f"demo-{len(made)}"), code, code)
        run_cost(demo.command, demo.cwd, demo.pythonpath)  # the BM25 index cached
        made.append(demo)
    for name, code in codes.items():
        repository = temp / f"hook-{len(made)}"
        repository.mkdir()
        push = hook_repository(code, repository)
        hook = Case("hook", name, HOOK, repository, code, push)
        run_cost(hook.command, hook.cwd, hook.pythonpath, hook.stdin)  # one push before
        made.append(hook)
    return made


def measure(made: Sequence[Case], rounds: int) -> dict[tuple[str, str], list[Cost]]:
    """Each case's costs, the rounds interleaved: every case runs once per round."""
    costs: dict[tuple[str, str], list[Cost]] = {(c.size, c.code): [] for c in made}
    for _ in range(rounds):
        for case in made:
            cost = run_cost(case.command, case.cwd, case.pythonpath, case.stdin)
            costs[case.size, case.code].append(cost)
    return costs


def main() -> None:
    parser = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    parser.add_argument(
        "--sizes",
        default="1000,5000,20000,50000",
        help="gold-set sizes, comma-separated ('': the demo and the hook only)",
    )
    parser.add_argument("--changed", type=float, default=0.07, help="share of queries changed")
    parser.add_argument("--rounds", type=int, default=3, help="interleaved rounds")
    parser.add_argument("--against", metavar="REV", default=RELEASE, help="revision compared")
    args = parser.parse_args()
    sizes = [int(size) for size in args.sizes.split(",") if size]
    with tempfile.TemporaryDirectory(prefix="bench-gate-scale-") as temp, ExitStack() as stack:
        codes = {"this tree": REPO, args.against: stack.enter_context(checkout(args.against))}
        for code in codes.values():  # bytecode compiled first, as `pip install` does
            compileall.compile_dir(code / "llm_eval", quiet=1)
        costs = measure(cases(codes, sizes, args.changed, Path(temp)), args.rounds)
    report(costs, sizes, args.rounds, args.against)


def report(
    costs: dict[tuple[str, str], list[Cost]], sizes: Sequence[int], rounds: int, against: str
) -> None:
    numba = importlib.util.find_spec("numba") is not None
    print(
        f"llm-eval gate: CPU seconds with its children and peak MiB, min / median of "
        f"{rounds} interleaved round(s); numba installed: {'yes' if numba else 'no'}"
    )
    print(
        f"{'queries':<9}{'code':<11}{'CPU min':>9}{'median':>9}{'MiB min':>9}{'median':>8}"
        f"{'ms/query':>10}{'CPU vs ' + against[:9]:>18}{'MiB vs':>8}"
    )
    labels = [f"{size:,}" for size in sizes] + ["demo", "hook"]
    queries = dict(zip(labels, [*sizes, 0, 0], strict=True))
    for label in labels:
        reference = costs[label, against]
        for shown, name in ((label, "this tree"), ("", against)):
            mine = costs[label, name]
            cpu = [c.cpu for c in mine]
            mib = [c.peak_mib for c in mine]
            line = (
                f"{shown:<9}{name[:10]:<11}{min(cpu):9.2f}{statistics.median(cpu):9.2f}"
                f"{min(mib):9.0f}{statistics.median(mib):8.0f}"
            )
            line += f"{min(cpu) / queries[label] * 1e3:10.3f}" if queries[label] else " " * 10
            if name != against:
                ratio_cpu = min(cpu) / min(c.cpu for c in reference)
                ratio_mib = min(mib) / min(c.peak_mib for c in reference)
                line += f"{ratio_cpu:17.2f}x{ratio_mib:7.2f}x"
            print(line)


if __name__ == "__main__":
    main()
