"""`llm-eval history` on real git repositories in tmp_path: the demo's own history, a
generated one of 200 baseline refreshes (written with git fast-import, not 200 gate
runs), a shallow clone, a repository of one commit, and bad points."""

from __future__ import annotations

import copy
import functools
import json
import math
import os
import subprocess
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import Any

import pytest
from conftest import REPO, Cli, copy_demo, no_hang

from llm_eval.history.series import (
    SPARK_BARS,
    SPARK_GAP,
    BuildRange,
    Point,
    build_range,
    sparkline,
)

BASELINE = "gold/baseline.json"
T0 = 1_760_000_000  # the generated commits are a day apart from here


DATED = {"GIT_COMMITTER_DATE": f"{T0} +0000", "GIT_AUTHOR_DATE": f"{T0} +0000"}
"""The first commit's time, so that the generated ones come after it."""


def git(
    repo: Path, *args: str, stdin: bytes | None = None, env: Mapping[str, str] | None = None
) -> str:
    done = subprocess.run(
        ["git", "-C", str(repo), *args],
        input=stdin,
        capture_output=True,
        check=True,
        env={**os.environ, **(env or {})},
    )
    return done.stdout.decode()


def init_repo(root: Path) -> Path:
    """The demo project as the first commit of a new repository."""
    copy_demo(root)
    git(root, "init", "-q", "-b", "main")
    git(root, "add", "-A")
    git(root, "-c", "user.name=t", "-c", "user.email=t@x", "commit", "-qm", "demo", env=DATED)
    return root


def fast_import(repo: Path, versions: Sequence[bytes], start: int = 1) -> None:
    """One commit per version of the baseline file on top of main, a day apart."""
    parent = git(repo, "rev-parse", "main").strip()
    chunks = []
    for i, data in enumerate(versions, start):
        message = f"refresh {i}".encode()
        chunks += [
            b"commit refs/heads/main\n",
            f"committer t <t@x> {T0 + i * 86400} +0000\n".encode(),
            f"data {len(message)}\n".encode() + message + b"\n",
        ]
        if i == start:
            chunks.append(f"from {parent}\n".encode())
        chunks.append(f"M 100644 inline {BASELINE}\ndata {len(data)}\n".encode() + data + b"\n")
    git(repo, "fast-import", "--quiet", stdin=b"".join(chunks))
    git(repo, "reset", "-q", "--hard", "main")


@functools.cache
def tier_a() -> tuple[str, ...]:
    lines = (REPO / "gold" / "python-docs-A.jsonl").read_text().splitlines()
    return tuple(json.loads(line)["query_id"] for line in lines if line.strip())


def demo_baseline() -> dict[str, Any]:
    data: dict[str, Any] = json.loads((REPO / BASELINE).read_text())
    return data


@functools.cache
def members(key: str) -> tuple[str, ...]:
    """The ids of the demo's gold queries an aggregate of the baseline (`overall:`,
    `tier:A`, `tag:…`) is the mean over."""
    kind, _, name = key.partition(":")
    found = []
    for file, tier in (("python-docs-A.jsonl", "A"), ("python-docs-B.jsonl", "B")):
        for line in (REPO / "gold" / file).read_text().splitlines():
            if not line.strip():
                continue
            query = json.loads(line)
            if (
                kind == "overall"
                or (kind == "tier" and tier == name)
                or (kind == "tag" and name in query.get("tags", []))
            ):
                found.append(query["query_id"])
    return tuple(found)


def with_misses(base: Mapping[str, Any], misses: int) -> dict[str, Any]:
    """The baseline with recall@5 set to 0 on the first `misses` tier-A queries that
    have a hit, its aggregates of recall@5 (overall, per tier, per tag) recomputed as a
    refresh would: means over the queries scored."""
    data = copy.deepcopy(dict(base))
    hits = [q for q in tier_a() if data["per_query"].get(q, {}).get("recall@5", 0) > 0]
    for query in hits[:misses]:
        data["per_query"][query]["recall@5"] = 0.0
    for key, row in data["aggregates"].items():
        scores = [data["per_query"][q]["recall@5"] for q in members(key) if q in data["per_query"]]
        if scores:
            row["recall@5"] = sum(scores) / len(scores)
    return data


