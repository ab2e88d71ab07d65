"""`llm-eval history`: each gate's metric over the baseline's git history (and over
report.json files kept in a history file), newest last."""

from __future__ import annotations

import json
from pathlib import Path


def record_report(report_path: Path, history_file: Path) -> str:
    """Keep one report.json in the history file, as one compact line at its end: the
    report is checked against the schema first, and its commit must be a commit id (a
    report that fails either is refused, exit 3, and the file is left as it was).

    The file is rewritten atomically, under a lock that shuts out other writers from
    reading it until this one has written (`append_line_locked`): writers started at
    once each keep their line, and each counts the lines the file holds right after
    its own. The lines already there are kept as they are, a corrupt one included."""
    from llm_eval.history.series_io import report_commit
    from llm_eval.report_schema import validate_report
    from llm_eval.textio import append_line_locked, read_json_file

    report = validate_report(read_json_file(report_path), report_path)
    commit = report_commit(report, report_path)
    line = json.dumps(report, separators=(",", ":"), allow_nan=False)
    kept = append_line_locked(history_file, line)
    return f"Kept the report of {commit[:12]} in {history_file} ({kept} in all)."
