"""Output that degrades to ASCII on streams that cannot encode it."""

from __future__ import annotations

import io
import os
import subprocess
import sys

import pytest

from llm_eval.output import ASCII_FALLBACK, degrade_unencodable_output


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