def recall_a(data: Mapping[str, Any]) -> float:
    rows = [data["per_query"][q]["recall@5"] for q in tier_a() if q in data["per_query"]]
    return sum(rows) / len(rows)


def with_builds(base: Mapping[str, Any], misses: Sequence[int]) -> dict[str, Any]:
    """The baseline as a refresh over `len(misses)` builds writes it: build b misses
    `misses[b]` tier-A hits (`with_misses`), `per_query` holds the builds' means and the
    aggregates are recomputed from them."""
    builds = [with_misses(base, m)["per_query"] for m in misses]
    data = copy.deepcopy(dict(base))
    data["per_query"] = {
        q: {metric: sum(b[q][metric] for b in builds) / len(builds) for metric in row}
        for q, row in builds[0].items()
    }
    data = with_misses(data, 0)  # no miss added: the aggregates of the means
    data["builds"] = builds
    return data


Run = Callable[..., tuple[int, str]]


@pytest.fixture
def dashboard(cli: Cli, monkeypatch: pytest.MonkeyPatch) -> Run:
    """`llm-eval dashboard --out site ARGS` in a repository: its exit code and what it
    printed."""

    def run(repo: Path, *args: str) -> tuple[int, str]:
        monkeypatch.chdir(repo)
        code, out, err = cli("dashboard", "--out", "site", *args)
        return code, out + err

    return run


@pytest.fixture
def history(cli: Cli, monkeypatch: pytest.MonkeyPatch) -> Run:
    """`llm-eval history ARGS` in a repository: its exit code and what it printed."""

    def run(repo: Path, *args: str) -> tuple[int, str]:
        monkeypatch.chdir(repo)
        monkeypatch.setenv("COLUMNS", "80")
        code, out, err = cli("history", *args)
        return code, out + err

    return run


def test_a_generated_history_of_200_refreshes_is_read_in_order(
    tmp_path: Path, history: Run, dashboard: Run
) -> None:
    repo = init_repo(tmp_path / "repo")
    base = demo_baseline()
    versions = [with_misses(base, i % 13) for i in range(1, 201)]
    corrupt, other_gold = 150, 190
    blobs = [json.dumps(v, indent=1).encode() for v in versions]
    blobs[corrupt - 1] = b'{"schema_version": 1, "created_at": '
    foreign = copy.deepcopy(versions[other_gold - 1])
    foreign["fingerprints"]["gold"] = "0123456789abcdef"
    blobs[other_gold - 1] = json.dumps(foreign).encode()
    fast_import(repo, blobs)
    assert git(repo, "rev-list", "--count", "main").strip() == "201"

    code, out = history(repo, "--last", "200")
    assert code == 0, out
    assert all(len(line) <= 80 for line in out.splitlines()), out
    rows = [line for line in out.splitlines() if line[:2] == "20"]
    assert len(rows) == 200  # refreshes 1..200, the corrupt and foreign ones included
    log = git(repo, "log", "--format=%h", "--reverse", "-n200", "--", BASELINE).split()
    assert [row.split()[1] for row in rows] == log
    for i, row in zip(range(1, 201), rows, strict=True):
        if i in (corrupt, other_gold):
            assert row.endswith("skipped, listed below"), row
        else:
            assert row.split()[2] == f"{recall_a(versions[i - 1]) * 100:.1f}%", row
    skipped = out.split("Skipped, drawn as")[1]
    assert f"{BASELINE} at {log[corrupt - 1]}: invalid JSON" in skipped
    assert f"baseline at {log[other_gold - 1]}: another gold set" in skipped
    spark = _sparklines(out)[0]
    assert len(spark) == 77 and spark[-1 - (200 - other_gold)] == SPARK_GAP
    assert "the line shows the newest 77" in out

    code, out = dashboard(repo)
    assert code == 0, out
    assert "201 entries (2 skipped, drawn as gaps)" in out
    page = (repo / "site" / "index.html").read_text()
    assert f"#{corrupt + 1} {BASELINE} at {log[corrupt - 1]}: invalid JSON" in page


