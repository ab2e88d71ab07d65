"""The stub OpenAI-compatible server, `llm_eval.stub_openai`, at the path the scripts and
tests run and load it from: `python scripts/stub_openai.py --port 8765` is `python -m
llm_eval.stub_openai --port 8765`, and loading this file gives that module itself."""

from __future__ import annotations

import sys

from llm_eval import stub_openai

if __name__ == "__main__":
    stub_openai.main()
else:
    sys.modules[__name__] = stub_openai
