"""A retriever that is not the same twice: `builds: K`, the test that holds the variance
between builds, and the refresh's check for noise.

The end-to-end tests use a python retriever whose "index" leaves out a fifth of the
corpus, chosen from a seed drawn when its module is imported: as an approximate index
trained at random when the service starts, one process gives one build, and only a
fresh process gives another.
"""

from __future__ import annotations

import json
import math
import re
import shutil
import textwrap
from collections.abc import Callable
from pathlib import Path

import numpy as np
import pytest
from conftest import Cli

from llm_eval import stats
from llm_eval.builds import (
    BuildSpread,
    BuildsT,
    WithBuilds,
    averaged,
    build_spread,
    builds_bound,
    joined_test,
    spread_of,
    t_cdf,
    t_quantile,
)

ALPHA = 0.05
LIMIT = 0.03


@pytest.mark.parametrize(
    ("p", "degrees", "expected"),
    [
        # scipy.stats.t.ppf(p, degrees), to 10 digits
        (0.975, 1, 12.7062047362),
        (0.975, 2, 4.3026527297),
        (0.975, 8, 2.3060041350),
        (0.95, 4, 2.1318467863),
        (0.99, 30, 2.4572615424),
        (0.5, 3, 0.0),
    ],
)
def test_t_quantiles_are_students(p: float, degrees: int, expected: float) -> None:
    assert t_quantile(p, degrees) == pytest.approx(expected, abs=1e-9)
    if expected > 0:
        assert t_cdf(expected, degrees) == pytest.approx(p, abs=1e-9)


def test_one_build_a_side_is_the_single_build_test() -> None:
    one = {"q1": {"mrr": 1.0}, "q2": {"mrr": 0.5}}
    assert build_spread([one], [one], ["q1", "q2"], "mrr") is None
    inner = stats.column_test(np.array([1.0, 0.5]), np.array([0.5, 0.5]), ALPHA)
    assert joined_test(inner, None, np.array([0.5, 0.0])) is inner


def test_the_spread_pools_both_sides() -> None:
    spread = BuildSpread((0.50, 0.52, 0.54), (0.40, 0.44))
    # squares 0.0008 and 0.0008 over 2 + 1 degrees of freedom
    assert spread.degrees == 3
    assert spread.sd == pytest.approx(math.sqrt(0.0016 / 3))
    assert spread.scale == pytest.approx(math.sqrt(1 / 3 + 1 / 2))
    assert spread.widest_move == pytest.approx(0.04)
    assert builds_bound(spread.sd, spread.degrees, spread.scale, 0.025) == pytest.approx(
        t_quantile(0.975, 3) * math.sqrt(0.0016 / 3) * math.sqrt(5 / 6)
    )


def test_the_shifts_variance_is_the_spread_less_the_per_query_noise() -> None:
    """A two-way analysis of variance: builds that differ only by per-query noise leave
    no shift once that noise is taken out; a shift shared by all queries stays."""
    rng = np.random.default_rng(7)
    noise = rng.normal(0.0, 0.3, size=(3, 2000))
    quiet = spread_of(0.5 + noise[:, :1000], 0.5 + noise[:, 1000:])
    # what per-query noise of sd 0.3 puts into a mean of 1,000 queries: 0.3^2 / 1000
    assert quiet.within == pytest.approx(0.09 / 1000, rel=0.1)
    shifted = spread_of(
        0.5 + noise[:, :1000] + np.array([[0.0], [0.05], [-0.05]]),
        0.5 + noise[:, 1000:] + np.array([[0.02], [-0.04], [0.02]]),
    )
    assert shifted.within == pytest.approx(quiet.within, rel=1e-9)  # shifts leave it be
    assert shifted.shift_sd == pytest.approx(math.sqrt((0.005 + 0.0036) / 4), rel=0.15)
    variance, degrees = shifted.shift_variance()
    assert variance == pytest.approx(shifted.shift_sd**2 * (2 / 3))
    assert 0 < degrees <= shifted.degrees
    assert spread_of(np.full((2, 5), 0.5), np.full((2, 5), 0.5)).shift_variance() == (0.0, math.inf)


