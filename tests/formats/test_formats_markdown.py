"""The Markdown report and PR comment: golden files, escaping, statistics, size limits."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from llm_eval.actions import links_from_env
from llm_eval.formats._markdown_view import report_view
from llm_eval.formats._markup import Links, escape_markdown
from llm_eval.formats.markdown import (
    CHANGES_SHOWN,
    COMMENT_MARKER,
    COMMENT_MAX_CHARS,
    SUMMARY_MAX_BYTES,
    render_comment,
    render_markdown,
)

GOLD = Path(__file__).parent.parent / "gold"
UPDATE = os.environ.get("LLM_EVAL_UPDATE_GOLDEN") == "1"
ZWJ = "\u200d"


def load(name: str) -> dict[str, Any]:
    """A fixture report with its volatile fields (commits, times, versions) fixed."""
    report = json.loads((GOLD / "reports" / f"{name}.json").read_text(encoding="utf-8"))
    return scrub(report)


def scrub(report: dict[str, Any]) -> dict[str, Any]:
    report["tool_version"] = "0.0.0"
    report["timings"] = {}
    provenance = report["provenance"]
    provenance["head_commit"] = "c0ffee0" + "0" * 33
    provenance["generated_at"] = "2000-01-02T00:00:00+00:00"
    if provenance["baseline"] is not None:
        provenance["baseline"].update(
            git_commit="ba5e11e" + "0" * 33,
            created_at="2000-01-01T00:00:00+00:00",
            age_days=12.4,
            tool_version="0.0.0",
        )
    return report


def assert_golden(name: str, text: str) -> None:
    """Compare with tests/gold/NAME; LLM_EVAL_UPDATE_GOLDEN=1 rewrites the file instead."""
    path = GOLD / name
    if UPDATE:
        path.write_bytes(text.encode("utf-8"))
    assert path.read_bytes().decode("utf-8") == text


def huge() -> dict[str, Any]:
    """The failure report grown past every limit: long queries, many changes, 700 tags."""
    report = load("failure")
    changes = report["changes"]
    template = changes["hit_to_miss"][0]
    changes["hit_to_miss"] = [
        {**template, "query_id": f"h-{i:03d}", "query": f"query {i} " + "words " * 60}
        for i in range(200)
    ]
    changes["miss_to_hit"] = [
        {**template, "query_id": f"m-{i:03d}", "rank_before": 0, "rank_after": 1}
        for i in range(200)
    ]
    changes["hit_to_miss_count"], changes["miss_to_hit_count"] = 900, 400
    tag = next(s for s in report["slices"] if s["kind"] == "tag")
    report["slices"] += [
        {**tag, "slice": f"tag:t{i:03d}-{'x' * 60}", "name": f"t{i:03d}-{'x' * 60}"}
        for i in range(700)
    ]
    return report


@pytest.mark.parametrize(
    "name",
    [
        "pass",
        "warning",
        "failure",
        "failure_stats",
        "no_baseline",
        "hostile",
        "inconclusive",
        "gold_changed",
        "retriever_failed",
    ],
)
def test_comment_matches_the_golden_file(name: str) -> None:
    assert_golden(f"comment_{name}.md", render_comment(load(name)))


def test_drift_comment_matches_the_golden_file() -> None:
    """A gate failed on its drift alone, with the trend line and the dashboard's link."""
    links = Links(dashboard="https://owner.github.io/repo/")
    assert_golden("comment_drift.md", render_comment(load("drift"), links))


def test_huge_comment_matches_the_golden_file() -> None:
    assert_golden("comment_huge.md", render_comment(huge()))


def test_markdown_report_matches_the_golden_file() -> None:
    assert_golden("report_failure.md", render_markdown(load("failure")))


def test_the_comment_is_the_report_under_the_marker() -> None:
    report = load("failure")
    comment = render_comment(report)
    assert comment.splitlines()[0] == COMMENT_MARKER
    assert comment == f"{COMMENT_MARKER}\n{render_markdown(report)}"
    assert render_markdown(report).startswith("## ❌ Retrieval quality: FAIL")


