"""Whether a real change is caught as often as the power statement promises, with a
real approximate index rebuilt in every process and `builds: 3` on both sides.

    python scripts/bench_builds_power.py [--queries 1000] [--extra-noise 0.062 | --lose N]
        [--pool 60] [--gates 300] [--statements 40] [--sample N] [--folder F]

The project is `bench_builds_lancedb.py`'s synthetic gold set (each question near its
one relevant vector, LanceDB's IVF-PQ trained at random at every build). The change
is one of two:

- a worse embedding of the questions (`--extra-noise`): each question's vector gets
  that much more Gaussian noise, the documents as they were. Many questions lose a
  little: each build finds their document a little less often;
- a re-index that lost documents (`--lose N`): the relevant documents of N questions
  drawn at random are left out of the corpus. Those questions lose their whole score
  in every build: the regression the power statement's model makes.

The power statement speaks of a gold set drawn from the questions a team's users ask
and of builds drawn from the retriever's, so both are drawn afresh at every gate; the
project's questions and a pool of builds are the population, whose truth is known:

1. Two pools of `--pool` builds each, unchanged and changed, each build retrieved by
   `llm-eval retrieve --builds` (a fresh process a build). The pools' mean recall@5
   is the truth: their difference is the change's true drop, printed with its
   standard error (pick `--extra-noise` or `--lose` so that it is about twice the
   3-point limit).
2. `--statements` no-change gates (two disjoint triples of unchanged builds): the
   drop each power statement names as caught 4 times in 5 (median and range). Pick
   `--sample` so that it is the true drop.
3. `--gates` gates of the change: each a baseline refreshed from 3 unchanged builds
   and a gate on 3 changed builds, drawn at random from the pools (a gate's six
   builds are distinct; two gates may share builds). Printed: how many failed
   recall@5 (tier A), against the statement's 80%, with standard errors as if the
   gates were independent and counting the covariance of gates that share a
   build.

Each gate's gold set is `--sample` questions (default: as many as the project has)
drawn with replacement, a question drawn twice asked under two ids, and the chosen
builds' run files cut to the same rows (`--fixed`: every gate on the project's own
questions, only the builds drawn afresh). Each gate is the product end to end:
`llm-eval baseline refresh` and `llm-eval gate` on `kind: run` retrievers reading
those run files.
"""

from __future__ import annotations

import argparse
import json
import math
import subprocess
import sys
import tempfile
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))

from bench_builds_lancedb import project

GATE = "retrieval_recall_at_5"
MOST_BUILDS = 50
"""The most builds one `llm-eval retrieve --builds` call makes."""


def llm_eval(root: Path, config: str, *args: str) -> subprocess.CompletedProcess[str]:
    command = [str(Path(sys.executable).with_name("llm-eval")), *args]
    common = ["--config", config, "--criteria", "config/no-floors.yaml"]
    return subprocess.run(command + common, cwd=root, capture_output=True, text=True, check=False)


def change(root: Path, extra: float, lose: int, seed: int = 7) -> str:
    """The change's vectors and config: the questions' vectors with `extra` more noise
    or, with `lose`, the corpus without the relevant documents of `lose` questions drawn
    at random (a re-index that lost them). Returns the change's name, which its files
    carry: vectors-{name}.npz, config/ivf-{name}.yaml, pool/{name}-*.jsonl."""
    saved = dict(np.load(root / "vectors.npz"))
    rng = np.random.default_rng(seed)
    if lose:
        name = f"lost{lose}"
        gold = (root / "gold" / "synthetic-A.jsonl").read_text(encoding="utf-8").splitlines()
        targets = [next(iter(json.loads(line)["relevant"])) for line in gold]
        gone = set(rng.choice(np.asarray(targets), size=lose, replace=False).tolist())
        kept = np.asarray([str(d) not in gone for d in saved["doc_ids"]])
        saved["doc_ids"], saved["docs"] = saved["doc_ids"][kept], saved["docs"][kept]
    else:
        name = f"changed{extra:g}"
        asked = saved["query_vectors"]
        saved["query_vectors"] = (asked + extra * rng.normal(size=asked.shape)).astype(np.float32)
    np.savez(root / f"vectors-{name}.npz", **saved)
    config = (root / "config" / "ivf.yaml").read_text(encoding="utf-8")
    (root / "config" / f"ivf-{name}.yaml").write_text(
        config.replace("vectors: vectors.npz", f"vectors: vectors-{name}.npz"), encoding="utf-8"
    )
    return name


def gate_configs(root: Path) -> None:
    """config/base.yaml and config/cand.yaml: the drawn gold set, and `kind: run` on the
    chosen builds' run files."""
    config = (root / "config" / "ivf.yaml").read_text(encoding="utf-8")
    text = config[: config.index("retriever:")], config[config.index("metrics:") :]
    text = text[0].replace("gold/synthetic-A.jsonl", "sel/gold.jsonl"), text[1]
    for name in ("base", "cand"):
        retriever = f"retriever:\n  kind: run\n  path: sel/{name}-build*.jsonl\n"
        (root / "config" / f"{name}.yaml").write_text(text[0] + retriever + text[1])