def test_the_builds_t_is_welchs_test_with_the_shifts_variance() -> None:
    """BuildsT against scipy's Student's t at Satterthwaite's degrees of freedom."""
    from scipy import stats as scipy_stats

    rng = np.random.default_rng(3)
    worsening = rng.normal(0.04, 0.3, 200)
    spread = BuildSpread((0.50, 0.53, 0.47), (0.46, 0.49, 0.45), within=0.0001)
    test = BuildsT(worsening, spread)
    queries = worsening.var(ddof=1) / 200
    shifts = (spread.sd**2 - 0.0001) * (2 / 3)
    degrees = (queries + shifts) ** 2 / (
        queries**2 / 199 + (spread.sd**2 * 2 / 3) ** 2 / spread.degrees
    )
    t = (worsening.mean() - 0.03) / math.sqrt(queries + shifts)
    assert test.degrees == pytest.approx(degrees)
    assert test.p_beyond(0.03) == pytest.approx(scipy_stats.t.sf(t, degrees), abs=1e-9)
    assert test.p_within(0.03) == pytest.approx(scipy_stats.t.cdf(t, degrees), abs=1e-9)


def test_averaged_is_the_mean_over_the_builds_that_scored_a_query() -> None:
    builds = [{"a": {"m": 1.0}, "b": {"m": 0.0}}, {"a": {"m": 0.0}}, {"a": {"m": 0.5}}]
    assert averaged(builds) == {"a": {"m": 0.5}, "b": {"m": 0.0}}


@pytest.mark.parametrize("seed", range(6))
def test_bounds_and_p_values_of_the_joined_test_agree(seed: int) -> None:
    """The bound lies beyond the margin exactly when that side's p-value is at most the
    level, as for every test of the gate (`ColumnTest.bounds`)."""
    rng = np.random.default_rng(seed)
    before = rng.random(120)
    after = np.clip(before - rng.normal(0.03, 0.2, 120), 0, 1)
    spread = BuildSpread(
        tuple(0.5 + rng.normal(0, 0.01, 3)), tuple(0.47 + rng.normal(0, 0.01, 3)), 0.00002
    )
    inner = stats.column_test(before, after, ALPHA)
    test = WithBuilds(inner, spread, BuildsT(before - after, spread))
    for margin in (-0.05, 0.0, 0.02, 0.05, 0.1):
        margined = stats.tested_margin(test, before, after, margin, ALPHA)
        assert (margined.low > margin) == (margined.p_beyond <= ALPHA)
        assert (margined.high < margin) == (margined.p_within <= ALPHA)
        assert -1.0 <= margined.low <= margined.high <= 1.0
        # rejected only where both parts reject
        assert margined.p_beyond == max(inner.p_beyond(margin), test.t.p_beyond(margin))


def _side(rng: np.random.Generator, u: np.ndarray, mean: float, builds: int) -> np.ndarray:
    """(builds, queries) 0/1 scores: each build shifts the mean by N(0, 0.02^2), and a
    tenth of the queries are drawn afresh at every build."""
    shift = rng.normal(0.0, 0.02, size=(builds, 1))
    p = np.clip(mean + shift, 0, 1)
    stable = (u[None] < p).astype(float)
    fresh = (rng.random((builds, u.size)) < p).astype(float)
    return np.where(rng.random((builds, u.size)) < 0.1, fresh, stable)


def _fails(before: np.ndarray, after: np.ndarray) -> tuple[bool, bool]:
    """(the single-build test on per-query means, the joined test) fail at the limit."""
    xb, xa = before.mean(axis=0), after.mean(axis=0)
    single = stats.column_test(xb, xa, ALPHA).p_beyond(LIMIT) <= ALPHA
    spread = build_spread(
        [{str(q): {"m": v} for q, v in enumerate(b)} for b in before],
        [{str(q): {"m": v} for q, v in enumerate(a)} for a in after],
        [str(q) for q in range(xb.size)],
        "m",
    )
    joined = joined_test(stats.column_test(xb, xa, ALPHA), spread, xb - xa)
    return single, joined.p_beyond(LIMIT) <= ALPHA