@pytest.mark.parametrize(
    ("text", "escaped"),
    [
        ("plain words 41.1%", "plain words 41.1%"),
        ("a|b", "a\\|b"),
        ("`code`", "\\`code\\`"),
        ("<script>&", "&lt;script&gt;&amp;"),
        ("*b* _i_ [l] ~s~ $x$", "\\*b\\* \\_i\\_ \\[l\\] \\~s\\~ \\$x\\$"),
        ("back\\slash", "back\\\\slash"),
        ("@octocat", f"@{ZWJ}octocat"),
        ("recall@5 and x@y", "recall@5 and x@y"),  # no mention after a word character
        ("mail a@b.example", f"mail a@{ZWJ}b.example"),  # but an e-mail address links
        ("File#0 and a#b", "File#0 and a#b"),
        ("\u202eevil\u2066 \u200f\u061c", "\\\\u202eevil\\\\u2066 \\\\u200f\\\\u061c"),
        ("esc\x1b[31m bel\x07", "esc\\\\x1b\\[31m bel\\\\x07"),
        ("#1 and owner/repo#2", f"#{ZWJ}1 and owner/repo#{ZWJ}2"),
        ("GH-3 gh-4", f"GH-{ZWJ}3 gh-{ZWJ}4"),
        ("https://x.example www.x.example", f"https:{ZWJ}//x.example www{ZWJ}.x.example"),
        ("one\ntwo\r\nthree\tfour", "one two three four"),
        ("&lt;", "&amp;lt;"),
    ],
)
def test_escape_markdown(text: str, escaped: str) -> None:
    assert escape_markdown(text) == escaped


def test_escape_markdown_clips_long_text_before_escaping() -> None:
    assert escape_markdown("|" * 1000) == "\\|" * 399 + "…"


def test_hostile_text_cannot_ping_link_or_break_a_table() -> None:
    text = render_comment(load("hostile"))
    prose = re.sub(r"(`+).*?\1", "", text)  # nothing in a code span is linked
    assert re.search(f"(?<!\\w)@(?!{ZWJ})", prose) is None
    assert re.search("(?<!\\w)#(?=\\d)", prose) is None
    assert "<script" not in text and "<img" not in text and "<b>" not in text
    assert "https://evil" not in prose
    assert text.count("<!--") == 1  # only the marker
    for table in tables(text):
        widths = {len(unescaped_pipes(row)) for row in table}
        assert len(widths) == 1, table


def tables(text: str) -> list[list[str]]:
    """Consecutive lines that start with `|`."""
    found: list[list[str]] = []
    previous = False
    for line in text.splitlines():
        row = line.startswith("|")
        if row and not previous:
            found.append([])
        if row:
            found[-1].append(line)
        previous = row
    return found


def unescaped_pipes(row: str) -> list[int]:
    """Positions of `|` not preceded by an odd number of backslashes."""
    return [m.start() for m in re.finditer(r"(?<!\\)(?:\\\\)*\|", row)]


def test_statistics_are_shown_in_plain_words() -> None:
    text = render_comment(load("failure_stats"))
    assert "| 90% CI −35.0 to −20.6 pp, p &lt; 0.001 |" in text  # `<` as an entity
    assert "| 90% CI −0.423 to −0.290, p &lt; 0.001 |" in text
    assert "p-values: a betting test of a bounded mean (recall@5, MRR)." in text
    assert "  - ⚠️ MRR: 8 tags missed the limit (data, files, howto, language, lookup," in text
    # a tag's interval at its Holm level; p shown where the tag is beyond the limit
    assert (
        "| text | 33 | 0.545 | 0.159 | −0.386 | −0.642 to −0.110 (97.5%) | p ≤ 0.015 | ⚠️ |" in text
    )
    assert "| network | 26 | 0.421 | 0.019 | −0.401 | −0.621 to −0.155 (90%) |  | too few |" in text
    statistics = text.split("<summary>How sure is this?")[1].split("</details>")[0]
    assert "\nrecall@5 (tier A): with 176 queries, a drop of 15.2 pp is caught 4 times in 5" in (
        statistics
    )
    before = text.split("<summary>How sure is this?")[0]
    for word in ("alpha", "Holm", "power", "regression_max", " pp"):
        assert word not in before


def test_the_interval_is_labelled_at_the_level_the_report_states() -> None:
    report = load("inconclusive")
    report["gates"][0]["stats"]["confidence"] = 0.8  # as a report with alpha 0.1 states
    text = render_comment(report)
    assert "| 80% CI −4.0 to +1.2 pp |" in text  # cannot tell: no side decided, no p


def test_without_statistics_there_is_no_confidence_column() -> None:
    assert "Confidence" not in render_comment(load("failure"))


def test_tags_are_listed_worst_first_by_the_gating_metric() -> None:
    text = render_comment(load("failure"))
    section = text.split("by tag, worst first")[1].split("\n\n")[1]
    deltas = [
        float(row.split("|")[5].strip().replace("−", "-").removesuffix(" pp"))
        for row in section.splitlines()[2:]
    ]
    assert deltas == sorted(deltas)


