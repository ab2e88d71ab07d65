"""OpenAI-compatible model endpoints, used by the judge, the embedding retriever, gold
synthesis and `gain`.

- `settings`: the `judge:` and `embeddings:` sections of llm-eval.yaml, declared as
  `llm_eval.settings.Setting` tables;
- `client`: the chat and embeddings clients, with retries (`llm_eval.httpcall`), a disk
  cache of every call, and token and cost accounting.

Nothing here knows what the answers are for: the judge (`llm_eval.judge`) and the
retrievers (`llm_eval.retrievers`) both build on it, and neither on the other.
"""