@pytest.mark.parametrize("builds", [2, 3])
def test_a_drop_at_the_limit_fails_at_most_alpha_with_build_noise(builds: int) -> None:
    """Build-level noise as an approximate index has it (a shift of 2 points per build,
    a tenth of the queries flipping): at a true drop of exactly the limit the joined test
    fails at most alpha of the time (within 99% of sampling error over 300 draws), where
    the single-build test on the same means fails more often than alpha allows."""
    rng = np.random.default_rng(49 + builds)
    draws = 300
    single = joined = 0
    for _ in range(draws):
        u = rng.random(400)
        one, both = _fails(_side(rng, u, 0.6, builds), _side(rng, u, 0.6 - LIMIT, builds))
        single += one
        joined += both
    ceiling = ALPHA + 2.33 * math.sqrt(ALPHA * (1 - ALPHA) / draws)
    assert joined / draws <= ceiling
    assert single / draws > ceiling  # beyond alpha: the single-build test is not valid here


# --- end to end ------------------------------------------------------------------------

NOISY_INDEX = '''
"""An "approximate index" that leaves out a fifth of the corpus, chosen at random when
the module is imported (as an index trained when the service starts)."""
import collections
import json
import random
import re

SEED = random.SystemRandom().randrange(2**32)


def words(text):
    return set(re.findall(r"[a-z0-9_]+", text.lower()))


class Index:
    """Scores a document by the words it shares with the query, ties by id: looked up
    in postings of each word, not by scanning every document."""

    def __init__(self, corpus="gold/corpus.jsonl", share=0.2):
        left_out = random.Random(SEED)
        self.postings = {}
        kept = []
        with open(corpus, encoding="utf-8") as lines:
            for line in lines:
                row = json.loads(line)
                if left_out.random() >= share:
                    kept.append(row["_id"])
                    for word in words(row.get("title", "") + " " + row["text"]):
                        self.postings.setdefault(word, []).append(row["_id"])
        self.by_id = sorted(kept)

    def retrieve(self, query, top_k):
        shared = collections.Counter()
        for word in words(query):
            shared.update(self.postings.get(word, ()))
        scored = sorted(shared.items(), key=lambda pair: (-pair[1], pair[0]))[:top_k]
        # Documents sharing no word tie at 0, in id order.
        for doc_id in self.by_id:
            if len(scored) >= top_k:
                break
            if doc_id not in shared:
                scored.append((doc_id, 0))
        return [{"doc_id": d, "score": float(s)} for d, s in scored]
'''


@pytest.fixture
def noisy(demo_project: Path) -> Path:
    """The demo with the noisy index as its retriever (config/noisy.yaml)."""
    (demo_project / "noisy_index.py").write_text(textwrap.dedent(NOISY_INDEX), encoding="utf-8")
    config = (demo_project / "config" / "llm-eval.yaml").read_text(encoding="utf-8")
    retriever = "retriever:\n  kind: python\n  target: noisy_index:Index\n  python_path: ['.']\n"
    start, end = config.index("retriever:"), config.index("metrics:")
    noisy = config[:start] + retriever + config[end:]
    (demo_project / "config" / "noisy.yaml").write_text(noisy, encoding="utf-8")
    return demo_project


def test_refresh_builds_a_retriever_not_known_to_be_deterministic_twice(
    noisy: Path, cli: Cli
) -> None:
    code, out, _ = cli("baseline", "refresh", "--config", "config/noisy.yaml", "--force")
    assert code == 0, out
    said = " ".join(out.split())
    assert "Two builds of this retriever differ in" in said
    assert "of top-5 lists" in said
    assert "recall@5 (tier A) moved" in said
    baseline = json.loads((noisy / "gold" / "baseline.json").read_text(encoding="utf-8"))
    assert "builds" not in baseline  # the check's second build is not kept


def test_bm25_is_built_once_whatever_builds_says(demo_project: Path, cli: Cli) -> None:
    code, once, _ = cli("gate", "--out", "one")
    assert code == 0
    code, thrice, _ = cli("gate", "--builds", "3", "--out", "three")
    assert code == 0
    assert "one build stands for the 3 asked" in " ".join(thrice.split())
    assert "one build stands" not in " ".join(once.split())
    one = json.loads((demo_project / "one" / "report.json").read_text(encoding="utf-8"))
    three = json.loads((demo_project / "three" / "report.json").read_text(encoding="utf-8"))
    assert [g["stats"] for g in one["gates"]] == [g["stats"] for g in three["gates"]]
    assert all("builds" not in (g["stats"] or {}) for g in three["gates"])


