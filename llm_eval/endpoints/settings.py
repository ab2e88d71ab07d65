"""The `judge:` and `embeddings:` sections of llm-eval.yaml: OpenAI-compatible endpoints.

    judge:
      base_url: https://api.openai.com/v1      # or vLLM, Ollama, llama.cpp, LM Studio, Azure
      model: gpt-4o-mini
      api_key: ${OPENAI_API_KEY}               # read from the environment, never shown
      price_per_1k_input: 0.00015              # for the cost line and --max-cost
      price_per_1k_output: 0.0006

The key is only ever read from the environment when the judge is built; it is not in
the call cache's key, a report or an error.

Each section is checked against its table of `Setting`s once, when the config is read,
and held from then on as a frozen record (`ChatSettings`, `EmbeddingSettings`) with a
typed field per setting; the values keep the type the YAML gave them (`temperature: 0`
stays the integer 0), so that the call cache's keys do not change.

`embeddings:` takes an endpoint the same way, or a sentence-transformers model on disk
(`llm_eval.endpoints.local`), never both:

    embeddings:
      model_path: models/all-MiniLM-L6-v2      # pip install 'llm-eval-ci[local-embeddings]'
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, fields
from pathlib import Path
from typing import Any, ClassVar, Self

from llm_eval.environment import line_break
from llm_eval.errors import InputError
from llm_eval.settings import Setting, number_check, whole_check


def _text(value: Any) -> str | None:
    return None if isinstance(value, str) and value.strip() else f"must be text, got {value!r}"


def _url(value: Any) -> str | None:
    if not isinstance(value, str) or not value.startswith(("http://", "https://")):
        return f"must be an http:// or https:// URL, got {value!r}"
    return line_break(value)


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
    ),
    "model": Setting(None, _text, "The model name the endpoint serves.", True),
    "api_key": Setting(
        None,
        _optional_text,
        "Bearer token; write ${ENV_VAR}: read when a call is made, never kept in the settings.",
        environ=False,
    ),
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
    "max_answer_bytes": Setting(
        1 << 20,
        whole_check(1024, 1 << 40),
        "The longest answer read, in bytes; a longer one fails its call unread.",
    ),
    "price_per_1k_input": Setting(0.0, number_check(0), "Price of 1,000 prompt tokens."),
    "price_per_1k_output": Setting(0.0, number_check(0), "Price of 1,000 answer tokens."),
}


def _optional_url(value: Any) -> str | None:
    return None if value is None else _url(value)


MODEL_FILES = ("modules.json", "config.json")
"""A sentence-transformers folder has modules.json; a plain transformers one config.json."""


def check_model_folder(value: Any) -> str | None:
    """None, or a folder on disk that holds a model (nothing is ever downloaded)."""
    if value is None:
        return None
    if not isinstance(value, str) or not value.strip():
        return f"must be the path of a model folder, got {value!r}"
    folder = Path(value)
    if not folder.is_dir():
        return f"no such folder: {value} (a model on disk; nothing is downloaded)"
    if not any((folder / name).is_file() for name in MODEL_FILES):
        return f"no model in {value}: it has neither {' nor '.join(MODEL_FILES)}"
    return None


EMBEDDING_SETTINGS: Mapping[str, Setting] = {
    "base_url": Setting(
        None,
        _optional_url,
        "An /embeddings API root, e.g. https://api.openai.com/v1 (or give model_path).",
    ),
    "model": Setting(None, _optional_text, "The model name the endpoint serves."),
    "model_path": Setting(
        None,
        check_model_folder,
        "A sentence-transformers model folder on disk, instead of an endpoint; never "
        "downloaded (needs llm-eval-ci[local-embeddings]).",
    ),
    **{
        name: SETTINGS[name]
        for name in (
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
    "max_answer_bytes": Setting(
        64 << 20,
        whole_check(1024, 1 << 40),
        "The longest answer to a batch read, in bytes; a longer one fails its call unread.",
    ),
    "batch_size": Setting(
        32, whole_check(1, 2048), "Texts embedded per request (per batch, by a model on disk)."
    ),
}
"""The `embeddings:` section: an OpenAI-compatible /embeddings endpoint, or a model on disk."""


def check_embedding_source(settings: EmbeddingSettings) -> None:
    """An endpoint (base_url and model) or a model on disk (model_path), exactly one;
    InputError naming the key otherwise."""
    endpoint = {"base_url": settings.base_url, "model": settings.model}
    if settings.model_path is not None:
        for name, value in endpoint.items():
            if value is not None:
                raise InputError(
                    "give either model_path (a model on disk) or base_url and model (an "
                    "endpoint), not both",
                    key=name,
                )
        return
    for name, value in endpoint.items():
        if value is None:
            raise InputError(
                f"missing required key {name!r} (or give model_path: a model folder on disk)"
            )


def _from_checked(record: type[Any], values: Mapping[str, Any]) -> Any:
    """`record` built from a section's checked values: one field per declared setting."""
    return record(**{f.name: values[f.name] for f in fields(record)})


@dataclass(frozen=True, slots=True)
class ChatSettings:
    """The checked `judge:` section (`SETTINGS` says what each setting means)."""

    base_url: str
    model: str
    api_key: str | None
    """The setting as written (`${OPENAI_API_KEY}`): the key itself is read from the
    environment only when a call is made."""
    temperature: float
    seed: int
    max_tokens: int
    response_format: bool
    timeout_s: float
    concurrency: int
    retries: int
    backoff_s: float
    max_backoff_s: float
    max_error_rate: float
    max_answer_bytes: int
    price_per_1k_input: float
    price_per_1k_output: float

    @classmethod
    def create(cls, values: Mapping[str, Any]) -> Self:
        """The record of values checked against `SETTINGS` (every setting present)."""
        found: Self = _from_checked(cls, values)
        return found


@dataclass(frozen=True, slots=True)
class EmbeddingSettings:
    """The checked `embeddings:` section (`EMBEDDING_SETTINGS`): an endpoint (`base_url`
    and `model`) or a model on disk (`model_path`)."""

    base_url: str | None
    model: str | None
    model_path: str | None
    api_key: str | None
    """As `ChatSettings.api_key`: read from the environment when a call is made."""
    timeout_s: float
    concurrency: int
    retries: int
    backoff_s: float
    max_backoff_s: float
    max_error_rate: float
    price_per_1k_input: float
    max_answer_bytes: int
    batch_size: int
    price_per_1k_output: ClassVar[float] = 0.0
    """An embeddings endpoint answers vectors, no tokens to price."""

    @classmethod
    def create(cls, values: Mapping[str, Any]) -> Self:
        """The record of values checked against `EMBEDDING_SETTINGS`; other keys (the
        embedding retriever's own settings) are left out."""
        found: Self = _from_checked(cls, values)
        return found