def _sparklines(out: str) -> list[str]:
    chars = set(SPARK_BARS + SPARK_GAP)
    return [
        line.strip() for line in out.splitlines() if line.strip() and set(line.strip()) <= chars
    ]


def test_the_last_n_points_and_their_sparkline(tmp_path: Path, history: Run) -> None:
    repo = init_repo(tmp_path / "repo")
    base = demo_baseline()
    versions = [with_misses(base, m) for m in (0, 1, 20, 21, 22)]
    fast_import(repo, [json.dumps(v).encode() for v in versions])
    code, out = history(repo, "--last", "4")
    assert code == 0, out
    assert "History of gold/baseline.json: 4 points" in out
    assert _sparklines(out)[0] == sparkline([recall_a(v) for v in versions[1:]], 0.03)
    assert _sparklines(out)[0][0] > _sparklines(out)[0][-1]  # a cliff, not a flat line


def test_a_shallow_clone_says_what_it_could_not_see(tmp_path: Path, history: Run) -> None:
    repo = init_repo(tmp_path / "repo")
    fast_import(repo, [json.dumps(with_misses(demo_baseline(), i)).encode() for i in range(8)])
    clone = tmp_path / "clone"
    subprocess.run(["git", "clone", "-q", "--depth", "3", f"file://{repo}", str(clone)], check=True)
    code, out = history(clone, "--last", "20")
    assert code == 0, out
    assert "History of gold/baseline.json: 3 points" in out
    assert "This clone is shallow" in out
    code, out = history(clone, "--last", "2")  # everything asked for was seen
    assert code == 0 and "shallow" not in out


def test_a_repository_of_one_commit(tmp_path: Path, history: Run) -> None:
    repo = init_repo(tmp_path / "repo")
    code, out = history(repo)
    assert code == 0, out
    assert "History of gold/baseline.json: 1 point," in out
    assert f"{recall_a(demo_baseline()) * 100:.1f}%" in out
    assert "shallow" not in out and "Skipped" not in out


def test_a_baseline_never_committed(tmp_path: Path, history: Run) -> None:
    repo = copy_demo(tmp_path / "repo")
    git(repo, "init", "-q")
    code, out = history(repo)
    assert code == 0, out
    assert "gold/baseline.json has no committed version yet: nothing to show." in out


def test_outside_a_git_checkout_is_an_input_error(tmp_path: Path, history: Run) -> None:
    repo = copy_demo(tmp_path / "repo")
    code, out = history(repo, "--last", "3")
    assert code == 3
    assert out.strip().endswith(
        "gold/baseline.json: not in a git checkout: the history is read from git"
    )


def test_kept_reports_join_the_timeline_and_a_corrupt_line_is_listed(
    tmp_path: Path, history: Run
) -> None:
    repo = init_repo(tmp_path / "repo")
    fast_import(repo, [json.dumps(with_misses(demo_baseline(), 4)).encode()])
    report = json.loads((REPO / "tests/gold/reports/pass.json").read_text())
    report["provenance"]["head_commit"] = "f" * 40
    report["provenance"]["generated_at"] = "2026-01-05T10:00:00+00:00"
    value = next(g["value"] for g in report["gates"] if g["name"] == "retrieval_recall_at_5")
    kept = repo / "history.jsonl"
    kept.write_text(json.dumps(report) + "\n{not json\n" + json.dumps({"gates": []}) + "\n")
    code, out = history(repo, "--history-file", kept.name)
    assert code == 0, out
    row = next(line for line in out.splitlines() if "fffffff" in line)
    assert row.split()[2] == f"{value * 100:.1f}%" and row.endswith("(kept report)")
    assert "history.jsonl:2: invalid JSON: Expecting property name" in out
    assert "history.jsonl:3: changes: missing required key" in out
    assert out.index("2025-") < out.index("2026-01-05")  # in time order