def test_one_build_reports_byte_for_byte_as_a_gate_without_builds(
    demo_project: Path, cli: Cli
) -> None:
    """`--builds 1` and `builds: 1` in the config are today's gate: report.json and the
    JUnit file (but for their timings) and report.md are the same as without them."""
    config = (demo_project / "config" / "llm-eval.yaml").read_text(encoding="utf-8")
    start = config.index("retriever:")
    end = config.index("\n", start)
    one = config[: end + 1] + "  builds: 1\n" + config[end + 1 :]
    (demo_project / "config" / "one.yaml").write_text(one, encoding="utf-8")
    # One output folder, so that the power figures computed by the first gate serve
    # the others; each gate's reports are copied aside.
    for name, args in (
        ("plain", ()),
        ("flag", ("--builds", "1")),
        ("in-config", ("--config", "config/one.yaml")),
    ):
        code, out, _ = cli("gate", *args, "--out", "out")
        assert code == 0, (name, out)
        (demo_project / name).mkdir()
        for file in ("report.json", "report.md", "report.junit.xml"):
            shutil.copy(demo_project / "out" / file, demo_project / name / file)

    def report(name: str) -> dict[str, object]:
        data = json.loads((demo_project / name / "report.json").read_text(encoding="utf-8"))
        data.pop("timings")
        data["provenance"].pop("generated_at")
        return data

    def junit(name: str) -> str:
        text = (demo_project / name / "report.junit.xml").read_text(encoding="utf-8")
        return re.sub(r' (time|timestamp)="[^"]*"', "", text)

    for name in ("flag", "in-config"):
        assert report(name) == report("plain"), name
        markdown = (demo_project / name / "report.md").read_bytes()
        assert markdown == (demo_project / "plain" / "report.md").read_bytes(), name
        assert junit(name) == junit("plain"), name


def test_three_builds_a_side_hold_the_spread_on_every_surface(noisy: Path, cli: Cli) -> None:
    code, out, _ = cli(
        "baseline", "refresh", "--config", "config/noisy.yaml", "--builds", "3", "--force"
    )
    assert code == 0, out
    assert "3 builds of this retriever differ in" in " ".join(out.split())
    baseline = json.loads((noisy / "gold" / "baseline.json").read_text(encoding="utf-8"))
    assert len(baseline["builds"]) == 3
    assert len({json.dumps(b, sort_keys=True) for b in baseline["builds"]}) == 3  # each its own
    # The change leaves out two thirds of the corpus, a fifth before: recall@5 drops far
    # beyond the limit whatever the builds drew, so the regression check fails and
    # prints its interval.
    config = (noisy / "config" / "noisy.yaml").read_text(encoding="utf-8")
    worse = config.replace(
        "  target: noisy_index:Index\n", "  target: noisy_index:Index\n  init: {share: 0.67}\n"
    )
    assert worse != config
    (noisy / "config" / "worse.yaml").write_text(worse, encoding="utf-8")
    code, out, _ = cli("gate", "--config", "config/worse.yaml", "--builds", "3")
    assert code == 1, out
    said = " ".join(out.split())
    assert "dropped from" in said and "more than the 3.0 pp allowed" in said
    assert "built 3 times" in said
    assert "over 3 builds each, a build's mean ±" in said
    assert "recall@5 (tier A): with 3 builds of 176 queries, a drop of" in said
    report = json.loads((noisy / ".llm-eval" / "report.json").read_text(encoding="utf-8"))
    recall = next(g for g in report["gates"] if g["name"] == "retrieval_recall_at_5")
    assert recall["stats"]["builds"]["before"] == 3 and recall["stats"]["builds"]["after"] == 3
    assert recall["stats"]["builds"]["sd"] > 0
    values = recall["stats"]["builds"]["values"]
    assert len(values) == 3 and len(set(values)) > 1  # each build's own value
    assert min(values) <= recall["value"] <= max(values)
    assert recall["power"]["builds"] == [3, 3]
    assert recall["power"]["more_builds"]["builds"] == 5
    markdown = " ".join((noisy / ".llm-eval" / "report.md").read_text(encoding="utf-8").split())
    assert "over 3 builds each, a build's mean ±" in markdown
    note = "This retriever answers a little differently each time it is built"
    assert any(n.startswith(note) for n in report["notes"])
    assert note in markdown and note in said  # one note, on every surface
    assert "with 3 builds of 176 queries" in markdown


