"""Does a busy machine change what `llm-eval experiment` says? The demo sweep, idle and
loaded, in one run.

Runs `llm-eval experiment config/examples/experiment.yaml` (seven BM25 variants over
the demo's 327 scored questions, no service needed) on an idle machine, then again
while busy processes spin on every core (started here, killed at the end), and prints
for each run the variants ranked by recall@5 and by p95 latency, each variant's p95
against the reference's in words (the paired ratio's 95% interval: "as fast",
"x–y× slower"), and the front; then whether the two runs agree on each.

The raw p95 order of variants that are as fast as each other is a coin toss, so the
latency verdicts (faster / as fast / slower than the reference) are what should agree;
the raw order is printed for reference.

Latencies are compared on the clock the command picks (`--latency auto`: the CPU time
of the process, since every demo variant searches in it); `--latency wall` compares
wall time instead, as the command did before, for contrast. Each run prints its clock.

`--load bursty` spins half a second on, half a second off, the kind of load that,
with variants run one after another, used to land on one variant's whole run.
`--sequential` also runs the variants one after another under the same load, as
the command did before it interleaved them, for contrast.

Usage: python scripts/bench_experiment_load.py [--load steady|bursty]
       [--workers N] [--sequential] [--latency auto|cpu|wall]
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable, Sequence
from dataclasses import replace
from pathlib import Path
from typing import Any

from llm_eval.experiment.latency_ratio import Ratio, ratio_cell

ROOT = Path(__file__).resolve().parents[1]
DEMO = ROOT / "config" / "examples" / "experiment.yaml"
SPIN = {
    "steady": "while True: pass",
    "bursty": (
        "import time\n"
        "while True:\n"
        "    end = time.perf_counter() + 0.5\n"
        "    while time.perf_counter() < end: pass\n"
        "    time.sleep(0.5)\n"
    ),
}


CLOCK = {"latency": "auto"}
"""The --latency given, for both ways of running."""


def interleaved(out: Path) -> dict[str, Any]:
    """The experiment as the command runs it; its experiment.json."""
    from llm_eval.commands.experiment import run_experiment

    run_experiment([DEMO], out_dir=out, use_cache=False, latency=CLOCK["latency"])
    document: dict[str, Any] = json.loads((out / "experiment.json").read_text())
    return document


def sequential(out: Path) -> dict[str, Any]:
    """The experiment with each variant's whole run after the other's (the old way),
    compared and written as the command does; its experiment.json."""
    from llm_eval.commands.experiment import compare_runs, prepare
    from llm_eval.experiment.variants import recommendation
    from llm_eval.experiment.variants_view import to_json
    from llm_eval.pipeline import scoring_for
    from llm_eval.retrieval import RetrieveOptions, retrieve_gold

    setup = prepare([DEMO], quality="recall@5", latency=CLOCK["latency"])
    base = setup.plan.base
    runs = {}
    for variant in setup.plan.variants:
        config = replace(base, retriever=variant.retriever, top_k=variant.top_k)
        runs[variant.name] = retrieve_gold(config, setup.gold.queries, RetrieveOptions(False)).run
    result = compare_runs(setup, scoring_for(base), runs)
    document: dict[str, Any] = json.loads(to_json(result, recommendation(result), {}))
    return document


def ratio_of(variant: dict[str, Any], quantile: str) -> Ratio | None:
    """The variant's latency against the reference, as experiment.json keeps it; None
    for the reference itself."""
    kept = variant.get("latency_versus_reference", {}).get(quantile)
    if kept is None:
        return None
    share = float(quantile.removeprefix("p")) / 100
    return Ratio(share, kept["ratio"], kept["low"], kept["high"], kept["queries"])


def verdict(variant: dict[str, Any], quantile: str = "p95") -> str:
    """`reference`, or the experiment's own table cell: `as fast`, `1.9–2.3× slower`."""
    ratio = ratio_of(variant, quantile)
    return "reference" if ratio is None else ratio_cell(ratio)


def side(variant: dict[str, Any], quantile: str = "p95") -> str:
    """The verdict without its numbers: `faster`, `as fast`, `slower`, `reference`."""
    ratio = ratio_of(variant, quantile)
    if ratio is None:
        return "reference"
    return "as fast" if ratio.tied else "faster" if ratio.faster else "slower"


