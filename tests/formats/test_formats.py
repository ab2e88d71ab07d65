"""The output formats: one registry, JUnit XML that CI test tabs read, JSON on stdout."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from conftest import Cli
from hypothesis import given, settings
from hypothesis import strategies as st

from llm_eval import formats
from llm_eval.errors import InputError
from llm_eval.formats import RenderOptions, format_names, get_format, written_formats

REPO = Path(__file__).resolve().parents[2]
REPORTS = Path(__file__).parent.parent / "gold" / "reports"
JUNIT_XSD = Path(__file__).parent.parent / "data" / "junit.xsd"
NAMES = sorted(p.stem for p in REPORTS.glob("*.json"))

xmlschema = pytest.importorskip("xmlschema")
junitparser = pytest.importorskip("junitparser")


def load(name: str) -> dict[str, Any]:
    return json.loads((REPORTS / f"{name}.json").read_text(encoding="utf-8"))


def junit(report: dict[str, Any]) -> str:
    return get_format("junit").render(report, RenderOptions())


def parsed(xml: str, tmp_path: Path) -> Any:
    path = tmp_path / "junit.xml"
    path.write_text(xml, encoding="utf-8")
    return junitparser.JUnitXml.fromfile(str(path))


def test_the_registry_lists_each_format_module() -> None:
    assert format_names() == ("json", "junit", "markdown", "text")
    modules = {p.stem for p in Path(formats.__file__).parent.glob("[!_]*.py")}
    assert set(format_names()) == modules  # a format module left out of the table
    assert {f.filename for f in written_formats()} == {
        "report.json",
        "report.md",
        "report.junit.xml",
    }


def test_an_unknown_format_names_the_valid_ones() -> None:
    with pytest.raises(InputError) as raised:
        get_format("csv")
    assert str(raised.value) == "unknown format 'csv'; valid formats: json, junit, markdown, text"


def test_a_new_format_is_a_module_and_a_line_in_the_table(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    (tmp_path / "verdict.py").write_text(
        "class Verdict:\n"
        "    name = 'verdict'\n"
        "    description = 'the verdict alone'\n"
        "    filename = 'verdict.txt'\n"
        "    def render(self, report, options):\n"
        "        return report['verdict'] + '\\n'\n"
        "FORMAT = Verdict()\n"
    )
    monkeypatch.setattr(formats, "__path__", [*formats.__path__, str(tmp_path)])
    assert "verdict" not in format_names()  # the file alone registers nothing
    monkeypatch.setitem(formats._FORMATS, "verdict", "verdict")
    assert "verdict" in format_names()
    assert get_format("verdict").render(load("warning"), RenderOptions()) == "warn\n"
    assert "verdict.txt" in {f.filename for f in written_formats()}


@pytest.mark.parametrize("name", NAMES)
def test_junit_is_valid_against_the_schema_ci_tabs_read(name: str) -> None:
    xmlschema.XMLSchema(str(JUNIT_XSD)).validate(junit(load(name)))


def test_the_schema_rejects_what_ci_tabs_would_not_read() -> None:
    broken = junit(load("pass")).replace("<testcase ", "<testcase duration='1' ", 1)
    with pytest.raises(xmlschema.XMLSchemaValidationError):
        xmlschema.XMLSchema(str(JUNIT_XSD)).validate(broken)


@pytest.mark.parametrize(
    ("name", "tests", "failures", "errors", "skipped"),
    [
        ("pass", 17, 0, 0, 0),
        ("warning", 13, 0, 0, 11),  # a warning gate reports, it does not turn the tab red
        ("failure", 2, 1, 0, 0),
        # 2 gates and 11 judged tag slices: 8 beyond the limit (warnings), 3 cannot tell
        ("failure_stats", 13, 1, 0, 3),
        ("inconclusive", 13, 0, 0, 11),  # cannot tell, not blocking
        ("gold_changed", 18, 0, 1, 0),
    ],
)
def test_junit_counts_what_blocks_as_failures(
    tmp_path: Path, name: str, tests: int, failures: int, errors: int, skipped: int
) -> None:
    suites = list(parsed(junit(load(name)), tmp_path))
    assert len(suites) == 1
    suite = suites[0]
    assert (suite.tests, suite.failures, suite.errors, suite.skipped) == (
        tests,
        failures,
        errors,
        skipped,
    )
    outcomes = [type(r).__name__ for case in suite for r in case.result]
    assert outcomes.count("Failure") == failures
    assert outcomes.count("Skipped") == skipped


def test_a_failing_gate_case_carries_its_sentence(tmp_path: Path) -> None:
    report = load("failure")
    suite = next(iter(parsed(junit(report), tmp_path)))
    cases = {case.name: case for case in suite}
    failing = cases["retrieval_recall_at_5: recall@5 (tier A)"]
    assert [r.message for r in failing.result] == [report["gates"][0]["sentence"]]
    warned = cases["retrieval_mrr: MRR (all queries)"]
    assert warned.result == []
    assert warned.system_out == f"warning: {report['gates'][1]['sentence']}"


def test_a_blocking_inconclusive_gate_is_a_failure(tmp_path: Path) -> None:
    report = load("inconclusive")
    report["gates"][0]["blocking"] = True
    suite = next(iter(parsed(junit(report), tmp_path)))
    assert (suite.failures, suite.skipped) == (1, 10)


def test_markup_in_names_stays_text(tmp_path: Path) -> None:
    xml = junit(load("hostile"))
    assert "<img" not in xml
    names = [case.name for case in next(iter(parsed(xml, tmp_path)))]
    assert names[0].startswith("recall_<img src=x onerror=alert(1)>")


def test_gate_prints_json_on_stdout_equal_to_report_json(
    shared_demo: Path, monkeypatch: pytest.MonkeyPatch, cli: Cli
) -> None:
    monkeypatch.chdir(shared_demo)
    monkeypatch.delenv("GITHUB_ACTIONS", raising=False)
    code, out, _ = cli("gate", "--format", "json")
    written = json.loads((shared_demo / ".llm-eval" / "report.json").read_text(encoding="utf-8"))
    assert (code, json.loads(out)) == (written["exit_code"], written)


def test_gate_prints_junit_and_writes_it_beside_the_report(
    shared_demo: Path, monkeypatch: pytest.MonkeyPatch, cli: Cli
) -> None:
    monkeypatch.chdir(shared_demo)
    monkeypatch.delenv("GITHUB_ACTIONS", raising=False)
    code, out, _ = cli("gate", "--format", "junit", "--config", "config/examples/degraded.yaml")
    assert code == 1
    written = (shared_demo / ".llm-eval" / "report.junit.xml").read_text(encoding="utf-8")
    assert out == written
    xmlschema.XMLSchema(str(JUNIT_XSD)).validate(out)
    assert 'failures="1"' in out.splitlines()[1]


_TEXT = st.text(max_size=6)  # any code point: quotes, controls, NUL, lone surrogates


@settings(max_examples=200, deadline=None)
@given(
    texts=st.dictionaries(_TEXT, _TEXT, max_size=20),
    size=st.integers(990, 1010),
    odd=st.sampled_from([None, 3, 2.5, True, ["x"], {"y": "z"}]),
    depth=st.integers(0, 3),
    name=st.sampled_from(NAMES),
)
def test_report_json_is_json_dumps_to_the_byte(
    texts: dict[str, str], size: int, odd: Any, depth: int, name: str
) -> None:
    """A large map of text to text (rows of any text, more or fewer than are written
    by join), nested at any depth and in lists, is written as `json.dumps` writes it;
    a map with one value of another kind is left to it."""
    rows = {**{f"q{i}": "id" for i in range(size - len(texts))}, **texts}
    report: dict[str, Any] = load(name)
    nested: Any = dict(rows)
    for level in range(depth):
        nested = [nested, {"k": "v"}] if level % 2 else {"inner": nested, "after": 1}
    report["matching"] = {"matched_by": nested, "other": dict(rows)}
    if odd is not None and rows:
        report["odd"] = {**rows, next(iter(rows)): odd}
    rendered = get_format("json").render(report, RenderOptions())
    assert rendered == json.dumps(report, indent=2, ensure_ascii=False, allow_nan=False) + "\n"


def test_report_json_holding_the_stand_in_text_is_still_json_dumps(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    from llm_eval.formats import json as json_format

    monkeypatch.setattr(json_format, "_token", lambda: "fixed")
    rows = {f"q{i}": "id" for i in range(1000)}
    report = {"a": rows, "b": rows, "text": "fixed-0", "list": ["fixed-1"]}
    rendered = get_format("json").render(report, RenderOptions())
    assert rendered == json.dumps(report, indent=2, ensure_ascii=False, allow_nan=False) + "\n"
    assert json.loads(rendered)["text"] == "fixed-0"