def test_retrieve_writes_one_run_per_build_and_a_run_glob_reads_them(noisy: Path, cli: Cli) -> None:
    code, out, _ = cli(
        "retrieve", "--config", "config/noisy.yaml", "--builds", "2", "--out", "runs/run.jsonl"
    )
    assert code == 0, out
    first = (noisy / "runs" / "run-build1.jsonl").read_text(encoding="utf-8")
    second = (noisy / "runs" / "run-build2.jsonl").read_text(encoding="utf-8")
    assert first != second  # each build in a process of its own, its own seed
    assert "path: runs/run-build*.jsonl" in out
    config = (noisy / "config" / "llm-eval.yaml").read_text(encoding="utf-8")
    start, end = config.index("retriever:"), config.index("metrics:")
    globbed = config[:start] + "retriever:\n  kind: run\n  path: runs/run-build*.jsonl\n"
    (noisy / "config" / "runs.yaml").write_text(globbed + config[end:], encoding="utf-8")
    code, out, _ = cli("baseline", "refresh", "--config", "config/runs.yaml", "--force")
    assert code == 0, out
    baseline = json.loads((noisy / "gold" / "baseline.json").read_text(encoding="utf-8"))
    assert len(baseline["builds"]) == 2


# --- a real approximate index ----------------------------------------------------------


@pytest.fixture
def ivf(demo_project: Path) -> Path:
    """The demo with LanceDB's IVF-PQ (tests/data/ivf_index.py) as its retriever in
    config/ivf.yaml, and the demo's criteria without floors in config/no-floors.yaml."""
    from recipes import need

    need("lancedb", install="lancedb")
    (demo_project / "ivf_index.py").write_text(
        (Path(__file__).parent / "data" / "ivf_index.py").read_text(encoding="utf-8"),
        encoding="utf-8",
    )
    config = (demo_project / "config" / "llm-eval.yaml").read_text(encoding="utf-8")
    retriever = "retriever:\n  kind: python\n  target: ivf_index:Index\n  python_path: ['.']\n"
    start, end = config.index("retriever:"), config.index("metrics:")
    (demo_project / "config" / "ivf.yaml").write_text(config[:start] + retriever + config[end:])
    criteria = (demo_project / "config" / "ship-criteria.yaml").read_text(encoding="utf-8")
    kept = [line for line in criteria.splitlines() if not line.strip().startswith("threshold:")]
    (demo_project / "config" / "no-floors.yaml").write_text("\n".join(kept) + "\n")
    return demo_project


def test_an_ivf_pq_index_rebuilt_in_every_process_is_seen_and_held(ivf: Path, cli: Cli) -> None:
    both = ("--config", "config/ivf.yaml", "--criteria", "config/no-floors.yaml")
    code, out, _ = cli("baseline", "refresh", *both, "--force")
    assert code == 0, out
    said = " ".join(out.split())
    assert "Two builds of this retriever differ in" in said
    assert "recall@5 (tier A) moved" in said
    code, out, _ = cli("baseline", "refresh", *both, "--force", "--builds", "2")
    assert code == 0, out
    code, out, _ = cli("gate", *both, "--builds", "2")
    report = json.loads((ivf / ".llm-eval" / "report.json").read_text(encoding="utf-8"))
    recall = next(g for g in report["gates"] if g["name"] == "retrieval_recall_at_5")
    assert recall["stats"]["builds"]["before"] == 2
    assert recall["stats"]["builds"]["after"] == 2
    assert recall["stats"]["builds"]["sd"] > 0
    assert recall["power"]["builds"] == [2, 2]
    # the same commit, rebuilt: the gate never calls it a regression beyond the limit
    assert recall["stats"]["p_value"] > recall["stats"]["alpha"]
    assert code == 0, out