@pytest.mark.parametrize(
    ("values", "span", "line"),
    [
        ([0.5, 0.5, 0.5], 0.03, "▅▅▅"),
        ([0.50, 0.51, 0.52], 0.2, "▄▅▅"),  # moves far below the limit stay low
        ([0.50, 0.51, 0.52], 0.0, "▁▅█"),
        ([0.5, 0.4, 0.3], 0.0, "█▅▁"),
        ([0.5, None, 0.3], 0.0, "█·▁"),
        ([None, None], 0.0, "··"),
        ([0.2], 0.0, "▅"),
    ],
)
def test_sparkline(values: list[float | None], span: float, line: str) -> None:
    assert sparkline(values, span) == line


def _git_calls(trace: Path) -> list[str]:
    """The git commands a run started, from GIT_TRACE's log (emptied after reading)."""
    calls = [
        line.split("trace: built-in: git ", 1)[1]
        for line in trace.read_text().splitlines()
        if "trace: built-in: git " in line
    ]
    trace.write_text("")
    return calls


def test_points_are_kept_so_a_second_read_parses_no_old_baseline(
    tmp_path: Path, history: Run, monkeypatch: pytest.MonkeyPatch
) -> None:
    repo = init_repo(tmp_path / "repo")
    base = demo_baseline()
    versions = [with_misses(base, m) for m in (1, 2, 3, 4, 5)]
    blobs = [json.dumps(v).encode() for v in versions]
    blobs[2] = b'{"schema_version": 1, "created_at": '  # corrupt: skipped, and kept so
    fast_import(repo, blobs)
    # The file moves (git log --follow still finds its versions under the old name).
    (repo / "gold" / "kept").mkdir()
    git(repo, "mv", BASELINE, "gold/kept/baseline.json")
    config = repo / "config" / "llm-eval.yaml"
    config.write_text(config.read_text().replace(BASELINE, "gold/kept/baseline.json"))
    git(repo, "-c", "user.name=t", "-c", "user.email=t@x", "commit", "-qam", "move it")
    trace = tmp_path / "git-trace.log"
    monkeypatch.setenv("GIT_TRACE", str(trace))

    code, cold = history(repo, "--last", "20")
    assert code == 0, cold
    assert "History of gold/kept/baseline.json: 7 points" in cold
    rows = [line for line in cold.splitlines() if line[:2] == "20"]
    assert [row.split()[2] for row in rows if "skipped" not in row] == [
        f"{recall_a(v) * 100:.1f}%" for v in (base, *versions[:2], *versions[3:], versions[4])
    ]
    assert "invalid JSON" in cold.split("Skipped, drawn as")[1]
    assert sum(call.startswith("cat-file --batch") for call in _git_calls(trace)) == 1
    kept = list((repo / ".llm-eval" / "cache" / "history").glob("points-*.json"))
    assert len(kept) == 1

    code, warm = history(repo, "--last", "20")
    assert (code, warm) == (0, cold)
    calls = _git_calls(trace)
    assert not [call for call in calls if call.startswith(("cat-file", "show"))], calls

    # A cache that does not read as written is read around, and written again.
    kept[0].write_text('{"points": {"' + "0" * 40 + '": {"gold": 1}}}')
    code, again = history(repo, "--last", "20")
    assert (code, again) == (0, cold)
    assert sum(call.startswith("cat-file --batch") for call in _git_calls(trace)) == 1
    assert json.loads(kept[0].read_text())["points"].keys() >= {
        git(repo, "rev-parse", f"main~1:{BASELINE}").strip()
    }

    # Other gates (another scope) are other values: kept apart, read afresh.
    criteria = repo / "config" / "ship-criteria.yaml"
    criteria.write_text(criteria.read_text().replace("tier: A", "tier: B", 1))
    code, other = history(repo, "--last", "20")
    assert code == 0, other
    assert len(list(kept[0].parent.glob("points-*.json"))) == 2
    assert sum(call.startswith("cat-file --batch") for call in _git_calls(trace)) == 1


