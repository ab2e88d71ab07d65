"""The pictures in docs/ show what the current code writes: scripts/render_screenshots.py
draws each from a source kept in docs/_sources/, and these tests write every source
again (the same commands, without Chromium) and compare it with the one committed.

The comments' trend lines and the dashboard are drawn from this repository's git
history, so the tests need a full clone; in a shallow one they are skipped.
"""

from __future__ import annotations

import subprocess
from pathlib import Path

import pytest
from conftest import REPO, script

pictures = script("render_screenshots")
SOURCES = pictures.SOURCES
RERUN = f"run `{pictures.RERUN}` and commit docs/_sources/ and the pictures"
COMMITTED = sorted(p.name for p in SOURCES.iterdir() if p.name != "experiment-dense.csv")
"""Every source a test writes again (the dense experiment needs a model: see below)."""
EXACT = [name for name in COMMITTED if not name.endswith(".csv")]


def shallow() -> bool:
    done = subprocess.run(
        ["git", "-C", str(REPO), "rev-parse", "--is-shallow-repository"],
        capture_output=True,
        text=True,
        check=False,
    )
    return done.returncode != 0 or done.stdout.strip() != "false"


pytestmark = pytest.mark.skipif(
    shallow(), reason="the pictures' trend and dashboard read the full git history"
)


@pytest.fixture(scope="module")
def written(tmp_path_factory: pytest.TempPathFactory) -> dict[str, str]:
    """Every source, written again from the current code."""
    found: dict[str, str] = pictures.sources(tmp_path_factory.mktemp("pictures"))
    return found


def test_each_picture_has_its_source(written: dict[str, str]) -> None:
    assert sorted(written) == COMMITTED, RERUN
    pngs = {p.stem for p in (REPO / "docs").glob("*.png")}
    drawn = {Path(name).stem for name in [*COMMITTED, "experiment-dense.csv"]}
    drawn |= {picture for picture, source in pictures.DRAWN_FROM.items() if source in drawn}
    assert pngs == drawn, f"each docs/*.png is drawn by {pictures.RERUN} from docs/_sources/"


@pytest.mark.parametrize("name", EXACT)
def test_the_source_is_what_the_code_writes_now(written: dict[str, str], name: str) -> None:
    committed = (SOURCES / name).read_text(encoding="utf-8")
    assert written[name] == committed, f"docs/_sources/{name} is stale: {RERUN}"


def test_the_experiment_measures_what_its_picture_shows(written: dict[str, str]) -> None:
    """Everything but the latencies and what they decide (the front): those change
    from run to run, and the picture shows the run that drew it."""
    committed = (SOURCES / "experiment-pareto.csv").read_text(encoding="utf-8")
    now = pictures.without_timing(written["experiment-pareto.csv"])
    assert now == pictures.without_timing(committed), f"experiment-pareto.csv is stale: {RERUN}"


def test_the_dense_experiments_bm25_is_the_demos(written: dict[str, str]) -> None:
    """The dense experiment embeds the corpus with MiniLM (minutes on a CPU), so only
    its BM25 side is checked: the same retriever over the same queries as the demo
    experiment's reference, so the same values."""
    dense = pictures.without_timing((SOURCES / "experiment-dense.csv").read_text("utf-8"))
    demo = pictures.without_timing(written["experiment-pareto.csv"])
    bm25 = next(row for row in dense if row["variant"] == "bm25")
    lucene = next(row for row in demo if row["variant"] == "lucene")
    shared = ("recall@5", "mrr", "ndcg@10")
    assert [bm25[m] for m in shared] == [lucene[m] for m in shared], (
        f"experiment-dense.csv is stale: {RERUN} with all-MiniLM-L6-v2 on disk"
    )