@pytest.mark.parametrize("degrees", [1.3, 2, 4, 10, 60, 999, 5000])
def test_the_power_statements_distance_counts_the_spread_seen_as_one_draw(
    degrees: float,
) -> None:
    """The drop the power statement names for the builds' t is caught 4 times in 5 on
    average over the estimate it was counted from (a scaled chi-square) and over the
    test's own (scipy's noncentral t, each estimate integrated by scipy's quad); the
    estimate taken as the truth catches it less often at few degrees of freedom."""
    from scipy import integrate
    from scipy import stats as scipy_stats

    from llm_eval.power import _distance_seen

    critical = t_quantile(0.95, degrees)
    distance = _distance_seen(critical, degrees)

    def caught(d: float) -> float:
        def at(w: float) -> float:
            seen = d * math.sqrt(w / degrees)
            return float(
                scipy_stats.chi2.pdf(w, degrees) * scipy_stats.nct.sf(critical, degrees, seen)
            )

        spread = 40.0 * math.sqrt(2.0 * degrees) + 100.0
        return float(integrate.quad(at, 0.0, degrees + spread, limit=500, points=[degrees])[0])

    assert caught(distance) == pytest.approx(0.8, abs=0.004)
    if degrees <= 4:
        # The estimate taken as the truth: the noncentrality whose own catch rate is 0.8.
        truth = _solve(lambda d: float(scipy_stats.nct.sf(critical, degrees, d)), 0.8)
        assert caught(truth) < 0.72


def _solve(rate: Callable[[float], float], target: float) -> float:
    """The d in [0, 100] where the increasing `rate` reaches `target`, by bisection."""
    low, high = 0.0, 100.0
    for _ in range(60):
        middle = (low + high) / 2.0
        low, high = (middle, high) if rate(middle) < target else (low, middle)
    return high


def test_power_benchmark_draws_gold_sets_with_their_builds_rows(tmp_path: Path) -> None:
    """`scripts/bench_builds_power.py` draws each gate's gold set with replacement: a
    question drawn twice is asked under two ids, each build's run file is cut to the
    same rows under the same ids, and the pool's own files are never written (a link
    left in the gate's folder is replaced, not written through)."""
    import sys

    sys.path.insert(0, str(Path(__file__).parents[1] / "scripts"))
    from bench_builds_power import Sampler

    (tmp_path / "gold").mkdir()
    rows = [
        {"query_id": f"s-{i}", "query": f"question {i}", "tier": "A", "relevant": {f"d{i}": 1}}
        for i in range(4)
    ]
    (tmp_path / "gold" / "synthetic-A.jsonl").write_text(
        "".join(json.dumps(row) + "\n" for row in rows), encoding="utf-8"
    )
    pool = tmp_path / "pool"
    pool.mkdir()
    files = []
    for build in range(2):
        path = pool / f"base-build{build}.jsonl"
        answers = [
            {"query_id": f"s-{i}", "results": [{"doc_id": f"d{i}-{build}"}]} for i in range(4)
        ]
        path.write_text("".join(json.dumps(a) + "\n" for a in answers), encoding="utf-8")
        files.append(path)
    pooled = {path: path.read_text(encoding="utf-8") for path in files}
    (tmp_path / "sel").mkdir()
    (tmp_path / "sel" / "base-build1.jsonl").symlink_to(files[0])

    sampler = Sampler(tmp_path, 40)
    sampler.draw(np.random.default_rng(3), {"base": files})

    gold = [json.loads(line) for line in (tmp_path / "sel" / "gold.jsonl").open()]
    assert len(gold) == 40 and len({row["query_id"] for row in gold}) == 40
    assert len({row["query"] for row in gold}) == 40
    source = [row["relevant"] for row in gold]
    assert len({json.dumps(r) for r in source}) < 40  # drawn with replacement: repeats
    for number in range(1, len(files) + 1):
        cut = [json.loads(line) for line in (tmp_path / "sel" / f"base-build{number}.jsonl").open()]
        assert [a["query_id"] for a in cut] == [row["query_id"] for row in gold]
        for answer, row in zip(cut, gold, strict=True):
            relevant = next(iter(row["relevant"]))
            assert answer["results"] == [{"doc_id": f"{relevant}-{number - 1}"}]
    assert not (tmp_path / "sel" / "base-build1.jsonl").is_symlink()
    assert {path: path.read_text(encoding="utf-8") for path in files} == pooled
