"""Output that degrades to ASCII on streams that cannot encode it."""

from __future__ import annotations

import io
import os
import subprocess
import sys
from pathlib import Path

import pytest
from conftest import Cli

from llm_eval.output import (
    ASCII_FALLBACK,
    degrade_unencodable_output,
    render_blocks,
    render_table,
)


@pytest.mark.parametrize(
    ("encoding", "text", "expected"),
    [
        ("latin-1", "✓ PASS, Δ ≥ −3.0 pp …", b"ok PASS, delta >= -3.0 pp ..."),
        ("latin-1", "café ± 1", "café ± 1".encode("latin-1")),  # what latin-1 has stays
        ("ascii", "café → 文", b"caf\\xe9 -> \\u6587"),
        ("ascii", "bad \udc80 byte", b"bad \\udc80 byte"),
    ],
)
def test_unencodable_text_is_spelled_in_ascii(encoding: str, text: str, expected: bytes) -> None:
    assert text.encode(encoding, ASCII_FALLBACK) == expected


@pytest.mark.parametrize("encoding", ["latin-1", "ascii", "cp1252"])
def test_the_cli_writes_to_narrow_streams_without_crashing(encoding: str) -> None:
    """An error message with symbols the stream lacks, through a real process."""
    code = (
        "import sys\n"
        "from llm_eval.cli import main\n"
        "sys.exit(main(['gold', 'validate', '--config', 'nowhere-\\u2713.yaml']))\n"
    )
    done = subprocess.run(
        [sys.executable, "-c", code],
        env={**os.environ, "PYTHONIOENCODING": encoding},
        capture_output=True,
        check=False,
    )
    assert done.returncode == 3
    assert done.stderr == b"llm-eval: error: nowhere-ok.yaml: no such file\n"


def test_streams_that_are_not_text_wrappers_are_left_alone() -> None:
    stream = io.StringIO()
    saved = sys.stdout
    sys.stdout = stream
    try:
        degrade_unencodable_output()
    finally:
        sys.stdout = saved
    stream.write("✓")
    assert stream.getvalue() == "✓"


def test_a_table_too_wide_is_cut_into_blocks_of_whole_columns() -> None:
    header = ["slice", "n", *(f"metric{i}" for i in range(8))]
    rows = [[name, "12", *(f"{i}.{i}%" for i in range(8))] for name in ("overall", "tier:A")]
    assert render_blocks(header, rows, width=200) == render_table(header, rows)
    blocks = render_blocks(header, rows, width=40, keep=2).split("\n\n")
    assert len(blocks) > 1
    seen = []
    for block in blocks:
        lines = block.splitlines()
        assert max(map(len, lines)) <= 40
        titles = lines[0].split()
        assert titles[:2] == ["slice", "n"]  # the row labels repeat in each block
        assert [line.split()[:2] for line in lines[2:]] == [["overall", "12"], ["tier:A", "12"]]
        seen += titles[2:]
    assert seen == header[2:]  # every column once, in order


def test_a_single_column_wider_than_the_limit_still_shows() -> None:
    header, rows = ["label", "x" * 30], [["a", "1"]]
    assert render_blocks(header, rows, width=20).splitlines()[0].split() == header


def test_the_demo_baseline_reads_within_80_columns(
    shared_demo: Path, monkeypatch: pytest.MonkeyPatch, cli: Cli
) -> None:
    monkeypatch.chdir(shared_demo)
    code, out, _ = cli("baseline", "show")
    assert code == 0
    assert max(map(len, out.splitlines())) <= 80
    for label in ("recall@1", "recall@5", "MRR", "nDCG@10", "precision@5", "hit rate@5"):
        assert f" {label}" in out
    assert out.count("tag:troubleshooting") == 2  # one row in each block of columns


def test_a_command_runs_with_the_collector_thresholds_raised_then_put_back(
    monkeypatch: pytest.MonkeyPatch, cli: Cli
) -> None:
    import gc

    import llm_eval.cli as command_line

    during: list[tuple[int, ...]] = []
    monkeypatch.setattr(
        command_line, "degrade_unencodable_output", lambda: during.append(gc.get_threshold())
    )
    before = gc.get_threshold()
    code, out, _ = cli("--version")
    assert code == 0
    assert during == [command_line._GC_THRESHOLD] != [before]
    assert gc.get_threshold() == before  # a caller in the same process keeps its own
    assert out.startswith("llm-eval")
