"""Sentences about a whole report that more than one format prints."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from llm_eval.metrics import parse_metric
from llm_eval.wording.english import listed, plural
from llm_eval.wording.gates import corrected_phrase, value


def headline(report: Mapping[str, Any]) -> str:
    """One line: the verdict and why, counting gates by severity and status."""
    gates = report["gates"]

    def count(severity: str, *statuses: str) -> int:
        return sum(1 for g in gates if g["severity"] == severity and g["status"] in statuses)

    blocked = [
        plural(count("error", "fail"), "blocking gate", "blocking gates") + " failed",
        plural(
            sum(1 for g in gates if g.get("blocking") and g["status"] == "inconclusive"),
            "blocking gate",
            "blocking gates",
        )
        + " cannot tell",
    ]
    reported = [
        plural(
            sum(1 for g in gates if not g.get("blocking") and g["status"] == "inconclusive"),
            "gate",
            "gates",
        )
        + " cannot tell (not blocking)",
        plural(count("warning", "warn"), "warning gate", "warning gates")
        + " not met (not blocking)",
    ]
    blocked = [part for part in blocked if not part.startswith("0 ")]
    reported = [part for part in reported if not part.startswith("0 ")]
    verdict = report["verdict"]
    if verdict == "gold_changed":
        return "GOLD SET CHANGED: not compared with the baseline (see below)"
    if verdict == "retriever_failed":
        return f"RETRIEVER FAILED: {failed_share(report)}; no gate was measured"
    if report["exit_code"] == 1 or verdict == "fail":
        return "FAIL: " + ", ".join(blocked + reported) + _settled_by(gates)
    if verdict == "inconclusive":
        return "CANNOT TELL: " + ", ".join(reported) + _settled_by(gates)
    if verdict == "warn":
        return "WARNING: " + ", ".join(reported)
    if gates and all(g.get("reason") == "unchanged" for g in gates):
        return "PASS: no query's score changed since the baseline"
    if len(gates) == 1:
        return "PASS: the gate passes"
    if len(gates) == 2:
        return "PASS: both gates pass"
    return f"PASS: all {len(gates):,} gates pass"


def failed_share(report: Mapping[str, Any]) -> str:
    """`on 29 of 29 queries (100% > max_error_rate 0%)`, from the report's
    `retriever_failure`; `on more queries than max_error_rate allows` without it."""
    failure = report.get("retriever_failure")
    if not failure:
        return "on more queries than max_error_rate allows"
    shown = f"{failure['share'] * 100:.1f}".removesuffix(".0")
    return (
        f"on {failure['failed']} of {plural(failure['queries'], 'query', 'queries')} "
        f"({shown}% > max_error_rate {failure['max_error_rate'] * 100:g}%)"
    )


def failure_lines(report: Mapping[str, Any]) -> list[str]:
    """The retriever's failures by reason, then its first distinct causes, a line each
    (`29 of 29 queries: malformed result: hits[].doc_id missing …`); the error line
    when the report has no summary of them."""
    failure = report.get("retriever_failure")
    if not failure:
        return list(report["summary"])
    reasons = ", ".join(f"{n} {reason}" for reason, n in failure["by_reason"].items())
    lines = [f"Failed queries by reason: {reasons}."]
    total = plural(failure["queries"], "query", "queries")
    lines += [f"{c['count']} of {total}: {c['cause']}" for c in failure["causes"]]
    others = failure.get("other_causes") or 0
    if others:
        lines.append(f"…and {plural(others, 'other cause', 'other causes')} (report.json).")
    return lines


def unchanged(stats: Mapping[str, Any]) -> bool:
    """No query's score changed in the test's scope: there is no interval and no p-value
    to show (reports written before `unchanged` was recorded: `changed` is 0)."""
    return bool(stats.get("unchanged") or stats.get("changed") == 0)


def _settled_by(gates: Sequence[Mapping[str, Any]]) -> str:
    """`; about 336 more queries would settle it (llm-eval gold plan)` when every gate
    that cannot tell cannot for want of queries (its record's `more_queries`)."""
    unsure = [g for g in gates if g["status"] == "inconclusive"]
    more = [g.get("more_queries") for g in unsure]
    if not unsure or any(m is None for m in more):
        return ""
    most = max(int(m) for m in more if m is not None)
    return (
        f"; about {most:,} more {'query' if most == 1 else 'queries'} would settle "
        f"{'it' if len(unsure) == 1 else 'them'} (llm-eval gold plan)"
    )


def deciding_p(decision: str | None, stats: Mapping[str, Any]) -> float | None:
    """The p-value of the one-sided test that decided the regression check: against
    "within the limit" when it failed, against "beyond it" when it passed; none when
    the data could not tell, or no query changed."""
    if unchanged(stats):
        return None
    if decision == "fail":
        return stats.get("p_value")
    if decision == "pass":
        return stats.get("p_within")
    return None


def missing_lines(report: Mapping[str, Any]) -> list[str]:
    """A line when gold queries are missing from the run (they are scored 0)."""
    missing = report["queries"]["missing_from_run"]
    if not missing:
        return []
    return [
        f"{plural(len(missing), 'gold query is', 'gold queries are')} missing from the run "
        "and scored 0."
    ]


def detail_lines(report: Mapping[str, Any]) -> list[str]:
    """A line each for ambiguous page matches, confident answers to rejection queries and
    stale or conflicting context, when there are any."""
    lines = []
    ambiguous = (report.get("matching") or {}).get("ambiguous_count", 0)
    if ambiguous:
        lines.append(
            f"{plural(ambiguous, 'result is', 'results are')} within the page tolerance of two "
            "or more gold references (listed in report.json)."
        )
    rejections = report.get("rejections")
    if (
        rejections
        and rejections["not_rejected_count"]
        and any(parse_metric(m).kind == "rejection" for m in report["metrics"])
    ):
        lines.append(
            f"{rejections['not_rejected_count']} of "
            f"{plural(rejections['queries'], 'rejection query', 'rejection queries')} got "
            "confident results."
        )
    context = report.get("context")
    if context and (context["stale_hits_count"] or context["conflicts_count"]):
        within = f"the top {context['k']}" if context["k"] is not None else "the results"
        stale = plural(context["stale_hits_count"], "stale document", "stale documents")
        conflicts = plural(context["conflicts_count"], "conflict", "conflicts")
        lines.append(f"In {within}: {stale} and {conflicts} (listed in report.json).")
    return lines


def coverage_lines(report: Mapping[str, Any]) -> list[str]:
    """judged@k beside each gate whose value moved; a warning where it fell."""
    lines = []
    for gate in report["gates"]:
        coverage = gate.get("label_coverage")
        if coverage:
            lines.append(f"{'Warning: ' if coverage['fell'] else ''}{coverage['sentence']}.")
    return lines


def judge_lines(report: Mapping[str, Any]) -> list[str]:
    """How far the judge agrees with the gold labels, then what it cost: printed before
    any judged number, so that a reader knows how far to trust those."""
    judge = report.get("judge")
    if not judge:
        return []
    lines = []
    calibration = judge["calibration"]
    if calibration is None:
        lines.append(
            f"Judge {judge['model']}: no labelled chunk to check it against, so its verdicts "
            "are not calibrated."
        )
    else:
        lines.append(
            f"The judge ({judge['model']}) agrees with your labels on "
            f"{calibration['agreement'] * 100:.0f}% of {calibration['chunks']:,} chunks: "
            f"{_strength(calibration['kappa'])}."
        )
        kappa = "n/a" if calibration["kappa"] is None else f"{calibration['kappa']:.2f}"
        lines.append(
            f"  (Cohen's kappa {kappa}; {_share(calibration['precision'])} of the chunks it "
            f"calls useful are labelled relevant; it calls useful "
            f"{_share(calibration['recall'])} of the relevant ones.)"
        )
    tokens = judge["prompt_tokens"] + judge["completion_tokens"]
    unscored = judge["unscored_count"]
    left = (
        f"; {plural(unscored, 'query', 'queries')} unscored (see report.json)" if unscored else ""
    )
    lines.append(
        f"Judge cost: {judge['calls']:,} calls made, {judge['cached']:,} answered from the "
        f"cache, {judge['failed']:,} failed; {tokens:,} tokens, costing {judge['cost']:.4f} "
        f"in the currency of the configured prices{left}."
    )
    lines += _answer_lines(judge)
    if judge.get("repeats", 1) > 1:
        spread = ", ".join(
            f"{parse_metric(m).label} {value(m, v)}" for m, v in judge["spread"].items()
        )
        flips = plural(judge["flips_count"], "chunk verdict", "chunk verdicts")
        lines.append(
            f"Judge steadiness over {judge['repeats']} repeats: mean range {spread}; {flips} "
            "changed between repeats (listed in report.json)."
        )
    overall = next((s for s in report["slices"] if s["kind"] == "overall"), None)
    judged = [m for m in report["metrics"] if parse_metric(m).kind == "judged"]
    if overall is not None and judged:
        values = ", ".join(
            f"{parse_metric(m).label} {value(m, overall['metrics'][m]['value'])}"
            for m in judged
            if m in overall["metrics"]
        )
        lines.append(f"Judged (advisory), all queries: {values}.")
    lines += corrected_lines(judge)
    return lines


def corrected_lines(judge: Mapping[str, Any]) -> list[str]:
    """The judged values corrected by the human labels, and which ones the labels
    cannot correct."""
    lines = []
    for entry in judge.get("corrected", []):
        phrase = corrected_phrase(
            entry["metric"],
            entry["value"],
            entry["ci_low"],
            entry["ci_high"],
            entry["confidence"],
            entry["judge"],
        )
        queries = plural(entry["labelled"], "labelled query", "labelled queries")
        lines.append(f"Corrected by your labels ({queries}): {phrase}.")
    uncorrected = judge.get("uncorrected", [])
    if judge.get("corrected") and uncorrected:
        names = listed([parse_metric(m).label for m in uncorrected])
        lines.append(f"  Not corrected, as no gold label measures them: {names}.")
    return lines


def _answer_lines(judge: Mapping[str, Any]) -> list[str]:
    """The share of unreadable answers per prompt, and vectors the client pooled."""
    lines = []
    answers = judge.get("answers") or {}
    if answers:
        shares = ", ".join(
            f"{name.replace('_', ' ')} {_share(a['unreadable_share'])} of {a['answers']:,}"
            for name, a in answers.items()
        )
        lines.append(f"Unreadable judge answers (failures, never scores): {shares}.")
    pooled = (judge.get("embeddings") or {}).get("pooled", 0)
    if pooled:
        lines.append(
            f"The embeddings endpoint answered one vector per token for "
            f"{plural(pooled, 'text', 'texts')}; each was mean-pooled into one vector."
        )
    return lines


def _strength(kappa: float | None) -> str:
    """Cohen's kappa in words (bands of Landis & Koch 1977, merged to three)."""
    if kappa is None or kappa < 0.4:
        return "weak agreement, treat judged numbers as rough"
    if kappa < 0.6:
        return "moderate agreement, judged numbers show direction more than size"
    return "strong agreement"


def _share(value: float | None) -> str:
    return "n/a" if value is None else f"{value * 100:.0f}%"