def pools(root: Path, size: int, sides: list[tuple[str, str]]) -> None:
    """`size` builds of each (files' name, config) side into pool/, the sides retrieved
    at once."""
    (root / "pool").mkdir(exist_ok=True)
    running = []
    for side, config in sides:
        calls = []
        for start in range(0, size, MOST_BUILDS):
            count = min(MOST_BUILDS, size - start)
            out = f"pool/{side}{start // MOST_BUILDS}.jsonl"
            calls.append(f"retrieve --builds {count} --no-text --out {out}")
        script = " && ".join(
            f"{Path(sys.executable).with_name('llm-eval')} {call} --config {config}"
            for call in calls
        )
        running.append(subprocess.Popen(["bash", "-c", script], cwd=root))
    if any(process.wait() for process in running):
        raise SystemExit("retrieving the pools failed")


def pool_files(root: Path, side: str) -> list[Path]:
    return sorted((root / "pool").glob(f"{side}*-build*.jsonl"))


def recall_at_5(path: Path, relevant: dict[str, str]) -> float:
    found = 0
    with path.open(encoding="utf-8") as lines:
        for line in lines:
            row = json.loads(line)
            top = [hit["doc_id"] for hit in row["results"][:5]]
            found += relevant[row["query_id"]] in top
    return found / len(relevant)


class Sampler:
    """Gold sets drawn from the project's questions (the population): each gate's gold
    set is `size` questions drawn with replacement, a question drawn twice asked twice
    under two ids, and each chosen build's run file cut to the same rows, so that the
    queries are a fresh random sample at every gate, as the power statement assumes,
    and the population's truth is known."""

    def __init__(self, root: Path, size: int, fixed: bool = False):
        self.root, self.size, self.fixed = root, size, fixed
        gold = root / "gold" / "synthetic-A.jsonl"
        self.rows = [json.loads(line) for line in gold.read_text(encoding="utf-8").splitlines()]
        self.runs: dict[Path, dict[str, dict[str, object]]] = {}

    def run(self, path: Path) -> dict[str, dict[str, object]]:
        if path not in self.runs:
            with path.open(encoding="utf-8") as lines:
                self.runs[path] = {row["query_id"]: row for row in map(json.loads, lines)}
        return self.runs[path]

    def draw(self, rng: np.random.Generator, sides: dict[str, list[Path]]) -> None:
        """sel/gold.jsonl and sel/{side}-build{i}.jsonl for one gate."""
        folder = self.root / "sel"
        folder.mkdir(exist_ok=True)
        picked = np.arange(len(self.rows))
        if not self.fixed:
            picked = rng.integers(0, len(self.rows), size=self.size)
        renamed = [(f"g-{at:05d}", self.rows[i]) for at, i in enumerate(picked)]
        with (folder / "gold.jsonl").open("w", encoding="utf-8") as out:
            for name, row in renamed:
                asked = f"{row['query']} ({name})"
                out.write(json.dumps({**row, "query_id": name, "query": asked}) + "\n")
        for side, files in sides.items():
            for number, file in enumerate(files, start=1):
                answers = self.run(file)
                written = folder / f"{side}-build{number}.jsonl"
                written.unlink(missing_ok=True)  # never write through a link into the pool
                with written.open("w", encoding="utf-8") as out:
                    for name, row in renamed:
                        out.write(json.dumps({**answers[row["query_id"]], "query_id": name}) + "\n")


def gate_once(
    sampler: Sampler, rng: np.random.Generator, base: list[Path], cand: list[Path]
) -> dict[str, object]:
    """The recall@5 gate's record after a refresh on `base` and a gate on `cand`, on a
    gold set drawn afresh."""
    root = sampler.root
    sampler.draw(rng, {"base": base, "cand": cand})
    refreshed = llm_eval(root, "config/base.yaml", "baseline", "refresh", "--force")
    if refreshed.returncode != 0:
        raise SystemExit(refreshed.stdout + refreshed.stderr)
    gate = llm_eval(root, "config/cand.yaml", "gate")
    if gate.returncode not in (0, 1):
        raise SystemExit(gate.stdout + gate.stderr)
    report = json.loads((root / ".llm-eval" / "report.json").read_text(encoding="utf-8"))
    record: dict[str, object] = next(g for g in report["gates"] if g["name"] == GATE)
    return record


