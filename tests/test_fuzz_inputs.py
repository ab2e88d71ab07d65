"""A short, fixed-seed run of scripts/fuzz_inputs.py: mutated demo files, MCP answers and
answers of an OpenAI-compatible endpoint never crash the tool nor print a traceback; an
endpoint's faults are never scored silently and its echoed API key is shown nowhere."""

from __future__ import annotations

from pathlib import Path

import pytest
from conftest import script


def test_390_mutated_inputs_end_in_no_exit_5_and_no_traceback(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    fuzz = script("fuzz_inputs")
    monkeypatch.chdir(Path(__file__).parent.parent)
    tally = fuzz.fuzz(count=390, seconds=600, seed=0, keep=None)
    assert tally.total == 390
    assert (tally.codes[5], tally.tracebacks) == (0, 0), tally.crashes
    # The mutations reach past the parsers: some inputs still pass, most are refused.
    assert tally.codes[0] > 0 and tally.codes[3] > 0
    assert all(sum(counter.values()) == 30 for counter in tally.by_kind.values())
    # A mutated MCP answer fails the run as a misbehaving service (exit 4), or passes.
    assert set(tally.by_kind["mcp answer"]) <= {0, 4} and tally.by_kind["mcp answer"][4] > 0
    for kind in ("embeddings answer", "judge answer"):
        assert set(tally.by_kind[kind]) <= {0, 4} and tally.by_kind[kind][4] > 0, kind
    assert (tally.silently_scored, tally.key_shown) == (0, 0)
