"""Renderings of the other commands' results (terminal text, Markdown, CSV, JSON), one
module per command family; the gate report's formats are the modules of `formats/`."""
