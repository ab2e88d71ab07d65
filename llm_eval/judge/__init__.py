"""Model-judged diagnostics: a judge model reads the retrieved chunks.

The model endpoint itself (its settings, the cached chat client) is
`llm_eval.endpoints`, shared with the embedding retriever and gold synthesis.

- `prompts/`: the versioned prompt templates, each citing the definition it implements;
- `arithmetic`: the metric arithmetic from the judge's verdicts, and the judge's
  agreement with the gold labels (pure);
- `correction`: judged values corrected by the human labels (prediction-powered
  inference; pure);
- `run`: asks the judge about every query of a run;
- `step`: the judge's step of a gate run (`llm_eval.pipeline.measure` calls it).

Judged metrics are advisory: reported per tier and tag like recall@5, and gated only
by a gate that says `judged: true`.
"""
