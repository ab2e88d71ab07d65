"""What the power statement adds to `llm-eval gate` at scale: CPU and peak memory with it
and without it, on the project `scripts/bench_gate_scale.py` builds.

Each round runs the gate twice in fresh processes, one after the other: as it is, and
with `against_baseline.gate_power` replaced by a function that returns None (no power
statement; the verdicts are the same). Printed: each run's CPU seconds (user + system,
`os.wait4`) and peak resident memory, the lowest of the rounds, and their ratios.

`--one-relevant` gives every query one relevant document, so that the recall@5 gate
scores 0 or 1 and its power statement is the exact test's.

Usage:
    python scripts/bench_power_cost.py [--queries 20000] [--changed 0.07] [--rounds 3]
        [--one-relevant]
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
import tempfile
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from bench_gate_scale import build_project

GATE = """
import sys
from llm_eval import against_baseline
from llm_eval.cli import main
if sys.argv[1] == "off":
    against_baseline.gate_power = lambda *args, **kwargs: None
sys.argv = ["llm-eval", "gate", "--out", sys.argv[2]]
main()
"""


def cost(mode: str, project: Path, out: Path) -> tuple[float, float]:
    """CPU seconds and peak MiB of one gate run (exit 0 or 1 only)."""
    child = subprocess.Popen(
        [sys.executable, "-c", GATE, mode, str(out)],
        cwd=project,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
    )
    _, status, usage = os.wait4(child.pid, 0)
    code = os.waitstatus_to_exitcode(status)
    if code not in (0, 1):
        errors = child.stderr.read().decode() if child.stderr else ""
        raise SystemExit(f"gate ({mode}) exited {code}: {errors}")
    return usage.ru_utime + usage.ru_stime, usage.ru_maxrss / 1024.0


def main() -> None:
    parser = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    parser.add_argument("--queries", type=int, default=20_000)
    parser.add_argument("--changed", type=float, default=0.07, help="share of queries changed")
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument(
        "--one-relevant", action="store_true", help="one relevant document a query: 0/1 recall@5"
    )
    args = parser.parse_args()
    with tempfile.TemporaryDirectory(prefix="bench-power-cost-") as temp:
        project = Path(temp) / "project"
        project.mkdir()
        build_project(project, args.queries, args.changed, one_relevant=args.one_relevant)
        runs: dict[str, list[tuple[float, float]]] = {"on": [], "off": []}
        for _ in range(args.rounds):
            for mode in runs:
                runs[mode].append(cost(mode, project, Path(temp) / mode))
    kind = "0/1 recall@5" if args.one_relevant else "graded recall@5"
    print(f"llm-eval gate, {args.queries:,} queries ({kind}), {args.rounds} interleaved round(s)")
    for mode, label in (("on", "with the power statement"), ("off", "without it")):
        cpus = ", ".join(f"{cpu:.2f}" for cpu, _ in runs[mode])
        peaks = ", ".join(f"{peak:.0f}" for _, peak in runs[mode])
        print(f"{label:<26} CPU s {cpus}; peak MiB {peaks}")
    cpu = min(c for c, _ in runs["on"]) / min(c for c, _ in runs["off"])
    peak = min(p for _, p in runs["on"]) / min(p for _, p in runs["off"])
    print(f"ratio of the lowest: CPU {cpu:.2f}x, peak memory {peak:.2f}x")


if __name__ == "__main__":
    main()
