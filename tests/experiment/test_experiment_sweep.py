"""A sweep in groups and shards: the groups that take turns, the stable split by name,
and two shards merged into the single run's table (timings apart); parts that are
missing, given twice or of another sweep are refused in one line."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from conftest import Cli

from llm_eval.experiment.sweep import in_shard, turn_groups
from llm_eval.shards import Shard, parse_shard, shard_number
from llm_eval.stats import holm

REPO = Path(__file__).resolve().parents[2]
NAMES = [f"k1={0.5 + i * 0.05:.2f} b=0.40" for i in range(11)]
LATENCY = ("latency_p50", "latency_p95")
"""The values that are timings: they differ between any two runs."""


def test_experiment_reads_its_shard_as_retrieve_does() -> None:
    # One parser serves every --shard; its table of bad values is tests/test_shards.py's.
    assert parse_shard("2/4") == Shard(2, 4)
    with pytest.raises(ValueError) as caught:
        parse_shard("5/4")
    assert str(caught.value) == "shard 5/4: I must be from 1 to N"


def test_a_variant_falls_in_one_shard_by_its_name_alone() -> None:
    # Pinned: a shard must hold the same variants on every machine and in every run.
    # A variant's name is hashed as a query's id is (`llm_eval.shards.shard_number`).
    assert [shard_number(n, 2) for n in ("lucene", "k1=1.2 b=0.75", "no title")] == [1, 2, 2]
    assert [shard_number(n, 7) for n in ("lucene", "k1=1.2 b=0.75", "no title")] == [4, 7, 2]
    names = ["lucene", *NAMES]
    parts = [in_shard(names, "lucene", Shard(i, 3)) for i in (1, 2, 3)]
    assert all(part[0] == "lucene" for part in parts)  # the reference runs in each part
    others = sorted(n for part in parts for n in part if n != "lucene")
    assert others == sorted(NAMES)  # every other variant in exactly one part
    assert in_shard(names, "lucene", None) == names


@pytest.mark.parametrize(
    ("names", "reference", "size", "expected"),
    [
        ("r", "r", 3, ["r"]),
        ("ra", "r", 3, ["ra"]),
        ("abcr", "r", 3, ["rabc"]),
        ("abrcd", "r", 3, ["rabc", "rd"]),
        ("abcdefg", "a", 2, ["abc", "ade", "afg"]),
        ("abcd", "a", 1, ["ab", "ac", "ad"]),
    ],
)
def test_groups_of_the_size_asked_each_led_by_the_reference(
    names: str, reference: str, size: int, expected: list[str]
) -> None:
    groups = turn_groups(list(names), reference, size)
    assert ["".join(group) for group in groups] == expected


def test_a_group_holds_one_variant_or_more() -> None:
    with pytest.raises(ValueError, match="a group holds one variant or more, got 0"):
        turn_groups(["a", "b"], "a", 0)


def _sweep(folder: Path) -> Path:
    """Eleven BM25 variants and the reference over the demo's tier A."""
    lines = [
        "gold:",
        f"  - path: {REPO / 'gold' / 'python-docs-A.jsonl'}",
        "    tier: A",
        f"corpus: {REPO / 'gold' / 'corpus.jsonl'}",
        "retriever: {kind: bm25, k1: 0.9, b: 0.4}",
        "metrics: [recall@5, mrr]",
        "top_k: 10",
        f"output: {folder / 'output'}",
        "variants:",
        "  - name: lucene",
        *(f"  - {{name: '{n}', retriever: {{k1: {n[3:7]}}}}}" for n in NAMES),
    ]
    path = folder / "sweep.yaml"
    path.write_text("\n".join(lines) + "\n")
    return path


