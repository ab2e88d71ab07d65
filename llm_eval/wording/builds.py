"""What building the retriever again changed, in words (`baseline refresh`, and the
report's notes about gates measured over several builds)."""

from __future__ import annotations

from collections.abc import Sequence

from llm_eval.builds import BuildNoise, GateMove
from llm_eval.gate import GateResult
from llm_eval.wording.english import plural
from llm_eval.wording.gates import drop_size, subject


def noise_sentence(noise: BuildNoise, advised: int = 3) -> str:
    """`Two builds of this retriever differ in 99% of top-5 lists …; recall@5 (tier A)
    moved 2.1 pp between them, more than half of the 3.0 pp limit: set …`."""
    count = "Two builds" if noise.builds == 2 else f"{noise.builds} builds"
    if noise.alike:
        return (
            f"{count} of this retriever answered every query alike: it looks deterministic. "
            "Set `builds: 1` under `retriever:` to skip this check."
        )
    share = noise.differing / noise.compared if noise.compared else 0.0
    lists = (
        f"{count} of this retriever differ in {share:.0%} of top-{noise.k} lists "
        f"({noise.differing} of {plural(noise.compared, 'query', 'queries')})"
    )
    if not noise.moves:
        return f"{lists}."
    between = "between them" if noise.builds == 2 else "between the furthest two"
    first, *rest = (
        f"{drop_size(m.gate.metric, m.widest)} (the limit is {drop_size(m.gate.metric, m.limit)})"
        for m in noise.moves
    )
    said = f"{lists}; {_name(noise.moves[0])} moved {first} {between}"
    said += "".join(f", {_name(m)} {move}" for m, move in zip(noise.moves[1:], rest, strict=True))
    loud = [m for m in noise.moves if m.limit > 0 and m.widest > m.limit / 2]
    if not loud:
        return f"{said}."
    builds = max(advised, noise.builds + 1)
    return (
        f"{said}. {_name(loud[0])} moved more than half its limit: set `builds: {builds}` "
        f"under `retriever:` (or pass --builds {builds}), so that the gate's test holds the "
        "spread between builds, or pin the index's seed."
    )


def _name(move: GateMove) -> str:
    """`recall@5 (tier A)`."""
    return subject(move.gate.metric, move.gate.scope.label())


def builds_notes(results: Sequence[GateResult]) -> list[str]:
    """In plain words, how far a rebuild alone moved each gate measured over several
    builds: the spread the verdict allows for."""
    notes = []
    for result in results:
        margin = result.margin
        if margin is None or margin.builds == (1, 1):
            continue
        before, after = margin.builds
        counts = (
            f"{before} builds on each side of the comparison"
            if before == after
            else f"{before} builds for the baseline, {after} now"
        )
        name = subject(result.gate.metric, result.gate.scope.label())
        notes.append(
            f"This retriever answers a little differently each time it is built: with "
            f"nothing else changed, a rebuild moved {name} by about "
            f"±{drop_size(result.gate.metric, margin.build_sd)} ({counts}). The verdict "
            "counts that as noise, not as a change."
        )
    return notes
