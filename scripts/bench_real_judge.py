"""The judge against a real small model: readable answers without and with response_format.

Serves SmolLM2-135M-Instruct with llama.cpp's server on 127.0.0.1 (`scripts/local_model.py`;
needs the `real-models` extra) and runs `llm-eval gate` on the judged demo over the first
N tier-A gold queries twice per mode: once asking with the prompt alone
(`response_format: false`, what llm-eval did before) and once asking for JSON in each
prompt's schema. It prints, per mode: the share of readable answers per prompt, calls
made, tokens, wall time (on this machine, under whatever else it runs: the load average
is printed), the judge's agreement with the gold labels on the chunks it read, and the
calls the second run made (the cache should answer all of them).

A 135M model is a stand-in for the small local models teams run: its agreement with
the labels says how far that model can be trusted here, nothing about larger ones.

    python scripts/bench_real_judge.py --queries 20 --chunks 1
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))
import local_model


def gate(config: Path) -> tuple[dict[str, Any], float, int]:
    """The report's judge section, the wall time, and the exit code of one gate run."""
    criteria = config.parent / "ship-criteria.yaml"
    command = [sys.executable, "-m", "llm_eval.cli", "gate", "--config", str(config)]
    started = time.perf_counter()
    done = subprocess.run(
        [*command, "--criteria", str(criteria)], capture_output=True, text=True, check=False
    )
    seconds = time.perf_counter() - started
    if "Traceback" in done.stderr or done.returncode not in (0, 1):
        sys.exit(f"bench_real_judge: the gate failed ({done.returncode}):\n{done.stderr}")
    report = json.loads((config.parent / "out" / "report.json").read_text(encoding="utf-8"))
    return report["judge"], seconds, done.returncode


def measure(root: Path, url: str, queries: int, chunks: int, structured: bool) -> dict[str, Any]:
    config = local_model.judged_project(
        root,
        url,
        queries,
        structured=structured,
        metrics=["recall@5", "mrr", f"context_precision@{chunks}"],
        top_k=5,
    )
    first, seconds, code = gate(config)
    second, _, _ = gate(config)
    answers = first["answers"].get("chunk_relevance", {"answers": 0, "unreadable": 0})
    read = answers["answers"] - answers["unreadable"]
    return {
        "mode": "response_format" if structured else "prompt alone",
        "answers": answers["answers"],
        "readable": read,
        "calls": first["calls"],
        "failed": first["failed"],
        "tokens": first["prompt_tokens"] + first["completion_tokens"],
        "answer_tokens": first["completion_tokens"],
        "seconds": seconds,
        "exit": code,
        "calibration": first["calibration"],
        "second_run_calls": second["calls"],
        "second_run_cached": second["cached"],
    }


def line(row: dict[str, Any]) -> str:
    calibration = row["calibration"]
    agreement = (
        "no chunk read"
        if calibration is None
        else f"agreement {calibration['agreement'] * 100:.0f}% of {calibration['chunks']} "
        f"chunks, kappa "
        + ("n/a" if calibration["kappa"] is None else f"{calibration['kappa']:.2f}")
    )
    share = row["readable"] / row["answers"] * 100 if row["answers"] else 0.0
    return (
        f"{row['mode']:>15}: readable {row['readable']}/{row['answers']} ({share:.0f}%), "
        f"{row['calls']} calls ({row['failed']} failed), {row['tokens']:,} tokens "
        f"({row['answer_tokens']:,} answer), {row['seconds']:.0f} s; {agreement}; "
        f"second run {row['second_run_calls']} calls, {row['second_run_cached']} cached"
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--queries", type=int, default=20)
    parser.add_argument("--chunks", type=int, default=1, help="context_precision@k's k")
    parser.add_argument("--json", type=Path, help="Also write the figures here.")
    options = parser.parse_args()
    reason = local_model.missing()
    if reason is not None:
        sys.exit(f"bench_real_judge: {reason}")
    print(
        f"{local_model.MODEL} (llama.cpp server), judged demo, first {options.queries} "
        f"tier-A queries, context_precision@{options.chunks}; load average at start "
        f"{os.getloadavg()[0]:.1f} on {os.cpu_count()} CPUs",
        flush=True,
    )
    rows = []
    with tempfile.TemporaryDirectory() as folder, local_model.serve() as url:
        for structured in (True, False):  # each mode has its own project and cache
            mode = Path(folder) / ("structured" if structured else "plain")
            rows.append(measure(mode, url, options.queries, options.chunks, structured))
            print(line(rows[-1]), flush=True)
    if options.json:
        options.json.write_text(json.dumps(rows, indent=2) + "\n", encoding="utf-8")


if __name__ == "__main__":
    main()
