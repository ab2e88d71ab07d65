"""`python -m llm_eval.cli`: the command line, as the `llm-eval` script runs it."""

from llm_eval.cli import script

script()