def shared_se(caught: np.ndarray, chosen: list[tuple[tuple[int, ...], tuple[int, ...]]]) -> float:
    """The standard error of the catch rate over gates that may share builds: the
    variance of a mean of dependent draws, each pair of gates that share a build adding
    the product of their centred outcomes as its covariance (pairs that share none are
    independent: their gold sets and builds are drawn apart)."""
    centred = caught - caught.mean()
    total = float(np.sum(centred**2))
    builds = [(set(before), set(after)) for before, after in chosen]
    for i, (before, after) in enumerate(builds):
        for j in range(i):
            if before & builds[j][0] or after & builds[j][1]:
                total += 2.0 * centred[i] * centred[j]
    return math.sqrt(max(total, 0.0)) / caught.size


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--queries", type=int, default=1000)
    parser.add_argument(
        "--sample", type=int, default=0, help="questions a gate's gold set draws (default: all)"
    )
    parser.add_argument(
        "--fixed",
        action="store_true",
        help="every gate on the project's own questions, only the builds drawn",
    )
    parser.add_argument("--extra-noise", type=float, default=0.062)
    parser.add_argument(
        "--lose",
        type=int,
        default=0,
        help="the change: a corpus without this many questions' relevant documents",
    )
    parser.add_argument("--pool", type=int, default=60)
    parser.add_argument("--gates", type=int, default=300)
    parser.add_argument("--statements", type=int, default=40)
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument("--folder", type=Path, help="keep the project (and its pools) here")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as scratch:
        root = args.folder or Path(scratch)
        if not (root / "config" / "ivf.yaml").exists():
            root.mkdir(parents=True, exist_ok=True)
            project(root, "hashed", args.queries)
        name = change(root, args.extra_noise, args.lose) + "-"
        gate_configs(root)
        base, changed = pool_files(root, "base"), pool_files(root, name)
        missing = [
            (side, config)
            for side, config, files in (
                ("base", "config/ivf.yaml", base),
                (name, f"config/ivf-{name[:-1]}.yaml", changed),
            )
            if len(files) < args.pool
        ]
        if missing:
            pools(root, args.pool, missing)
            base, changed = pool_files(root, "base"), pool_files(root, name)
        base, changed = base[: args.pool], changed[: args.pool]
        sampler = Sampler(root, args.sample or args.queries, args.fixed)
        relevant = {row["query_id"]: next(iter(row["relevant"])) for row in sampler.rows}
        before = np.asarray([recall_at_5(p, relevant) for p in base])
        after = np.asarray([recall_at_5(p, relevant) for p in changed])
        drop = before.mean() - after.mean()
        se = math.sqrt(before.var(ddof=1) / before.size + after.var(ddof=1) / after.size)
        print(
            f"{args.queries} questions, {args.pool} builds a side: recall@5 {before.mean():.2%} "
            f"(builds' sd {before.std(ddof=1) * 100:.2f} pp) unchanged, {after.mean():.2%} "
            f"changed: true drop {drop * 100:.2f} pp (standard error {se * 100:.2f} pp)",
            flush=True,
        )
        rng = np.random.default_rng(args.seed)
        named, needed = [], []
        for _ in range(args.statements):
            six = rng.choice(len(base), size=6, replace=False)
            record = gate_once(sampler, rng, [base[i] for i in six[:3]], [base[i] for i in six[3:]])
            power = record["power"]
            assert isinstance(power, dict)
            if power.get("detectable_drop") is not None:
                named.append(power["detectable_drop"] * 100)
            if power.get("queries_needed") is not None:
                needed.append(power["queries_needed"])
        if named:
            low, middle, high = np.percentile(named, [10, 50, 90])
            print(
                f"no-change statements ({len(named)} of {args.statements} name a drop): "
                f"caught 4 times in 5 at {middle:.1f} pp (10-90%: {low:.1f} to {high:.1f})",
                flush=True,
            )
        if needed:
            low, middle, high = np.percentile(needed, [10, 50, 90])
            print(
                f"  and about {middle:,.0f} queries catch twice the limit 4 times in 5 "
                f"(10-90%: {low:,.0f} to {high:,.0f})",
                flush=True,
            )
        chosen, caught = [], []
        for number in range(1, args.gates + 1):
            pair = (
                tuple(int(i) for i in rng.choice(len(base), size=3, replace=False)),
                tuple(int(i) for i in rng.choice(len(changed), size=3, replace=False)),
            )
            record = gate_once(
                sampler, rng, [base[i] for i in pair[0]], [changed[i] for i in pair[1]]
            )
            chosen.append(pair)
            caught.append(record["status"] == "fail")
            if number % 25 == 0 or number == args.gates:
                rate = np.asarray(caught, dtype=float)
                error = shared_se(rate, chosen)
                binomial = math.sqrt(rate.mean() * (1 - rate.mean()) / rate.size)
                print(
                    f"  {number} gates: {int(rate.sum())} failed ({rate.mean():.1%}; standard "
                    f"error {binomial:.1%} as independent draws, {error:.1%} counting the "
                    "builds gates share)",
                    flush=True,
                )


if __name__ == "__main__":
    main()