@pytest.fixture(scope="module")
def sweep(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    """The sweep run whole in groups of 4, and as two shards (groups of 3) merged."""
    from llm_eval.cli import main

    folder = tmp_path_factory.mktemp("sweep")
    config = _sweep(folder)
    whole, parts, merged = folder / "whole", folder / "parts", folder / "merged"
    assert main(["experiment", str(config), "--group", "4", "--out", str(whole)]) == 0
    for shard in ("1/2", "2/2"):
        args = ["experiment", str(config), "--group", "3", "--shard", shard, "--out", str(parts)]
        assert main(args) == 0
    files = [parts / "experiment-part-1-of-2.json", parts / "experiment-part-2-of-2.json"]
    assert main(["experiment", "--merge", *map(str, files), "--out", str(merged)]) == 0
    return {"config": config, "whole": whole, "parts": files, "merged": merged}


def _untimed(document: dict[str, Any]) -> dict[str, Any]:
    """experiment.json without what depends on the clock: latencies, their ratios, the
    front, the seconds, the words (they name the front) and the clock's reason."""
    kept = ("reference", "quality", "scope", "queries", "alpha", "latency_clock")
    return {
        **{key: document[key] for key in kept},
        "variants": [
            {
                "name": v["name"],
                "top_k": v["top_k"],
                "values": {m: x for m, x in v["values"].items() if m not in LATENCY},
                "versus_reference": v["versus_reference"],
                "slices": v["slices"],
            }
            for v in document["variants"]
        ],
    }


def test_two_shards_merge_into_the_single_runs_table(sweep: dict[str, Any]) -> None:
    whole = json.loads((sweep["whole"] / "experiment.json").read_text())
    merged = json.loads((sweep["merged"] / "experiment.json").read_text())
    assert [v["name"] for v in merged["variants"]] == ["lucene", *NAMES]
    assert _untimed(merged) == _untimed(whole)
    # Holm runs across every variant of the sweep, not within a part.
    for metric in ("recall@5", "mrr"):
        pairs = [v["versus_reference"][metric] for v in merged["variants"][1:]]
        assert [p["p_holm"] for p in pairs] == holm([p["p_value"] for p in pairs])
    for name in ("experiment.md", "experiment.csv"):
        assert (sweep["merged"] / name).is_file()


def test_the_files_say_how_the_variants_took_turns(sweep: dict[str, Any]) -> None:
    whole = json.loads((sweep["whole"] / "experiment.json").read_text())
    merged = json.loads((sweep["merged"] / "experiment.json").read_text())
    assert whole["latency_clock_reason"].endswith(
        "; the variants took turns in 3 groups of up to 4, the reference in every group; "
        "latencies, their ratios and the front compare variants within a group only"
    )
    assert "groups of up to 3, over 2 shards run apart" in merged["latency_clock_reason"]
    # Every variant's latency is paired with the reference's run in its own group.
    assert all(v["latency_versus_reference"] for v in whole["variants"][1:])
    # Ties lie within a group: lucene (group 1) is tied with none of the last group.
    lucene = whole["variants"][0]
    assert not set(lucene["tied_with"]) & set(NAMES[8:])


def test_a_part_has_its_shard_and_the_fingerprints(sweep: dict[str, Any]) -> None:
    part = json.loads(sweep["parts"][1].read_text())
    assert part["kind"] == "llm-eval experiment part"
    assert part["shard"] == "2/2"
    assert set(part["fingerprints"]) == {"config", "gold"}
    names = [s["name"] for s in part["scored"]]
    assert names[0] == "lucene"
    assert sorted(set(names) - {"lucene"}) == sorted(n for n in NAMES if shard_number(n, 2) == 2)


def test_a_missing_part_is_refused(sweep: dict[str, Any], cli: Cli) -> None:
    code, _, err = cli("experiment", "--merge", sweep["parts"][0])
    assert code == 3
    assert err == (
        "llm-eval: error: part 2/2 (experiment-part-2-of-2.json) is missing; --merge needs all 2\n"
    )


def test_a_part_given_twice_is_refused(sweep: dict[str, Any], cli: Cli) -> None:
    first, second = sweep["parts"]
    code, _, err = cli("experiment", "--merge", first, second, first)
    assert code == 3
    assert err == f"llm-eval: error: {first}: part 1/2 is given twice (also {first})\n"


def test_a_part_of_another_sweep_is_refused(
    sweep: dict[str, Any], cli: Cli, tmp_path: Path
) -> None:
    config = sweep["config"]
    code, _, _ = cli("experiment", config, "--shard", "2/2", "--alpha", "0.1", "--out", tmp_path)
    assert code == 0
    other = tmp_path / "experiment-part-2-of-2.json"
    code, _, err = cli("experiment", "--merge", sweep["parts"][0], other)
    assert code == 3
    assert err == (
        f"llm-eval: error: {other}: its config fingerprint differs from "
        f"{sweep['parts'][0]}'s: the parts are of different sweeps\n"
    )


def test_a_file_that_is_no_part_is_refused(cli: Cli, tmp_path: Path) -> None:
    stray = tmp_path / "report.json"
    stray.write_text('{"verdict": "pass"}\n')
    code, _, err = cli("experiment", "--merge", stray)
    assert code == 3
    assert err == f"llm-eval: error: {stray}: not a part that `experiment --shard I/N` wrote\n"


def test_merge_refuses_a_config_changed_since_the_parts(
    sweep: dict[str, Any], cli: Cli, tmp_path: Path
) -> None:
    config = sweep["config"]
    copy = tmp_path / "sweep.yaml"
    copy.write_text(config.read_text())
    parts = []
    for shard in ("1/2", "2/2"):
        assert cli("experiment", copy, "--shard", shard, "--out", tmp_path)[0] == 0
        parts.append(tmp_path / f"experiment-part-{shard[0]}-of-2.json")
    copy.write_text(config.read_text().replace("recall@5, mrr", "recall@5"))
    code, _, err = cli("experiment", "--merge", *parts, "--out", tmp_path / "merged")
    assert code == 3
    assert err == (
        f"llm-eval: error: {parts[0]}: the config or its options changed since this part "
        "was written; run the shards again\n"
    )


def test_shard_and_merge_are_not_asked_together(sweep: dict[str, Any], cli: Cli) -> None:
    code, _, err = cli("experiment", "--merge", "--shard", "1/2", *sweep["parts"])
    assert code == 2
    assert "--merge joins parts already run: leave out --shard and --consistency" in err
    code, _, err = cli("experiment", sweep["config"], "--shard", "3/2")
    assert code == 2
    assert "shard 3/2: I must be from 1 to N" in err