def test_a_committed_baseline_that_is_not_utf8_is_skipped_with_its_reason(
    tmp_path: Path, history: Run
) -> None:
    repo = init_repo(tmp_path / "repo")
    fast_import(repo, [b'{"schema_version": "\xff"}', json.dumps(demo_baseline()).encode()])
    code, out = history(repo, "--last", "5")
    assert code == 0, out
    log = git(repo, "log", "--format=%h", "-n3", "--", BASELINE).split()
    assert f"{BASELINE} at {log[1]}: corrupt baseline: not UTF-8 text" in out


WRITERS, ROUNDS = 8, 20


def _record_rounds(writer: int, folder: str, barrier: Any, answers: Any) -> None:
    """One writer process: in each round, wait for the others at the barrier, then keep
    its own report (a commit id of its own) and say what `--record` printed."""
    from llm_eval.commands.history import record_report

    report = json.loads((REPO / "tests/gold/reports/pass.json").read_text())
    path = Path(folder) / f"report-{writer}.json"
    try:
        for round_ in range(ROUNDS):
            report["provenance"]["head_commit"] = f"{writer:02x}{round_:02x}".ljust(40, "0")
            path.write_text(json.dumps(report))
            barrier.wait()
            answers.put((round_, record_report(path, Path(folder) / "history.jsonl")))
    except Exception as exc:  # the test names it; the other writers stop at the barrier
        barrier.abort()
        answers.put((-1, repr(exc)))


@pytest.mark.skipif(os.name != "posix", reason="the lock is fcntl's")
def test_eight_writers_at_once_keep_every_report_and_count_them_right(tmp_path: Path) -> None:
    import multiprocessing
    import queue

    context = multiprocessing.get_context("fork")
    # The timeout only stops a broken run from hanging; a sound one never meets it.
    barrier, answers = context.Barrier(WRITERS, timeout=300), context.Queue()
    writers = [
        context.Process(target=_record_rounds, args=(w, str(tmp_path), barrier, answers))
        for w in range(WRITERS)
    ]
    for process in writers:
        process.start()
    printed: dict[int, list[str]] = {r: [] for r in range(-1, ROUNDS)}
    try:
        for _ in range(WRITERS * ROUNDS):
            round_, message = answers.get(timeout=300)
            printed[round_].append(message)
            if round_ < 0:
                break
    except queue.Empty:
        pass
    for process in writers:
        process.join(timeout=300)
    assert printed[-1] == []
    for round_ in range(ROUNDS):
        counts = sorted(int(m.rsplit("(", 1)[1].split()[0]) for m in printed[round_])
        # Each writer counted the file right after its own line: 8r+1, ..., 8r+8.
        assert counts == list(range(WRITERS * round_ + 1, WRITERS * (round_ + 1) + 1)), round_
    lines = (tmp_path / "history.jsonl").read_text().splitlines()
    commits = sorted(json.loads(line)["provenance"]["head_commit"] for line in lines)
    assert commits == sorted(
        f"{w:02x}{r:02x}".ljust(40, "0") for w in range(WRITERS) for r in range(ROUNDS)
    )


def kept_report(commit: str, date: str) -> dict[str, Any]:
    """tests/gold/reports/pass.json as the report of `commit` made at `date`."""
    report: dict[str, Any] = json.loads((REPO / "tests/gold/reports/pass.json").read_text())
    report["provenance"]["head_commit"] = commit
    report["provenance"]["generated_at"] = date
    return report


def compact(report: Mapping[str, Any]) -> bytes:
    return json.dumps(report, separators=(",", ":")).encode()


