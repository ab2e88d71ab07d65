"""`python -m llm_eval.cli`: the command line, as the `llm-eval` script runs it."""

import sys

from llm_eval.cli import main

sys.exit(main())