def test_the_drilldown_is_capped_with_and_n_more() -> None:
    text = render_comment(load("failure"))
    lost = text.split("(hit → miss)</summary>")[1].split("</details>")[0]
    assert lost.count("\n| `") == 25
    assert "…and 23 more." in lost  # 48 counted, 25 shown


def test_the_drilldown_is_shortened_before_the_tag_table() -> None:
    report = load("failure")
    for change in report["changes"]["hit_to_miss"] + report["changes"]["miss_to_hit"]:
        change["query"] = "a|b_c " * 80  # clipped, then every `|` and `_` escaped
        change["tags"] = [f"tag_{i}" for i in range(40)]
        change["relevant"] = [f"doc_{i}#{i}" for i in range(40)]
    report["changes"]["miss_to_hit"] *= 2
    full = render_markdown(report)
    comment = render_comment(report)
    assert len(full) > COMMENT_MAX_CHARS >= len(comment)
    assert "left out to stay under GitHub's size limit." in comment
    tag_rows = lambda text: text.split("by tag, worst first")[1].split("\n\n")[1]  # noqa: E731
    assert tag_rows(comment) == tag_rows(full)


def test_a_huge_report_loses_its_drilldown_then_tags_and_says_so() -> None:
    comment = render_comment(huge())
    assert len(comment) <= COMMENT_MAX_CHARS
    assert "\n| `" not in comment  # no query rows left
    assert comment.count("Not listed, to stay under GitHub's size limit.") == 2
    assert re.search(r"…and \d+ more, left out to stay under GitHub's size limit \(all in", comment)


def test_the_job_summary_stays_under_one_mebibyte() -> None:
    report = huge()
    for i, entry in enumerate(report["slices"]):
        if entry["kind"] == "tag":
            entry["name"] = f"{i:03d}" + "🙂" * 390  # 4 bytes a character
    text = render_markdown(report)
    assert len(text.encode()) <= SUMMARY_MAX_BYTES
    assert "left out to stay under GitHub's size limit" in text


def test_a_report_without_gates_or_changes_still_renders() -> None:
    report = load("no_baseline")
    report["gates"], report["summary"], report["verdict"] = [], [], "pass"
    text = render_markdown(report)
    assert "✅ All gates pass." in text
    assert "crossed" not in text  # no baseline: nothing to compare


def test_importing_the_command_line_loads_neither_jinja2_nor_pygithub() -> None:
    code = "import sys, llm_eval.cli; print(sorted({'jinja2', 'github'} & set(sys.modules)))"
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert done.stdout.strip() == "[]"


@pytest.mark.parametrize(
    ("age_days", "words"),
    [
        (None, "of unknown age"),
        (0.4, "less than a day old"),
        (1.2, "1 day old"),
        (12.4, "12 days old"),
    ],
)
def test_the_footer_gives_the_baseline_age_in_days(age_days: float | None, words: str) -> None:
    report = load("pass")
    report["provenance"]["baseline"]["age_days"] = age_days
    assert f"Baseline: commit ba5e11e, {words} (gold/baseline.json)" in render_markdown(report)


def test_a_tag_the_metric_does_not_score_gets_no_row() -> None:
    report = load("failure")
    metric = report["gates"][0]["metric"]
    empty = {"value": None, "baseline": None, "delta": None, "n": 0}
    report["slices"].append(
        {
            "slice": "tag:only-rejections",
            "kind": "tag",
            "name": "only-rejections",
            "n": 0,
            "n_baseline": 0,
            "metrics": {m: dict(empty) for m in report["metrics"]},
        }
    )
    assert "only-rejections" not in render_markdown(report)
    assert metric in report["metrics"]


INVISIBLE = re.compile("[\u200b-\u200f\u202a-\u202e\u2060-\u2069\u061c\ufeff]")


@pytest.mark.parametrize("name", ["failure", "failure_stats", "hostile", "pass", "warning"])
def test_no_invisible_character_in_any_id_or_metric_name(name: str) -> None:
    report = load(name)
    text = render_comment(report)
    changes = report["changes"]["hit_to_miss"][:CHANGES_SHOWN]
    ids = [c["query_id"] for c in changes] + [d for c in changes for d in c["relevant"]]
    for identifier in ids:
        if not INVISIBLE.search(identifier) and not set("`|") & set(identifier):
            assert f"`{identifier}`" in text
    for label in report["metric_labels"].values():
        assert label in text
    for span in re.findall(r"(`+)(.*?)\1", text):
        assert INVISIBLE.search(span[1]) is None, span


