"""report.json itself: the complete record every other format is rendered from."""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import Any

from llm_eval.formats import RenderOptions


class Json:
    """The report as JSON (`docs/report-json.md`), indented, UTF-8 kept as is."""

    name = "json"
    description = "report.json: everything, for scripts (docs/report-json.md)"
    filename = "report.json"

    def render(self, report: Mapping[str, Any], options: RenderOptions) -> str:
        """Indented JSON ending in a newline."""
        return json.dumps(report, indent=2, ensure_ascii=False, allow_nan=False) + "\n"


FORMAT = Json()
