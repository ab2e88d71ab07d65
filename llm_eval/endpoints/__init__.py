"""OpenAI-compatible model endpoints, used by the judge, the embedding retriever, gold
synthesis and `gain`.

- `settings`: the `judge:` and `embeddings:` sections of llm-eval.yaml, declared as
  `llm_eval.settings.Setting` tables and held as frozen typed records;
- `chat` and `embeddings`: the two clients; `client`: what they share (the HTTP
  client with retries from `llm_eval.httpcall`, calls in flight, token and cost
  accounting); `cache`: every answer kept on disk; `secret`: the API key, read when a
  call is made and scrubbed from every answer;
- `local`: an embedding model on disk, and `embedders`: which of the two an
  `embeddings:` section names.

Nothing here knows what the answers are for: the judge (`llm_eval.judge`) and the
retrievers (`llm_eval.retrievers`) both build on it, and neither on the other.
"""
