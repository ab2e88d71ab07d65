"""Screenshots of the PR comment the way GitHub shows it, for docs/ and for review.

Renders each fixture report in tests/gold/reports with `render_comment`, turns the
Markdown into HTML with cmark-gfm (GitHub's GFM extensions), wraps it in GitHub's
stylesheet at 1000 px, and screenshots it with headless Chromium at its full height.

Needs `cmark-gfm` and `chromium` (Debian packages) and github-markdown.css from npm:

    apt-get install -y chromium cmark-gfm fonts-noto-color-emoji  # emoji: else blank boxes
    npm pack github-markdown-css && tar xzf github-markdown-css-*.tgz
    python scripts/render_screenshots.py --css package/github-markdown-light.css

It prints each PNG's path and height in pixels.
"""

from __future__ import annotations

import argparse
import json
import re
import subprocess
import tempfile
from pathlib import Path

from llm_eval.formats._markup import Links
from llm_eval.formats.markdown import render_comment

ROOT = Path(__file__).resolve().parents[1]
SHOTS = {
    "pass": "pass",
    "warn": "warning",
    "fail": "failure",
    "inconclusive": "inconclusive",
    "gold-changed": "gold_changed",
    "drift": "drift",
}
"""docs/comment-<key>.png from tests/gold/reports/<value>.json."""
DASHBOARD = Links(dashboard="https://owner.github.io/repo/")
"""A configured dashboard, linked from the trend line of the reports that have one."""
WIDTH = 1000
GFM_EXTENSIONS = ("table", "strikethrough", "autolink", "tasklist")
CHROMIUM_FLAGS = [
    "--headless",
    "--no-sandbox",
    "--disable-gpu",
    "--disable-quic",
    "--no-first-run",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
    "--hide-scrollbars",
]
_PAGE = """<!doctype html><html><head><meta charset="utf-8"><style>{css}
body {{ margin: 0; background: #fff; }}
.markdown-body {{ box-sizing: border-box; width: {width}px; padding: 16px 24px; }}
</style></head><body><article class="markdown-body">{body}</article>
<script>document.title = "h" + document.body.scrollHeight;</script></body></html>"""


def to_html(markdown: str) -> str:
    """GitHub-flavoured Markdown to HTML, with raw HTML such as <details> kept."""
    return subprocess.run(
        [
            "cmark-gfm",
            "--unsafe",
            *(arg for x in GFM_EXTENSIONS for arg in ("-e", x)),
        ],
        input=markdown,
        capture_output=True,
        text=True,
        check=True,
    ).stdout


def chromium(page: Path, profile: Path, *args: str) -> str:
    """Run headless Chromium on `page` with a fresh profile; its stdout."""
    done = subprocess.run(
        ["chromium", *CHROMIUM_FLAGS, f"--user-data-dir={profile}", *args, page.as_uri()],
        capture_output=True,
        text=True,
        check=True,
        timeout=120,
    )
    return done.stdout


def screenshot(markdown: str, css: str, out: Path) -> int:
    """Write the PNG of `markdown` to `out`; return its height in pixels."""
    with tempfile.TemporaryDirectory() as tmp:
        page = Path(tmp) / "comment.html"
        page.write_text(_PAGE.format(css=css, width=WIDTH, body=to_html(markdown)), "utf-8")
        dom = chromium(page, Path(tmp) / "measure", "--dump-dom", f"--window-size={WIDTH},800")
        match = re.search(r"<title>h(\d+)</title>", dom)
        if match is None:
            raise SystemExit(f"could not measure the height of {out.name}")
        height = int(match.group(1))
        chromium(
            page,
            Path(tmp) / "shoot",
            f"--screenshot={out}",
            f"--window-size={WIDTH},{height}",
        )
    return height


def main() -> None:
    """Render every screenshot into docs/."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--css", type=Path, required=True, help="github-markdown css file")
    parser.add_argument("--out", type=Path, default=ROOT / "docs")
    args = parser.parse_args()
    css = args.css.read_text(encoding="utf-8")
    for key, name in SHOTS.items():
        report = json.loads((ROOT / "tests/gold/reports" / f"{name}.json").read_text("utf-8"))
        out = args.out / f"comment-{key}.png"
        height = screenshot(render_comment(report, DASHBOARD), css, out)
        print(f"{out.relative_to(ROOT) if out.is_relative_to(ROOT) else out}: {height} px")


if __name__ == "__main__":
    main()
