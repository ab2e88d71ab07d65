"""The files `llm-eval init` writes (package data)."""
