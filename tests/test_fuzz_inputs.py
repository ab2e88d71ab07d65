"""A short, fixed-seed run of scripts/fuzz_inputs.py: mutated demo files never crash the tool."""

from __future__ import annotations

from pathlib import Path

import pytest
from conftest import script


def test_300_mutated_inputs_end_in_no_exit_5(monkeypatch: pytest.MonkeyPatch) -> None:
    fuzz = script("fuzz_inputs")
    monkeypatch.chdir(Path(__file__).parent.parent)
    tally = fuzz.fuzz(count=300, seconds=600, seed=0, keep=None)
    assert tally.total == 300
    assert tally.codes[5] == 0, tally.crashes
    # The mutations reach past the parsers: some inputs still pass, most are refused.
    assert tally.codes[0] > 0 and tally.codes[3] > 0
    assert all(sum(counter.values()) == 30 for counter in tally.by_kind.values())
