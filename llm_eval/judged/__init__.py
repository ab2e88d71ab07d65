"""Pure arithmetic on a judge's answers: parsing verdicts, calibration, and judged
values corrected by human labels. The model calls stay in `llm_eval.judge`."""
