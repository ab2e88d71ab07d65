"""Rewrites the example outputs in README.md and the docs from a run of the current code.

Each `console` block listed in `EXAMPLES` is run as it is written (in a copy of the demo
project, on an 80-column terminal, as a reader would see it) and its output replaces the
block's text. `tests/test_gate_end_to_end.py` fails when a block differs from what the
code prints now, and says to run this script:

    python scripts/render_examples.py            # rewrite the blocks
    python scripts/render_examples.py --check    # exit 1 when a block is stale
"""

from __future__ import annotations

import argparse
import contextlib
import os
import re
import shutil
import subprocess
import sys
import tempfile
from collections.abc import Iterable
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
DEMO_GATE = "llm-eval gate"
DEGRADED_GATE = 'llm-eval gate --config config/examples/degraded.yaml; echo "exit $?"'
JUDGED_GATE = "llm-eval gate --config config/examples/judged.yaml"
"""Run with the stub judge (`scripts/stub_openai.py`) serving, as its page starts it."""
EXAMPLES = {
    "README.md": (DEMO_GATE, DEGRADED_GATE),
    "docs/tutorials/demo.md": (DEMO_GATE, DEGRADED_GATE),
    "docs/tutorials/your-repository.md": ("llm-eval gold coverage", "llm-eval gold plan"),
    "docs/how-to/judged-diagnostics.md": (JUDGED_GATE,),
}
"""Page → the commands whose `console` blocks it shows, each as the block writes it."""


def run_in_demo(command: str, demo: Path) -> str:
    """What `command` prints in the demo project at 80 columns (stdout; `echo "exit $?"`
    included when the command has it), with the stub judge serving when it needs one."""
    environment = {**os.environ, "COLUMNS": "80", "NO_COLOR": "1"}
    llm_eval = str(Path(sys.executable).with_name("llm-eval"))
    line = command.replace("llm-eval", f'"{llm_eval}"', 1)
    with contextlib.ExitStack() as stack:
        if command == JUDGED_GATE:
            sys.path.insert(0, str(REPO / "scripts"))
            import stub_openai

            url = stack.enter_context(stub_openai.serve()).url
            environment["JUDGE_PORT"] = url.split(":")[2].split("/")[0]
        done = subprocess.run(
            ["bash", "-c", line], cwd=demo, env=environment, capture_output=True, text=True
        )
    return done.stdout


def block_span(page: str, command: str) -> tuple[int, int, str]:
    """Where the output of `$ command` in a `console` block starts and ends in `page`
    (up to the block's end), and the block's indent (a block inside a list item is
    indented with it)."""
    found = re.search(rf"^( *)\$ {re.escape(command)}\n", page, re.MULTILINE)
    opening = page.rfind("```", 0, found.start()) if found else -1
    if found is None or not page[opening:].startswith("```console"):
        raise ValueError(f"no console block of `{command}`")
    indent = found.group(1)
    end = page.index(f"{indent}```", found.end())
    return found.end(), end, indent


def indented(output: str, indent: str) -> str:
    """`output` with each line that has text indented as its block."""
    return "".join(indent + line if line.strip() else line for line in output.splitlines(True))


def rendered(text: str, outputs: dict[str, str], commands: tuple[str, ...]) -> str:
    """`text` with each command's block holding its output."""
    for command in commands:
        start, end, indent = block_span(text, command)
        text = text[:start] + indented(outputs[command], indent) + text[end:]
    return text


def demo_outputs(commands: Iterable[str]) -> dict[str, str]:
    """Each command's output, run one after another in one fresh copy of the demo."""
    with tempfile.TemporaryDirectory() as folder:
        demo = Path(folder)
        for name in ("config", "gold"):
            shutil.copytree(REPO / name, demo / name)
        return {command: run_in_demo(command, demo) for command in commands}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--check", action="store_true", help="Only say which pages are stale.")
    check = parser.parse_args().check
    outputs = demo_outputs(dict.fromkeys(c for listed in EXAMPLES.values() for c in listed))
    stale = []
    for name, listed in EXAMPLES.items():
        path = REPO / name
        text = path.read_text(encoding="utf-8")
        new = rendered(text, outputs, listed)
        if new != text:
            stale.append(name)
            if not check:
                path.write_text(new, encoding="utf-8")
    verb = "stale" if check else "rewritten"
    print(f"{verb}: {', '.join(stale)}" if stale else "every example output is current")
    sys.exit(1 if check and stale else 0)


if __name__ == "__main__":
    main()
