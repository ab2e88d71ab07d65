"""Default paths and settings, one home for each, importable without cost.

The command line shows them in `--help`, so this module imports nothing.
"""

from __future__ import annotations

from pathlib import Path

CONFIG = Path("config/llm-eval.yaml")
"""What to evaluate: gold set, retriever, metrics."""
CRITERIA = Path("config/ship-criteria.yaml")
"""The gates."""
BASELINE = Path("gold/baseline.json")
"""The committed baseline, unless the config names another."""
OUTPUT = Path(".llm-eval")
"""Where a gate run writes its report and run files."""
METRICS = ("recall@5", "mrr")
"""What is reported when the config (or `evaluate -m`) names no metrics."""
TOP_K = 10
"""Results asked of the retriever per query."""
BEIR_SPLIT = "test"
"""The qrels split of a BEIR folder read as the gold set unless the config names one."""
COMMENT_WHEN_CHOICES = ("always", "on_change", "on_fail")
"""When `llm-eval comment` posts a new comment: on every run; unless the gate passed and
no query's score moved; only when the check fails. An existing one is updated in each."""
COMMENT_WHEN = "on_change"
"""The default of `llm-eval comment --when` and of the action's `comment` input."""
MAX_BUILDS = 50
"""The most builds a config or `--builds` may ask for (`builds:` under `retriever:`)."""
MAX_SHARDS = 256
"""The most shards `init --shards` writes a matrix of: GitHub's limit of jobs a matrix makes."""
EXPERIMENT_GROUP = 16
"""Variants `experiment` builds and runs in turns together, besides the reference: memory
holds one group's retrievers and runs (`llm_eval.experiment.sweep`)."""
