"""`llm-eval cache-key`: the key under which CI keeps the output folder's cache.

    $ llm-eval cache-key --config config/llm-eval.yaml
    key=llm-eval-linux-3f2a9c0d1e4b5a67-8c1d0e2f3a4b5c6d
    restore-key=llm-eval-linux-3f2a9c0d1e4b5a67-
    path=/home/runner/work/repo/repo/.llm-eval/cache

The lines are GitHub's step outputs (append them to $GITHUB_OUTPUT) for
actions/cache: `path` is `<output>/cache` (BM25 indexes, embeddings, cached answers),
absolute, because the cache action resolves paths from the workspace and tells
caches apart by the paths they were saved with. The key is made of the operating
system, a digest of the retriever (its kind and settings, each model folder by the
digest of its files, so the same model at another path is the same retriever) and
the corpus file's digest. A changed corpus misses the key but matches `restore-key`,
the last cache of the same retriever, whose embeddings are still those of the
documents that did not change. Reading the config is all it costs: no model is
loaded, no index built. Every value printed is one line: a line break in the
output folder (or a corpus that is not a regular file) is an error, never a line a
config could use to add an output of its own. A config without a retriever, or whose
retriever reads a run file, has nothing to cache: nothing is printed, and the
workflows then skip caching.
"""

from __future__ import annotations

import platform
from dataclasses import dataclass
from pathlib import Path

from llm_eval.config_io import load_config
from llm_eval.environment import line_break
from llm_eval.errors import InputError
from llm_eval.fingerprint_io import retriever_identity
from llm_eval.retrievers import retriever_kind
from llm_eval.textio import file_digest


@dataclass(frozen=True, slots=True)
class CacheKey:
    """Where the cache is, and the keys it is saved and restored under."""

    key: str
    """The exact key: operating system, retriever and corpus."""
    restore_key: str
    """The prefix a missed key falls back to: the same retriever on any corpus."""
    path: Path
    """The output folder's cache, absolute."""

    def outputs(self) -> str:
        """`name=value` lines for $GITHUB_OUTPUT; no value holds a line break
        (`cache_key` refuses one), so each line is one output."""
        return f"key={self.key}\nrestore-key={self.restore_key}\npath={self.path}"


def cache_key(config_path: Path, system: str | None = None) -> CacheKey | None:
    """The cache key of the config's retriever (None when there is nothing to cache);
    `system` is the operating system's name (default: this one's)."""
    config = load_config(config_path)
    retriever = config.retriever
    if retriever is None:
        return None
    kind = retriever_kind(retriever.kind)
    if kind.answers_file(kind.record(retriever.settings)):
        return None
    os_name = (system or platform.system()).lower()
    prefix = f"llm-eval-{os_name}-{retriever_identity(retriever)}-"
    corpus = file_digest(config.corpus) if config.corpus is not None else "no-corpus"
    path = (config.output / "cache").resolve()
    if problem := line_break(str(path)):  # from the working folder: the config's is checked
        raise InputError(f"the cache folder {problem}", path=config_path, key="output")
    return CacheKey(prefix + corpus, prefix, path)
