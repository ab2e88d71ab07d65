"""An llm reranker: an OpenAI-compatible chat endpoint asked about each pair on its own.

    reranker:
      type: llm
      base_url: http://127.0.0.1:8080/v1       # the judge's endpoint settings
      model: SmolLM2-135M-Instruct
      prompt: prompts/rerank-minimal.txt        # {query}, {document}, optional {scale}
      scale: 0-100                              # or 1-5, binary (with a confidence)
      temperature: 0
      timeout_s: 30

Pointwise: one chat call per (query, document), asked for JSON in the scale's schema
(`response_format`, as the judge asks: `llm_eval.endpoints.chat`), each call kept in the
judge's call cache under `<output>/cache/judge/`. An answer that is not a score on the
scale is a failure with its reason (`unreadable answer: not JSON: …`); a call that
fails for good is one too (`timeout`, `http 503`). Pairs are asked `concurrency` at a
time; each score's cost is its own call's wall time.
"""

from __future__ import annotations

import time
from collections.abc import Iterator, Mapping, Sequence
from concurrent.futures import ThreadPoolExecutor
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from llm_eval.endpoints.chat import ChatClient, Message, Session
from llm_eval.endpoints.client import EndpointFailed
from llm_eval.endpoints.settings import SETTINGS as ENDPOINT_SETTINGS
from llm_eval.endpoints.settings import ChatSettings
from llm_eval.rerankers import RerankerType, Scored, ScorePairs
from llm_eval.rerankers.prompt_file import RerankPrompt, read_prompt
from llm_eval.rerankers.scale import SCALES, Scale, Unreadable, scale
from llm_eval.settings import Setting


def check_prompt(value: Any) -> str | None:
    """The path of a prompt file (read and checked when the settings are read)."""
    if not isinstance(value, str) or not value.strip():
        return f"must be the path of a prompt file, got {value!r}"
    return None


def check_scale(value: Any) -> str | None:
    """One of SCALES."""
    return None if value in SCALES else f"must be one of {', '.join(SCALES)}, got {value!r}"


_ENDPOINT = (
    "base_url",
    "model",
    "api_key",
    "temperature",
    "seed",
    "max_tokens",
    "response_format",
    "timeout_s",
    "concurrency",
    "retries",
    "backoff_s",
    "max_backoff_s",
    "max_answer_bytes",
)

SETTINGS: Mapping[str, Setting] = {
    **{name: ENDPOINT_SETTINGS[name] for name in _ENDPOINT},
    "prompt": Setting(
        None, check_prompt, "A prompt file with {query} and {document} (and {scale}).", True
    ),
    "scale": Setting("0-100", check_scale, "The answer's scale: 0-100, 1-5 or binary."),
}


@dataclass(frozen=True, slots=True)
class LlmSettings:
    """The checked settings of the llm reranker."""

    chat: ChatSettings
    prompt: RerankPrompt
    scale: Scale

    @classmethod
    def from_checked(cls, values: Mapping[str, Any]) -> LlmSettings:
        """The record of checked settings; the prompt file read and checked."""
        endpoint = {name: setting.default for name, setting in ENDPOINT_SETTINGS.items()}
        endpoint.update({name: values[name] for name in _ENDPOINT})
        return cls(
            ChatSettings.create(endpoint), read_prompt(values["prompt"]), scale(values["scale"])
        )


@dataclass(frozen=True, slots=True)
class LlmReranker:
    """Scores each pair with one chat call."""

    settings: LlmSettings
    client: ChatClient

    @property
    def identity(self) -> Mapping[str, Any]:
        """The endpoint, model, sampling, prompt digest and scale."""
        chat = self.settings.chat
        return {
            "type": "llm",
            "url": self.client.url,
            "model": chat.model,
            "temperature": chat.temperature,
            "seed": chat.seed,
            "max_tokens": chat.max_tokens,
            "response_format": chat.response_format,
            "prompt": self.settings.prompt.digest,
            "scale": self.settings.scale.name,
        }

    @contextmanager
    def session(self) -> Iterator[ScorePairs]:
        """Pairs asked `concurrency` at a time over one connection pool."""
        workers = self.settings.chat.concurrency
        with self.client.session() as chat, ThreadPoolExecutor(workers) as pool:

            def score(query: str, texts: Sequence[str]) -> list[Scored]:
                return list(pool.map(lambda text: self.score(chat, query, text), texts))

            yield score

    def score(self, chat: Session, query: str, text: str, repeat: int = 0) -> Scored:
        """One pair's score (the `repeat`-th asking of it: a call of its own)."""
        prompt, scale_ = self.settings.prompt, self.settings.scale
        message = Message("user", prompt.filled(query, text, scale_.instruction))
        started = time.perf_counter()
        try:
            answer = chat.ask(f"rerank-{prompt.digest}", [message], repeat, scale_.schema)
        except EndpointFailed as failure:
            return Scored(None, _ms(started), str(failure))
        try:
            return Scored(scale_.normalised(answer.content), _ms(started))
        except Unreadable as exc:
            return Scored(None, _ms(started), f"unreadable answer: {exc}")


def _ms(started: float) -> float:
    return (time.perf_counter() - started) * 1000


def build(settings: LlmSettings, cache_dir: Path) -> LlmReranker:
    """The reranker, its calls kept in the judge's call cache."""
    return LlmReranker(settings, ChatClient(settings.chat, cache_dir / "judge"))


TYPE = RerankerType(
    name="llm",
    description="An OpenAI-compatible chat endpoint scores each pair with a prompt file.",
    record=LlmSettings.from_checked,
    build=build,
    settings=SETTINGS,
    files=lambda settings: [Path(settings.prompt.path)],
)