def test_a_line_that_is_not_utf8_or_not_a_report_is_a_gap_not_an_error(
    tmp_path: Path, history: Run, dashboard: Run
) -> None:
    repo = init_repo(tmp_path / "repo")
    good = compact(kept_report("a" * 40, "2026-01-05T10:00:00+00:00"))
    surrogate = compact(kept_report("b" * 40, "2026-01-06T10:00:00+00:00"))
    odd = kept_report("d" * 40, "2026-01-09T10:00:00+00:00")
    odd["slices"][2]["metrics"]["mrr\ufeff"] = odd["slices"][2]["metrics"].pop("mrr")
    unknown = compact(odd)
    lines = [
        good + b"\r\n",  # 1: kept, its CRLF ending dropped
        b"\xff\xfe{}\n",  # 2: not UTF-8
        good.replace(b'"schema_version"', b'"schema\x00version"') + b"\n",  # 3: a NUL
        surrogate.replace(b'"tool_version":"', b'"tool_version":"\xed\xa0\x80') + b"\n",  # 4
        surrogate.replace(b'"tool_version":"', b'"tool_version":"\\ud800') + b"\n",  # 5
        b"\r\n",  # 6: blank
        compact(kept_report("<!--<script>", "2026-01-07T10:00:00+00:00")) + b"\r\n",  # 7
        compact(kept_report("c" * 40, "2026-01-08T10:00:00+00:00")) + b"\r\n",  # 8: kept
        unknown + b"\n",  # 9: a slice's metric that is no metric
        good[:300],  # 10: cut short, no newline
    ]
    (repo / "history.jsonl").write_bytes(b"".join(lines))
    notes = [
        "history.jsonl:2: not valid UTF-8 (byte 0xff at column 1)",
        "history.jsonl:3: invalid JSON: Invalid control character at (column 9)",
        "history.jsonl:4: not valid UTF-8 (byte 0xed at column 37)",
        "history.jsonl:5: tool_version: a string holds a lone UTF-16 surrogate (\\ud800-\\udfff "
        "escape), not text",
        "history.jsonl:7: provenance.head_commit: not a commit id (7 to 64 hex digits)",
        "history.jsonl:9: slices[2].metrics: 'mrr\\ufeff' is not a metric llm-eval knows",
        "history.jsonl:10: invalid JSON: Unterminated string starting at (column 297)",
    ]
    code, out = history(repo, "--history-file", "history.jsonl")
    assert code == 0, out
    rows = [line.split() for line in out.splitlines() if line.startswith(("2026", "-  "))]
    assert [row[1] for row in rows] == ["-"] * 7 + ["aaaaaaa", "ccccccc"]
    listed = " ".join(out.split("Skipped, drawn as · above:")[1].split())  # lines wrap at 80
    assert listed == " ".join(notes)
    code, out = dashboard(repo, "--history-file", "history.jsonl")
    assert code == 0, out
    assert out.endswith(" 10 entries (7 skipped, drawn as gaps).\n")
    page = (repo / "site" / "index.html").read_text()
    assert all(note in page for note in notes[:4]), page


@pytest.fixture
def record(cli: Cli) -> Callable[[Path, Path], tuple[int, str, str]]:
    """`llm-eval history --record REPORT --history-file FILE`: its exit code, stdout
    and stderr."""

    def run(report: Path, kept: Path) -> tuple[int, str, str]:
        return cli("history", "--record", report, "--history-file", kept)

    return run


@pytest.mark.parametrize(
    ("commit", "reason"),
    [
        ("<!--<script>", "not a commit id (7 to 64 hex digits)"),
        ("abcdef", "not a commit id (7 to 64 hex digits)"),
        ("a" * 65, "not a commit id (7 to 64 hex digits)"),
        ("g" * 40, "not a commit id (7 to 64 hex digits)"),
        ("a" * 39 + "\n", "not a commit id (7 to 64 hex digits)"),
        (" " + "a" * 40, "not a commit id (7 to 64 hex digits)"),
        ("\u0661" * 40, "not a commit id (7 to 64 hex digits)"),  # Arabic-Indic digits
        (
            None,
            "the report names no commit: it was not made in a git checkout, and a history "
            "point needs one",
        ),
    ],
)
def test_record_refuses_a_commit_that_is_not_a_commit_id(
    tmp_path: Path, record: Any, commit: str | None, reason: str
) -> None:
    report, kept = tmp_path / "report.json", tmp_path / "history.jsonl"
    report.write_text(json.dumps(kept_report(commit, "2026-01-05T10:00:00+00:00")))  # type: ignore[arg-type]
    kept.write_bytes(b"earlier line\n")
    code, out, err = record(report, kept)
    assert (code, out, err) == (
        3,
        "",
        f"llm-eval: error: {report}: provenance.head_commit: {reason}\n",
    )
    assert kept.read_bytes() == b"earlier line\n"


