"""The ship criteria as records: gates, their scopes and statistics settings.

Pure data, read by the gate logic (`llm_eval.gate`, `llm_eval.against_baseline`) and
built from `config/ship-criteria.yaml` by `llm_eval.config`, which is the only
module that reads YAML.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

from llm_eval.errors import InputError

Severity = Literal["error", "warning"]
"""`error` blocks the merge when the gate fails; `warning` only reports."""


@dataclass(frozen=True, slots=True)
class Location:
    """Where a value was written: file, line, key path."""

    file: str
    line: int
    key: str

    def error(self, reason: str) -> InputError:
        """An InputError pointing here."""
        return InputError(reason, path=self.file, line=self.line, key=self.key)


@dataclass(frozen=True, slots=True)
class Scope:
    """Which queries a gate looks at: a tier, tags (any of them), or all."""

    tier: str | None = None
    tags: tuple[str, ...] = ()

    def label(self) -> str:
        """Short words for reports: `tier A`, `tag howto`, `all queries`."""
        parts = []
        if self.tier is not None:
            parts.append(f"tier {self.tier}")
        if self.tags:
            noun = "tag" if len(self.tags) == 1 else "tags"
            parts.append(f"{noun} {', '.join(self.tags)}")
        return ", ".join(parts) or "all queries"

    def key(self) -> str:
        """A stable key for JSON reports: `all`, `tier=A`, `tier=A;tags=x,y`."""
        parts = []
        if self.tier is not None:
            parts.append(f"tier={self.tier}")
        if self.tags:
            parts.append(f"tags={','.join(self.tags)}")
        return ";".join(parts) or "all"


@dataclass(frozen=True, slots=True)
class Statistics:
    """How regressions are tested against the baseline (`statistics:` in the criteria)."""

    alpha: float = 0.05
    """Error rate of each one-sided test against the limit: a change within the limit
    fails at most this often, and the printed interval has level 1 - 2 alpha."""
    significance: bool = True
    """Off: the point estimate decides; any drop beyond regression_max fails."""
    resamples: int = 400
    """Simulated samples behind the power statement of a graded metric."""
    seed: int = 0
    """Seed of the resampling, so a report is reproducible run to run."""
    min_n: int = 30
    """Any scope (gate or tag slice) with fewer paired queries cannot be judged: its
    regression check is inconclusive."""
    on_inconclusive: Literal["fail", "warn"] | None = None
    """What an inconclusive regression check does: `fail` blocks the merge (on `error`
    gates), `warn` only reports. None: `fail` for an `error` gate whose point estimate
    is beyond the limit, `warn` otherwise."""


@dataclass(frozen=True, slots=True)
class Gate:
    """One ship criterion."""

    name: str
    metric: str
    """Canonical metric name."""
    threshold: float | None
    """Absolute floor: the value may not be below it (a ceiling for lower-is-better
    metrics such as latency)."""
    regression_max: float | None
    """Largest allowed drop below the baseline, in metric units (0.03 = 3 pp); for
    lower-is-better metrics the largest allowed increase (relative when
    `regression_relative`: 0.2 = +20%)."""
    severity: Severity
    scope: Scope
    where: Location
    """The gate's entry in the criteria file."""
    scope_where: Location
    """Its `scope` key (or the entry when it has none)."""
    statistics: Statistics = Statistics()
    regression_relative: bool = False
    per_tag: bool = False
    """Also check the regression limit on each tag slice of the scope."""
    per_tag_tags: tuple[str, ...] = ()
    """The tags to slice by when `per_tag` lists them (empty: every tag in the scope)."""
    drift: Drift | None = None
    """The cumulative limit against a pinned reference baseline (`drift_max`, `since`)."""


@dataclass(frozen=True, slots=True)
class Drift:
    """How far a gate's scope may move from a reference baseline in sum: steps that are
    each within `regression_max` may not add up to more than `limit`."""

    limit: float
    """Largest allowed worsening against the reference, in metric units (`drift_max`)."""
    since: str | int
    """The reference: a git ref or tag, or a number of refreshes of the baseline back
    from the committed one."""
    where: Location
    """The gate's `since` key."""

    def label(self) -> str:
        """`since v1.0`, `since 5 refreshes ago`."""
        if isinstance(self.since, int):
            return f"since {self.since} refresh{'es' if self.since != 1 else ''} ago"
        return f"since {self.since}"


@dataclass(frozen=True, slots=True)
class Criteria:
    """The contents of `config/ship-criteria.yaml`."""

    path: str
    gates: tuple[Gate, ...]
    statistics: Statistics = Statistics()

    def metrics(self) -> tuple[str, ...]:
        """Metrics the gates need, in order."""
        return tuple(dict.fromkeys(g.metric for g in self.gates))