def test_links_lead_to_the_run_the_artifact_and_the_gold_lines(tmp_path: Path) -> None:
    head = "ab" * 20
    event = tmp_path / "event.json"
    event.write_text(json.dumps({"pull_request": {"number": 7, "head": {"sha": head}}}))
    links = links_from_env(
        {
            "GITHUB_SERVER_URL": "https://github.example",
            "GITHUB_REPOSITORY": "acme/rag",
            "GITHUB_RUN_ID": "42",
            "GITHUB_SHA": "cd" * 20,  # the merge commit of a pull_request run
            "GITHUB_EVENT_PATH": str(event),
        }
    )
    text = render_comment(load("failure"), links)
    run = "https://github.example/acme/rag/actions/runs/42"
    assert f"[workflow run]({run})" in text
    assert f"…and 23 more: all are in the [report artifact]({run})." in text
    assert f"This PR: commit {head[:7]}" in text
    assert (
        f"[`a-038`](https://github.example/acme/rag/blob/{head}/gold/python-docs-A.jsonl#L" in text
    )
    # A gate run in a subfolder (the action's working-directory): its gold paths are
    # relative to that folder, the link is from the repository root.
    report = load("failure")
    report["provenance"]["repo_folder"] = "services/search/"
    text = render_comment(report, links)
    assert (
        f"[`a-038`](https://github.example/acme/rag/blob/{head}/services/search/gold/"
        "python-docs-A.jsonl#L"
    ) in text


def test_an_unsafe_url_is_printed_as_text_not_as_a_link() -> None:
    links = Links(run="javascript:alert(1)", artifact="https://x.example/a) [b](c")
    text = render_comment(load("failure"), links)
    assert "](javascript" not in text and "](https://x.example" not in text


def test_outside_github_actions_there_are_no_links() -> None:
    assert links_from_env({}) == Links()


def test_each_id_gets_its_own_marker() -> None:
    report = load("pass")
    assert render_comment(report).startswith(COMMENT_MARKER + "\n")
    with_id = render_comment(report, marker_id="config-b.yaml")
    assert with_id.startswith("<!-- llm-eval:retrieval-gate:config-b.yaml -->\n")
    assert not with_id.startswith(COMMENT_MARKER)  # the plain marker would find it too
    with pytest.raises(ValueError, match="not a comment id"):
        render_comment(report, marker_id="x -->")


def test_a_fingerprint_that_differs_is_said_once() -> None:
    text = render_comment(load("failure"))
    assert text.count("differs from the baseline") == 1


def test_inconclusive_tags_are_not_reported_as_missed() -> None:
    report = load("failure_stats")
    for piece in report["gates"][1]["slices"]:
        piece["status"] = "inconclusive"
    assert "MRR: 8 tags missed the limit" in render_comment(load("failure_stats"))
    assert "tags missed the limit" not in render_comment(report)


def test_the_compiled_template_is_cached_and_renders_the_same(tmp_path: Path) -> None:
    """Jinja's bytecode cache: a second process reads the compiled report template
    instead of compiling it, and renders the same text."""
    code = (
        "import json, sys\n"
        "from llm_eval.formats import markdown\n"
        "report = json.load(open(sys.argv[1]))\n"
        "cache = markdown._environment().bytecode_cache\n"
        "print(json.dumps([cache.directory, markdown.render_markdown(report)]))\n"
    )
    report = tmp_path / "report.json"
    report.write_text(json.dumps(load("failure")), encoding="utf-8")
    env = {**os.environ, "TMPDIR": str(tmp_path)}
    runs = [
        subprocess.run(
            [sys.executable, "-c", code, str(report)],
            env=env,
            capture_output=True,
            text=True,
            check=True,
        )
        for _ in range(2)
    ]
    (folder, first), (_, second) = (json.loads(r.stdout) for r in runs)
    assert first == second == render_markdown(load("failure"))
    assert Path(folder).parent == tmp_path
    assert [p.name.startswith("__jinja2_") for p in Path(folder).iterdir()] == [True]


def test_a_cache_folder_that_cannot_be_used_is_no_error(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    import tempfile

    from llm_eval.formats import markdown

    blocked = tmp_path / "a file"
    blocked.write_text("")
    monkeypatch.setattr(tempfile, "gettempdir", lambda: str(blocked))
    assert markdown._bytecode_cache() is None  # no folder can be made inside a file
    monkeypatch.undo()
    cache = markdown._bytecode_cache()
    assert cache is not None
    cache.directory = str(tmp_path / "gone")  # vanished after start: writes fail quietly
    environment = markdown._environment().overlay(bytecode_cache=cache)
    text = environment.get_template("report.md.j2").render(
        report_view(load("failure"), markdown.NO_LINKS),
        changes_shown=markdown.CHANGES_SHOWN,
        tags_shown=99,
    )
    assert text.startswith("## ❌ Retrieval quality: FAIL")
