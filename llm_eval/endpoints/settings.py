"""The `judge:` and `embeddings:` sections of llm-eval.yaml: OpenAI-compatible endpoints.

    judge:
      base_url: https://api.openai.com/v1      # or vLLM, Ollama, llama.cpp, LM Studio, Azure
      model: gpt-4o-mini
      api_key: ${OPENAI_API_KEY}               # read from the environment, never shown
      price_per_1k_input: 0.00015              # for the cost line and --max-cost
      price_per_1k_output: 0.0006

The key is only ever read from the environment when the judge is built; it is not in
the call cache's key, a report or an error.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from llm_eval.settings import Setting, number_check, whole_check


def _text(value: Any) -> str | None:
    return None if isinstance(value, str) and value.strip() else f"must be text, got {value!r}"


def _url(value: Any) -> str | None:
    if not isinstance(value, str) or not value.startswith(("http://", "https://")):
        return f"must be an http:// or https:// URL, got {value!r}"
    return None


def _optional_text(value: Any) -> str | None:
    return None if value is None else _text(value)


def _flag(value: Any) -> str | None:
    return None if isinstance(value, bool) else f"must be true or false, got {value!r}"


SETTINGS: Mapping[str, Setting] = {
    "base_url": Setting(
        None,
        _url,
        "The API root, e.g. https://api.openai.com/v1 (${VAR:-default} reads the environment).",
        True,
        environ=True,
    ),
    "model": Setting(None, _text, "The model name the endpoint serves.", True, environ=True),
    "api_key": Setting(None, _optional_text, "Bearer token; write ${ENV_VAR} to read it."),
    "temperature": Setting(0.0, number_check(0, 2), "Sampling temperature; 0 for steady verdicts."),
    "seed": Setting(0, whole_check(0, 2**31 - 1), "Sampling seed, for endpoints that honour it."),
    "max_tokens": Setting(512, whole_check(1, 100_000), "Longest answer asked for."),
    "response_format": Setting(
        True,
        _flag,
        "Ask for JSON in each prompt's schema (response_format) where the endpoint accepts "
        "it; false sends the prompt alone.",
    ),
    "timeout_s": Setting(60.0, number_check(0, positive=True), "Seconds to wait for each answer."),
    "concurrency": Setting(4, whole_check(1, 256), "Calls in flight at once."),
    "retries": Setting(3, whole_check(0, 20), "Retries after a timeout, 429 or 5xx."),
    "backoff_s": Setting(1.0, number_check(0), "The first retry waits up to this long; doubles."),
    "max_backoff_s": Setting(60.0, number_check(0), "The longest wait, also for Retry-After."),
    "max_error_rate": Setting(
        0.0, number_check(0, 1), "Share of calls that may fail; more stops the run (exit 4)."
    ),
    "price_per_1k_input": Setting(0.0, number_check(0), "Price of 1,000 prompt tokens."),
    "price_per_1k_output": Setting(0.0, number_check(0), "Price of 1,000 answer tokens."),
}


EMBEDDING_SETTINGS: Mapping[str, Setting] = {
    **{
        name: SETTINGS[name]
        for name in (
            "base_url",
            "model",
            "api_key",
            "timeout_s",
            "concurrency",
            "retries",
            "backoff_s",
            "max_backoff_s",
            "max_error_rate",
            "price_per_1k_input",
        )
    },
    "batch_size": Setting(32, whole_check(1, 2048), "Texts embedded per request."),
}
"""The `embeddings:` section: an OpenAI-compatible /embeddings endpoint."""
