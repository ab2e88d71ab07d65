"""The power statement's figures kept by their inputs (`power.power_key`,
`power_io.PowerCache`): found again when nothing they depend on moved, computed again
when anything did or the kept file is damaged, and the same on every surface either way."""

from __future__ import annotations

import json
from collections.abc import Callable
from dataclasses import replace
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from conftest import Cli

from llm_eval import power
from llm_eval.criteria import Gate
from llm_eval.criteria_io import load_criteria
from llm_eval.gate import Power
from llm_eval.power import gate_power, power_key
from llm_eval.power_io import FOLDER, SHARED, PowerCache

REPO = Path(__file__).resolve().parents[1]


@pytest.fixture(autouse=True)
def unshared(monkeypatch: pytest.MonkeyPatch) -> None:
    """These tests are about computing and keeping the figures: no folder shared by the
    test run (tests/conftest.py) answers for them, but where a test sets its own."""
    monkeypatch.delenv(SHARED, raising=False)


def demo_gate(name: str) -> Gate:
    gates = load_criteria(REPO / "config" / "ship-criteria.yaml").gates
    return next(gate for gate in gates if gate.name == name)


RECALL = demo_gate("retrieval_recall_at_5")
MRR = demo_gate("retrieval_mrr")


def binary_scores(n: int, ones: int, changed: int) -> tuple[np.ndarray, np.ndarray]:
    before = np.zeros(n)
    before[:ones] = 1.0
    after = before.copy()
    after[:changed] = 1.0 - after[:changed]
    return before, after


def test_the_key_of_0_1_scores_is_their_counts() -> None:
    """The exact model reads the number of queries, how many changed and how many score
    1 on either side: the same counts at other positions are the same key."""
    before, after = binary_scores(60, 40, 4)
    key = power_key(before, after, 0.03, RECALL)
    assert power_key(before[::-1].copy(), after[::-1].copy(), 0.03, RECALL) == key
    fewer_changed = binary_scores(60, 40, 3)
    assert power_key(*fewer_changed, 0.03, RECALL) != key


def test_the_key_of_graded_scores_is_every_score() -> None:
    rng = np.random.default_rng(1)
    before = rng.random(80)
    after = before.copy()
    after[:5] = rng.random(5)
    key = power_key(before, after, 0.05, MRR)
    assert power_key(before[::-1].copy(), after[::-1].copy(), 0.05, MRR) != key
    moved = after.copy()
    moved[7] = np.nextafter(moved[7], 2.0)
    assert power_key(before, moved, 0.05, MRR) != key


@pytest.mark.parametrize(
    "change",
    [
        lambda gate: replace(gate, statistics=replace(gate.statistics, alpha=0.01)),
        lambda gate: replace(gate, statistics=replace(gate.statistics, seed=7)),
        lambda gate: replace(gate, statistics=replace(gate.statistics, resamples=200)),
        lambda gate: replace(gate, metric="rank_correlation@5"),
    ],
    ids=["alpha", "seed", "resamples", "span"],
)
def test_every_setting_of_the_test_is_in_the_key(change: Callable[[Gate], Gate]) -> None:
    before, after = binary_scores(60, 40, 4)
    assert power_key(before, after, 0.03, change(RECALL)) != power_key(before, after, 0.03, RECALL)