def summary(document: dict[str, Any]) -> dict[str, Any]:
    variants = document["variants"]
    unit = "CPU ms" if document.get("latency_clock") == "cpu" else "wall ms"
    by_quality = sorted(variants, key=lambda v: (-v["values"]["recall@5"], v["name"]))
    by_latency = sorted(variants, key=lambda v: (v["values"]["latency_p95"], v["name"]))
    return {
        "quality": [v["name"] for v in by_quality],
        "latency": [v["name"] for v in by_latency],
        "verdicts": {v["name"]: side(v) for v in variants},
        "medians": {v["name"]: side(v, "p50") for v in variants},
        "front": [v["name"] for v in variants if v["pareto_front"]],
        "clock": document.get("latency_clock", "wall"),
        "reason": document.get("latency_clock_reason", ""),
        "lines": [
            f"  {v['name']:<16} {v['values']['recall@5'] * 100:4.1f}%  "
            f"p50 {v['values']['latency_p50']:5.2f} {unit} {verdict(v, 'p50'):<19} "
            f"p95 {v['values']['latency_p95']:5.2f} {unit} {verdict(v)}"
            f"{' (front)' if v['pareto_front'] else ''}"
            for v in variants
        ],
    }


def spinning(kind: str, workers: int) -> list[subprocess.Popen[bytes]]:
    return [subprocess.Popen([sys.executable, "-c", SPIN[kind]]) for _ in range(workers)]


def stop(processes: Sequence[subprocess.Popen[bytes]]) -> None:
    for process in processes:
        process.kill()
    for process in processes:
        process.wait()


def measure(label: str, run: Callable[[Path], dict[str, Any]], folder: Path) -> dict[str, Any]:
    began = time.perf_counter()
    found = summary(run(folder / label.replace(" ", "-")))
    print(
        f"{label} ({time.perf_counter() - began:.1f} s): recall@5, p50 and p95 against lucene, "
        f"on {found['clock']} time ({found['reason']})"
    )
    print("\n".join(found["lines"]))
    print(f"  by recall@5:  {', '.join(found['quality'])}")
    print(f"  by p95:       {', '.join(found['latency'])}")
    print(f"  front:        {', '.join(found['front']) or '(none)'}")
    return found


def compare(name: str, a: dict[str, Any], b: dict[str, Any]) -> bool:
    print(f"{name}:")
    same = True
    for key, words in (
        ("clock", "clock the latencies are on"),
        ("quality", "ranking by recall@5"),
        ("verdicts", "p95 against the reference (faster / as fast / slower)"),
        ("medians", "p50 against the reference (faster / as fast / slower)"),
        ("front", "Pareto front"),
        ("latency", "raw p95 order (ties are a coin toss)"),
    ):
        agree = a[key] == b[key]
        if key != "latency":
            same = same and agree
        print(f"  {words}: {'same' if agree else 'DIFFERENT'}")
        if not agree and key in ("verdicts", "medians"):
            for variant in a[key]:
                if a[key][variant] != b[key][variant]:
                    print(f"    {variant}: {a[key][variant]} idle, {b[key][variant]} busy")
    return same


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--load", choices=sorted(SPIN), default="steady")
    parser.add_argument("--workers", type=int, default=os.cpu_count() or 1)
    parser.add_argument("--sequential", action="store_true")
    parser.add_argument("--latency", choices=("auto", "cpu", "wall"), default="auto")
    args = parser.parse_args()
    CLOCK["latency"] = args.latency
    os.chdir(ROOT)
    print(
        f"{os.cpu_count()} cores, load average {os.getloadavg()[0]:.1f} before the run; "
        f"busy: {args.workers} {args.load} spinning processes"
    )
    with tempfile.TemporaryDirectory() as tmp:
        folder = Path(tmp)
        interleaved(folder / "warm-up")  # builds and caches the BM25 indexes
        idle = measure("idle", interleaved, folder)
        spinners = spinning(args.load, args.workers)
        try:
            time.sleep(1.0)
            busy = measure("busy", interleaved, folder)
            old = (
                measure("busy, one variant after another", sequential, folder)
                if (args.sequential)
                else None
            )
        finally:
            stop(spinners)
    print()
    same = compare("idle against busy (interleaved)", idle, busy)
    if old is not None:
        compare("idle against busy (one variant after another)", idle, old)
    print(
        "The busy run says the same as the idle one."
        if same
        else "The busy run says something else than the idle one (see above)."
    )


if __name__ == "__main__":
    main()
