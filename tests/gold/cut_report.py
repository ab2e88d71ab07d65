"""Cut a report.json from `llm-eval gate` down to a fixture in tests/gold/reports.

    python tests/gold/cut_report.py RUN/report.json tests/gold/reports/NAME.json
    python tests/gold/cut_report.py --hostile tests/gold/reports/failure.json \
        tests/gold/reports/hostile.json

Keeps only the metrics the gates check (every other metric's label would be in
`metric_labels` but never rendered) and the first 30 hit → miss and 15 miss → hit
queries (the counts stay as the gate wrote them). Nothing else is changed: every
number is the gate's. `--hostile` instead puts hostile text into the text fields of
an already cut report (see tests/gold/README.md).
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path
from typing import Any

HIT_TO_MISS_KEPT = 30
MISS_TO_HIT_KEPT = 15


def cut(report: dict[str, Any]) -> dict[str, Any]:
    """Two metrics (those of the gates), a few dozen changed queries."""
    gated = {gate["metric"] for gate in report["gates"]}
    report["metrics"] = [m for m in report["metrics"] if m in gated]
    report["metric_labels"] = {m: report["metric_labels"][m] for m in report["metrics"]}
    for piece in report["slices"]:
        piece["metrics"] = {m: v for m, v in piece["metrics"].items() if m in gated}
    changes = report["changes"]
    changes["hit_to_miss"] = changes["hit_to_miss"][:HIT_TO_MISS_KEPT]
    changes["miss_to_hit"] = changes["miss_to_hit"][:MISS_TO_HIT_KEPT]
    return report


def hostile(report: dict[str, Any]) -> dict[str, Any]:
    """The injections of the first hostile.json, into the same fields."""
    report["notes"][0] = "See #1 and @octocat <!-- --> & `code` | pipe"
    renamed = {"text": "#1|x", "troubleshooting": "@octocat"}
    for piece in report["slices"]:
        if piece["kind"] == "tag" and piece["name"] in renamed:
            piece["name"] = renamed[piece["name"]]
            piece["slice"] = f"tag:{piece['name']}"
    gate = report["gates"][0]
    gate["name"] = "recall_<img src=x onerror=alert(1)>"
    gate["scope"] = "tags @octocat, #1"
    sentence = "recall@5 (tags @octocat, #1) dropped | from `41.1%` to <b>33.1%</b>\nand more"
    gate["sentence"] = sentence
    report["summary"][0] = sentence
    changes = report["changes"]
    changes["hit_to_miss"] = changes["hit_to_miss"][:2]
    changes["hit_to_miss"][0].update(
        query_id="q|1@x",
        query=(
            "ping @octocat about #1 | `rm -rf` <script>alert(1)</script> *bold* _it_ "
            "[link](https://evil.example) & more\nsecond line\r\n| --- |"
        ),
        tags=["@org/team", "#2", "a|b", "`code`", "<b>bold</b>"],
        relevant=[
            "doc|1",
            "doc`2",
            "https://evil.example/x",
            "GH-3",
            "www.evil.example",
            "owner/repo#4",
            "a\\|b",
        ],
    )
    changes["miss_to_hit"] = changes["miss_to_hit"][:1]
    changes["miss_to_hit"][0]["query"] = (
        "<!-- llm-eval:retrieval-gate --> <details><summary>x</summary> $x$ ~~strike~~ "
        "![img](x.png) [^1]"
    )
    report["provenance"]["baseline"]["path"] = "gold/@baseline#1.json"
    return report


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("source", type=Path)
    parser.add_argument("target", type=Path)
    parser.add_argument("--hostile", action="store_true")
    args = parser.parse_args()
    report = json.loads(args.source.read_text(encoding="utf-8"))
    report = hostile(report) if args.hostile else cut(report)
    text = json.dumps(report, indent=1, ensure_ascii=False, allow_nan=False) + "\n"
    args.target.write_text(text, encoding="utf-8")


if __name__ == "__main__":
    main()