def test_the_limit_the_multiple_and_the_version_are_in_the_key(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    before, after = binary_scores(60, 40, 4)
    key = power_key(before, after, 0.03, RECALL)
    assert power_key(before, after, 0.04, RECALL) != key
    assert power_key(before, after, 0.03, RECALL, catch=3.0) != key
    monkeypatch.setattr(power, "__version__", "9.9.9")
    assert power_key(before, after, 0.03, RECALL) != key


def test_known_figures_are_taken_and_new_ones_added() -> None:
    before, after = binary_scores(120, 90, 6)
    known: dict[str, Power] = {}
    computed = gate_power(RECALL, before, after, 0.03, known=known)
    assert computed == gate_power(RECALL, before, after, 0.03)
    assert known == {power_key(before, after, 0.03, RECALL): computed}
    planted = replace(computed, n=12345)  # not a figure the model gives: seen only if read
    known[power_key(before, after, 0.03, RECALL)] = planted
    assert gate_power(RECALL, before, after, 0.03, known=known) == planted


def test_the_cache_gives_back_what_it_kept(tmp_path: Path) -> None:
    cache = PowerCache(tmp_path / "power")
    figures = Power(327, 0.05, 0.09323560615562883, 0.1, 242, "assuming no change")
    open_figures = Power(3, 0.03, None, 0.06, None, "assuming the churn seen")
    cache["a1"], cache["b2"] = figures, open_figures
    again = PowerCache(tmp_path / "power")
    assert (again["a1"], again["b2"]) == (figures, open_figures)
    assert list(again) == ["a1", "b2"] and len(again) == 2
    assert "c3" not in again


@pytest.mark.parametrize(
    "damage",
    [
        b"",
        b"{not json",
        b"\xff\xfe",
        b"[]",
        b'{"key": "a1"}',
        b'{"key": "zz", "n": 3, "limit": 0.03, "detectable_drop": null, "target": 0.06, '
        b'"queries_needed": null, "assumption": "x"}',
        b'{"key": "a1", "n": true, "limit": 0.03, "detectable_drop": null, "target": 0.06, '
        b'"queries_needed": null, "assumption": "x"}',
        b'{"key": "a1", "n": 3, "limit": 0.03, "detectable_drop": "0.1", "target": 0.06, '
        b'"queries_needed": null, "assumption": "x"}',
        b'{"key": "a1", "n": 3, "limit": 0.03, "detectable_drop": null, "target": 0.06, '
        b'"queries_needed": null, "assumption": "x", "more": 1}',
    ],
)
def test_a_damaged_entry_is_a_miss(tmp_path: Path, damage: bytes) -> None:
    (tmp_path / "a1.json").write_bytes(damage)
    cache = PowerCache(tmp_path)
    assert cache.get("a1") is None


def test_an_entry_that_is_a_folder_is_a_miss_and_an_unwritable_cache_no_error(
    tmp_path: Path,
) -> None:
    (tmp_path / "a1.json").mkdir()
    cache = PowerCache(tmp_path)
    assert cache.get("a1") is None
    cache["a1"] = Power(3, 0.03, None, 0.06, None, "x")  # cannot replace a folder: not kept
    assert cache.get("a1") is None
    (tmp_path / "file").write_text("")
    blocked = PowerCache(tmp_path / "file" / "power")  # its folder cannot be made
    blocked["a1"] = Power(3, 0.03, None, 0.06, None, "x")
    assert blocked.get("a1") is None


def surfaces(project: Path, out: str, cli: Cli) -> dict[str, str]:
    """What the gate prints, and report.json (its time and timings left out) and
    report.md as written."""
    code, text, _ = cli("gate", "--out", out)
    assert code == 0
    report = json.loads((project / out / "report.json").read_text(encoding="utf-8"))
    del report["provenance"]["generated_at"], report["timings"]
    return {
        "terminal": text.replace(out, "OUT"),
        "report.json": json.dumps(report, indent=1),
        "report.md": (project / out / "report.md").read_text(encoding="utf-8"),
    }


def entries(folder: Path) -> dict[str, int]:
    return {path.name: path.stat().st_mtime_ns for path in sorted(folder.glob("*.json"))}


def test_the_gate_says_the_same_with_its_figures_computed_kept_or_damaged(
    indexed_demo: Path, cli: Cli
) -> None:
    """The demo's gate with an empty cache, then with the figures it kept, then with
    every kept file damaged: the same terminal text, report.json and report.md; the
    damaged files are written again, and a warm gate writes none."""
    cold = surfaces(indexed_demo, "out", cli)
    kept = indexed_demo / "out" / FOLDER
    written = entries(kept)
    assert len(written) == 2  # the recall@5 gate and the MRR gate
    assert surfaces(indexed_demo, "out", cli) == cold
    assert entries(kept) == written
    for path in kept.glob("*.json"):
        path.write_text('{"key": "damaged"', encoding="utf-8")
    assert surfaces(indexed_demo, "out", cli) == cold
    assert all(PowerCache(kept).get(name.removesuffix(".json")) for name in written)


def test_baseline_refresh_keeps_the_figures_the_gate_then_reads(
    indexed_demo: Path, cli: Cli
) -> None:
    """`baseline refresh` computes the figures of the baseline's own state into the
    output folder's cache: the gate on a run equal to the baseline reads them, and
    says what a gate that computes them says."""
    computed = surfaces(indexed_demo, "computed", cli)
    code, _, _ = cli("baseline", "refresh")
    assert code == 0
    kept = indexed_demo / ".llm-eval" / FOLDER
    refreshed = entries(kept)
    assert len(refreshed) == 2
    assert surfaces(indexed_demo, ".llm-eval", cli) == computed
    assert entries(kept) == refreshed  # all read, none computed again


def test_the_gold_commands_keep_the_figures_the_gate_and_each_other_read(
    indexed_demo: Path, cli: Cli
) -> None:
    """`gold stats` computes each gated scope's figures into the output folder's cache
    (a gate's own scopes and its tag slices); `gold validate`, `gold plan` and the gate
    on a run equal to the baseline read them, computing and writing none, and each
    command says the same again with every figure read."""
    computed = {command: cli("gold", command)[:2] for command in ("stats", "validate", "plan")}
    kept = indexed_demo / ".llm-eval" / FOLDER
    stats_kept = entries(kept)
    assert len(stats_kept) == 2 + 15  # recall@5's tier A, MRR's all queries and 15 tags
    for command, said in computed.items():
        assert cli("gold", command)[:2] == said, command
    assert entries(kept) == stats_kept
    assert cli("gate")[0] == 0
    assert entries(kept) == stats_kept


def test_a_shared_folder_gives_a_new_output_folder_the_figures_another_computed(
    indexed_demo: Path, cli: Cli, monkeypatch: pytest.MonkeyPatch
) -> None:
    """With `LLM_EVAL_SHARED_CACHE` set, the figures a gate computes are kept in the
    shared folder as well as in its output folder; a gate writing to another output
    folder reads them from there, computes none, keeps them in its own folder and says
    the same. Without it, that gate would have had to compute them."""
    monkeypatch.setenv(SHARED, str(indexed_demo / "shared"))
    first = surfaces(indexed_demo, "first", cli)
    computed = entries(indexed_demo / "first" / FOLDER)
    assert len(computed) == 2
    assert set(entries(indexed_demo / "shared" / "power")) == set(computed)

    real, calls = power.scope_power, []

    def counted(*args: Any, **kwargs: Any) -> Power:
        calls.append(args)
        return real(*args, **kwargs)

    monkeypatch.setattr(power, "scope_power", counted)
    assert surfaces(indexed_demo, "second", cli) == first
    assert calls == []
    assert set(entries(indexed_demo / "second" / FOLDER)) == set(computed)
    monkeypatch.delenv(SHARED)
    assert surfaces(indexed_demo, "third", cli) == first
    assert len(calls) == 2
