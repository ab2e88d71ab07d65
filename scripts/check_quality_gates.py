"""CI entry point: `python scripts/check_quality_gates.py [gate options]`.

A thin wrapper over `llm-eval gate` with the same options and exit codes
(0 pass, 1 an error gate failed, 2 usage, 3 bad input, 4 retriever or service
failed, 5 internal error).
"""

from __future__ import annotations

import sys

from llm_eval.cli import main

if __name__ == "__main__":
    sys.exit(main(["gate", *sys.argv[1:]]))
