"""Model-judged diagnostics: a judge model reads the retrieved chunks.

- `settings`: the `judge:` section of llm-eval.yaml, checked like a retriever's settings;
- `client`: an OpenAI-compatible chat client with retries (`llm_eval.httpcall`), a
  disk cache of every call, and token and cost accounting;
- `prompts/`: the versioned prompt templates, each citing the definition it implements;
- `scoring`: the metric arithmetic from the judge's verdicts, and the judge's agreement
  with the gold labels (pure);
- `run`: asks the judge about every query of a run.

Judged metrics are advisory: reported per tier and tag like recall@5, and gated only
by a gate that says `judged: true`.
"""
