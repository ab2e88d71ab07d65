"""A short, fixed-seed run of scripts/fuzz_inputs.py (20 inputs of each kind): mutated
demo files, history files, experiment inputs, MCP answers and answers of an
OpenAI-compatible endpoint, and batch files of the embedding retriever's vector store
(mutated, or a FIFO in their place) never crash the tool, hang, nor print a traceback;
an endpoint's faults are never scored silently and its echoed API key is shown nowhere;
no line of a history file is lost."""

from __future__ import annotations

from pathlib import Path

import pytest
from conftest import script

PER_KIND = 20
"""Inputs of each kind: the long runs are scripts/fuzz_inputs.py's own (10,000)."""


def test_20_mutated_inputs_of_each_kind_end_in_no_exit_5_no_traceback_no_line_lost(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    fuzz = script("fuzz_inputs")
    monkeypatch.chdir(Path(__file__).parent.parent)
    kinds = [t.kind for t in fuzz.TARGETS]
    tally = fuzz.fuzz(count=PER_KIND * len(kinds), seconds=1800, seed=0, keep=None, only=kinds)
    assert tally.total == PER_KIND * len(kinds)
    assert (tally.codes[5], tally.tracebacks, tally.lines_lost) == (0, 0, 0), tally.crashes
    # The mutations reach past the parsers: some inputs still pass, most are refused.
    assert tally.codes[0] > 0 and tally.codes[3] > 0
    assert all(sum(counter.values()) == PER_KIND for counter in tally.by_kind.values())
    # A mutated MCP answer fails the run as a misbehaving service (exit 4), or passes.
    assert set(tally.by_kind["mcp answer"]) <= {0, 4} and tally.by_kind["mcp answer"][4] > 0
    for kind in ("embeddings answer", "judge answer"):
        assert set(tally.by_kind[kind]) <= {0, 4} and tally.by_kind[kind][4] > 0, kind
    assert (tally.silently_scored, tally.key_shown, tally.forged) == (0, 0, 0)
    # cache-key's output is appended to $GITHUB_OUTPUT: refused (3) or its three lines.
    assert set(tally.by_kind["cache-key config"]) <= {0, 3}
    # A batch file of the vector store broken or replaced by a special file: embedded
    # again (0) or refused (3), never waited on.
    assert tally.hangs == 0 and set(tally.by_kind["embedding cache"]) <= {0, 3}
    # Whatever a line of the history file holds, it is a gap, never a failed reading.
    for kind in ("history", "history record", "dashboard history"):
        assert set(tally.by_kind[kind]) == {0}, kind
    assert tally.by_kind["experiment config"][3] > 0
