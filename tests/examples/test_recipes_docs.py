"""The vector-store page (docs/how-to/vector-stores.md) shows each recipe's config and
the pgvector search as the files in examples/recipes/ have them."""

from __future__ import annotations

import pytest
from recipes import RECIPES, REPO

PAGE = (REPO / "docs" / "how-to" / "vector-stores.md").read_text(encoding="utf-8")


def retriever_block(recipe: str) -> str:
    """The `retriever:` section of the recipe's llm-eval.yaml, as written."""
    lines = (RECIPES / recipe / "llm-eval.yaml").read_text(encoding="utf-8").splitlines()
    start = lines.index("retriever:")
    end = next(i for i in range(start + 1, len(lines)) if not lines[i].startswith(" "))
    return "\n".join(lines[start:end]) + "\n"


@pytest.mark.parametrize("recipe", ["lancedb", "pgvector", "langchain"])
def test_the_page_shows_the_recipes_retriever_section(recipe: str) -> None:
    block = retriever_block(recipe)
    assert "target: " in block
    assert f"```yaml\n{block}```" in PAGE


def test_the_page_shows_the_pgvector_search_statement() -> None:
    source = (RECIPES / "pgvector" / "pgvector_recipe.py").read_text(encoding="utf-8")
    statement = source.split('SEARCH = """\n', 1)[1].split('"""', 1)[0]
    assert f"```sql\n{statement.replace('{table}', 'corpus')}```" in PAGE
