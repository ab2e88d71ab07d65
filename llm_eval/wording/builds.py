"""What building the retriever again changed, in words (`baseline refresh`)."""

from __future__ import annotations

from llm_eval.builds import BuildNoise
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
    worst = max(noise.moves, key=lambda m: m.widest / m.limit if m.limit > 0 else m.widest)
    between = "between them" if noise.builds == 2 else "between the furthest two"
    name = subject(worst.gate.metric, worst.gate.scope.label())
    moved = f"{name} moved {drop_size(worst.gate.metric, worst.widest)} {between}"
    allowed = drop_size(worst.gate.metric, worst.limit)
    if worst.limit > 0 and worst.widest > worst.limit / 2:
        return (
            f"{lists}; {moved}, more than half of the {allowed} limit: set "
            f"`builds: {max(advised, noise.builds + 1)}` under `retriever:` (or pass "
            f"--builds {max(advised, noise.builds + 1)}), so that the gate's test holds "
            "the spread between builds, or pin the index's seed."
        )
    return f"{lists}; {moved}, within half of the {allowed} limit."
