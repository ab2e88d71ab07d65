"""`llm-eval metrics` and `llm-eval retrievers`: the registries, read at 80 columns."""

from __future__ import annotations

import pytest
from conftest import Cli

from llm_eval.metrics import families
from llm_eval.retrievers import retriever_kinds


def run(cli: Cli, monkeypatch: pytest.MonkeyPatch, *args: str) -> str:
    monkeypatch.setenv("COLUMNS", "80")
    code, out, _ = cli(*args)
    assert code == 0
    return out


def test_metrics_lists_every_family_within_80_columns(
    cli: Cli, monkeypatch: pytest.MonkeyPatch
) -> None:
    out = run(cli, monkeypatch, "metrics")
    assert max(map(len, out.splitlines())) <= 80
    for family in families():
        assert f"\n  {family.usage()}\n" in out
    assert "  rprec (alias r_precision)\n    share of the top R that is relevant" in out
    assert (
        "  latency_p95\n    95th-percentile retrieval latency; milliseconds, lower is better" in out
    )


def test_retrievers_lists_every_kind_and_setting_within_80_columns(
    cli: Cli, monkeypatch: pytest.MonkeyPatch
) -> None:
    out = run(cli, monkeypatch, "retrievers")
    assert max(map(len, out.splitlines())) <= 80
    for kind in retriever_kinds():
        assert f"kind: {kind.name} — " in out
        for name in kind.settings:
            assert f"\n  {name} (" in out
    assert "  path (required): The run file (relative to the working directory); a glob" in out
    assert "  k1 (default 0.9): Term frequency saturation" in out
