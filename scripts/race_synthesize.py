"""Run `llm-eval gold synthesize` several times at once into one candidates file, in
rounds, and count the rounds that leave every query id unique.

A copy of the demo project (`config/`, `gold/`) in a temporary folder drafts its
questions with the local OpenAI-compatible stub (`llm_eval.stub_openai`) as its judge,
through the demo's judged example, gated by the demo's error gate alone (`CRITERIA`).
Each round removes the shared candidates file, then starts `--runs` processes at once
(`gold synthesize --n 3 --rejection 1 --out shared.jsonl`, seeds 0 and 1 in turn, so
that some runs ask the same questions and some do not) and waits for them, the round
bounded by `--timeout` seconds (a run past it is killed and counted as hung). A round
holds when every run exits 0 without a traceback, the file's query ids are all
different, and `gold review` reads the file (it refuses repeated ids). A first,
unraced run builds the BM25 index and fills the call cache, so that the rounds race on
the file, not on the stub.

Usage: python scripts/race_synthesize.py [--rounds 20] [--runs 8] [--timeout 300]
Prints one line per round and the count of rounds that held; exits 1 when any did not.
"""

from __future__ import annotations

import argparse
import json
import shutil
import subprocess
import sys
import tempfile
import time
from collections import Counter
from dataclasses import dataclass
from pathlib import Path

import yaml

from llm_eval import stub_openai

ROOT = Path(__file__).resolve().parent.parent
SYNTHESIZE = [
    *("gold", "synthesize", "--config", "judged.yaml", "--criteria", "race-criteria.yaml"),
    *("--n", "3", "--rejection", "1"),
]
CRITERIA = """\
gates:
  - name: retrieval_recall_at_5
    threshold: 0.38
    regression_max: 0.03
    severity: error
    scope: {tier: A}
"""
"""The demo's error gate alone: the plan each run makes first (the power of every gated
scope, about 20 s of CPU for the demo's 17 scopes) is not what the rounds race on."""
SHARED = "shared.jsonl"


@dataclass(frozen=True)
class Round:
    """What one round of concurrent runs left."""

    codes: tuple[int | None, ...]
    """Each run's exit code; None for a run killed at the timeout."""
    tracebacks: int
    ids: tuple[str, ...]
    reviewed: int
    """`gold review`'s exit code on the shared file."""

    @property
    def repeated(self) -> list[str]:
        """Query ids written more than once."""
        return [i for i, n in Counter(self.ids).items() if n > 1]

    @property
    def held(self) -> bool:
        """Every run exited 0 without a traceback, every id is unique, review reads them."""
        clean = set(self.codes) == {0} and not self.tracebacks
        return clean and bool(self.ids) and not self.repeated and self.reviewed == 0


def prepare(folder: Path, url: str) -> None:
    """The demo project in `folder`, judged by the stub at `url`, writing to `.out`."""
    for name in ("config", "gold"):
        shutil.copytree(ROOT / name, folder / name)
    config = yaml.safe_load((folder / "config/examples/judged.yaml").read_text())
    config["judge"]["base_url"] = url
    config["output"] = ".out"
    (folder / "judged.yaml").write_text(yaml.safe_dump(config))
    (folder / "race-criteria.yaml").write_text(CRITERIA)


def _command(*args: str) -> list[str]:
    return [sys.executable, "-m", "llm_eval.cli", *args]


def race(folder: Path, runs: int, timeout: float) -> Round:
    """`runs` synthesize processes started at once into the shared file."""
    (folder / SHARED).unlink(missing_ok=True)
    started = [
        subprocess.Popen(
            _command(*SYNTHESIZE, "--seed", str(n % 2), "--out", SHARED),
            cwd=folder,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )
        for n in range(runs)
    ]
    codes: list[int | None] = []
    tracebacks = 0
    deadline = time.monotonic() + timeout
    for process in started:
        try:
            _, err = process.communicate(timeout=max(0.0, deadline - time.monotonic()))
            codes.append(process.returncode)
        except subprocess.TimeoutExpired:
            process.kill()
            _, err = process.communicate()
            codes.append(None)
        tracebacks += "Traceback" in err
    path = folder / SHARED
    lines = path.read_text(encoding="utf-8").splitlines() if path.exists() else []
    ids = tuple(str(json.loads(line)["query_id"]) for line in lines if line.strip())
    review = subprocess.run(
        _command("gold", "review", SHARED, "--config", "judged.yaml", "--tier", "A"),
        cwd=folder,
        input="q\n",
        capture_output=True,
        text=True,
        timeout=timeout,
        check=False,
    )
    return Round(tuple(codes), tracebacks, ids, review.returncode)


def _said(number: int, result: Round) -> str:
    codes = ", ".join(f"exit {c}: {n}" for c, n in Counter(result.codes).items())
    repeated = result.repeated
    return (
        f"round {number}: {len(result.ids)} lines, {len(set(result.ids))} distinct ids "
        f"({codes}; review exit {result.reviewed}; tracebacks {result.tracebacks})"
        + (f"; repeated: {', '.join(repeated)}" if repeated else "")
    )


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=20)
    parser.add_argument("--runs", type=int, default=8, help="Processes started at once.")
    parser.add_argument(
        "--timeout", type=float, default=300.0, help="Seconds a round may take (a hang guard)."
    )
    args = parser.parse_args()
    held = 0
    with tempfile.TemporaryDirectory(prefix="llm-eval-race-") as tmp, stub_openai.serve() as stub:
        folder = Path(tmp)
        prepare(folder, stub.url)
        warm = subprocess.run(
            _command(*SYNTHESIZE, "--out", "warm.jsonl"), cwd=folder, capture_output=True
        )
        if warm.returncode != 0:
            print(warm.stderr.decode(errors="replace"), file=sys.stderr)
            return 1
        for number in range(1, args.rounds + 1):
            result = race(folder, args.runs, args.timeout)
            held += result.held
            print(_said(number, result), flush=True)
    print(f"{held} of {args.rounds} rounds of {args.runs} concurrent runs left unique ids")
    return 0 if held == args.rounds else 1


if __name__ == "__main__":
    sys.exit(main())