@pytest.mark.parametrize("commit", ["abcdef1", "A" * 40, "0123456789abcdef" * 4])
def test_record_keeps_the_lines_there_byte_for_byte_and_counts_them(
    tmp_path: Path, record: Any, commit: str
) -> None:
    report, kept = tmp_path / "report.json", tmp_path / "history.jsonl"
    line = compact(kept_report(commit, "2026-01-05T10:00:00+00:00"))
    report.write_bytes(line)
    earlier = b"\xef\xbb\xbfone\r\n\xff\xfe bad\n\n\x00\ncut sho"
    kept.write_bytes(earlier)
    code, out, err = record(report, kept)
    assert (code, err) == (0, "")
    assert out == f"Kept the report of {commit[:12]} in {kept} (5 in all).\n"
    assert kept.read_bytes() == earlier + b"\n" + line + b"\n"
    assert sorted(p.name for p in tmp_path.iterdir()) == [
        ".history.jsonl.lock",  # the writers' lock, kept for the next one
        "history.jsonl",
        "report.json",
    ]


@pytest.mark.skipif(os.name != "posix", reason="the lock is fcntl's")
def test_a_file_system_without_locks_refuses_the_record(
    tmp_path: Path, record: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    import errno
    import fcntl

    def no_locks(fd: int, operation: int) -> None:  # as on a file system without them
        raise OSError(errno.ENOLCK, os.strerror(errno.ENOLCK))

    monkeypatch.setattr(fcntl, "flock", no_locks)
    report, kept = tmp_path / "report.json", tmp_path / "history.jsonl"
    report.write_bytes(compact(kept_report("a" * 40, "2026-01-05T10:00:00+00:00")))
    code, out, err = record(report, kept)
    assert (code, out) == (3, "")
    assert err == (
        f"llm-eval: error: {tmp_path / '.history.jsonl.lock'}: cannot read or write it: "
        f"cannot lock it ({os.strerror(errno.ENOLCK)})\n"
    )
    assert not kept.exists()


@pytest.mark.skipif(os.name != "posix", reason="the lock is fcntl's")
@pytest.mark.parametrize(
    ("make", "reason"),
    [
        (lambda lock: lock.mkdir(), "cannot read or write it: is a folder, expected a file"),
        (
            lambda lock: lock.symlink_to(lock.parent / "gone" / "lock"),
            "is a symbolic link, expected the lock file of history.jsonl",
        ),
        (
            lambda lock: lock.symlink_to(lock.parent / "elsewhere"),
            "is a symbolic link, expected the lock file of history.jsonl",
        ),
        (lambda lock: os.mkfifo(lock), "is a FIFO, expected the lock file of history.jsonl"),
    ],
    ids=["folder", "dangling symlink", "symlink", "fifo"],
)
def test_a_lock_file_that_cannot_be_used_is_named_not_the_history_file(
    tmp_path: Path, record: Any, make: Any, reason: str
) -> None:
    report, kept = tmp_path / "report.json", tmp_path / "history.jsonl"
    report.write_bytes(compact(kept_report("a" * 40, "2026-01-05T10:00:00+00:00")))
    lock = tmp_path / ".history.jsonl.lock"
    make(lock)
    with no_hang():  # a FIFO opened would wait for a writer forever
        code, out, err = record(report, kept)
    assert (code, out) == (3, "")
    assert err == f"llm-eval: error: {lock}: {reason}\n"
    assert not kept.exists() and not (tmp_path / "elsewhere").exists()


@pytest.mark.parametrize(
    ("values", "found"),
    [
        ([], None),
        ([0.5], None),  # one build: no spread
        ([0.5, math.nan], None),
        ([0.5, 0.4, 0.6], BuildRange(3, 0.4, 0.6)),
        ([0.5, math.inf, 0.4], BuildRange(2, 0.4, 0.5)),
        ([0.5, 0.5], BuildRange(2, 0.5, 0.5)),  # builds that agree say so
    ],
)
def test_build_range(values: list[float], found: BuildRange | None) -> None:
    assert build_range(values) == found


def _gate_points(repo: Path, monkeypatch: pytest.MonkeyPatch) -> list[Point]:
    from llm_eval.history.gates import read_gate_history

    monkeypatch.chdir(repo)
    found = read_gate_history(
        config_path=Path("config/llm-eval.yaml"),
        criteria_path=Path("config/ship-criteria.yaml"),
        history_file=Path("history.jsonl") if (repo / "history.jsonl").exists() else None,
    )
    return [e for e in found.history.entries if isinstance(e, Point)]


def test_a_baseline_on_several_builds_gives_each_gate_its_builds_range_and_keeps_it(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Each gate's value of each build, its lowest and highest; a point of one build has
    none; the cache gives the same points back, and a cache of the format before (which
    kept no range) is not read."""
    repo = init_repo(tmp_path / "repo")
    base = demo_baseline()
    several = with_builds(base, (2, 6, 3))
    fast_import(repo, [json.dumps(with_misses(base, 1)).encode(), json.dumps(several).encode()])
    cold = _gate_points(repo, monkeypatch)
    assert [p.subject for p in cold] == ["demo", "refresh 1", "refresh 2"]
    assert cold[0].builds == {} and cold[1].builds == {}
    recall = [recall_a(with_misses(base, m)) for m in (2, 6, 3)]
    spread = cold[2].builds["retrieval_recall_at_5"]
    assert spread.builds == 3
    assert (spread.low, spread.high) == (pytest.approx(min(recall)), pytest.approx(max(recall)))
    assert cold[2].values["retrieval_recall_at_5"] == pytest.approx(sum(recall) / 3)
    mrr = cold[2].builds["retrieval_mrr"]  # the builds agree on MRR: a range of none
    assert (mrr.builds, mrr.low) == (3, mrr.high)

    kept = next((repo / ".llm-eval" / "cache" / "history").glob("points-*.json"))
    assert _gate_points(repo, monkeypatch) == cold  # read back from the cache
    # A cache written before ranges were kept holds the same points without them: it
    # is not read (it would say "one build"), its name being of the format before.
    from llm_eval.history import series_io
    from llm_eval.history.gates import gate_values
    from llm_eval.pipeline import load_inputs

    inputs = load_inputs(Path("config/llm-eval.yaml"), Path("config/ship-criteria.yaml"))
    points = json.loads(kept.read_text())["points"]
    for point in points.values():
        point.pop("builds", None)
    kept.unlink()
    with monkeypatch.context() as before:
        before.setattr(series_io, "_POINT_FORMAT", 2)
        gate_values(inputs).cache(inputs).path.write_text(json.dumps({"points": points}))
    assert _gate_points(repo, monkeypatch) == cold
    assert kept.exists()  # read afresh, and kept under the format's own name


def test_a_kept_report_on_several_builds_gives_its_builds_range(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The run's builds' values of each gate (`stats.builds.values`); a report of one
    build, or one written before they were kept, has none."""
    repo = init_repo(tmp_path / "repo")
    report = json.loads((REPO / "tests/gold/reports/pass.json").read_text())
    report["provenance"]["head_commit"] = "f" * 40
    recall = next(g for g in report["gates"] if g["name"] == "retrieval_recall_at_5")
    older = json.loads(json.dumps(report))
    recall["stats"]["builds"] = {"before": 3, "after": 3, "sd": 0.01, "values": [0.40, 0.43, 0.41]}
    for gate in older["gates"]:
        if gate["name"] == "retrieval_recall_at_5":
            gate["stats"]["builds"] = {"before": 3, "after": 3, "sd": 0.01}
    (repo / "history.jsonl").write_text(json.dumps(report) + "\n" + json.dumps(older) + "\n")
    points = [p for p in _gate_points(repo, monkeypatch) if p.source == "report"]
    assert [p.builds for p in points] == [
        {"retrieval_recall_at_5": BuildRange(3, 0.40, 0.43)},
        {},
    ]
