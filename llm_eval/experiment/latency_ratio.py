"""Two retrievers' latencies compared query by query, with an interval (pure).

    ratio = paired_ratio(variant_ms, reference_ms, 0.95, alpha=0.05, seed=0)
    ratio_words(ratio, "lucene")   # "1.4–1.9× slower than `lucene` at p95"

The two arrays hold each query's latency under each retriever, in the same query order
(an experiment asks them in turns, query by query, so the load of the moment falls on
both). The statistic is the ratio of their q-quantiles (p50, p95); its interval is a
percentile bootstrap that resamples queries, the same queries for both (paired), with
a fixed seed, so one run gives one answer. The ratio is "tied", said "as fast as", only
when its interval covers 1; otherwise it reads "x–y× slower" or "x–y× faster" with the
interval's ends.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import numpy.typing as npt

RESAMPLES = 2000
"""Bootstrap resamples: the interval's ends move by about a percent between seeds."""


@dataclass(frozen=True, slots=True)
class Ratio:
    """A quantile of one retriever's latency as a multiple of another's, with its interval."""

    quantile: float
    """0.5 for p50, 0.95 for p95."""
    ratio: float
    """The variant's quantile over the base's, on the paired queries."""
    low: float
    high: float
    """The 1 − alpha bootstrap interval of the ratio."""
    n: int
    """Queries with a latency under both."""

    @property
    def tied(self) -> bool:
        """The interval covers 1: no difference beyond the noise."""
        return self.low <= 1.0 <= self.high

    @property
    def faster(self) -> bool:
        """The variant is faster beyond the noise."""
        return self.high < 1.0

    @property
    def label(self) -> str:
        """`p95`, `p50`."""
        return f"p{self.quantile * 100:g}"


def paired_ratio(
    variant: npt.ArrayLike,
    base: npt.ArrayLike,
    quantile: float,
    *,
    alpha: float = 0.05,
    seed: int = 0,
    resamples: int = RESAMPLES,
) -> Ratio | None:
    """The ratio of the two quantiles and its paired percentile-bootstrap interval;
    None with fewer than two paired queries or a base quantile of zero. Quantiles are
    numpy's linear interpolation, as the latency_p50/p95 metrics."""
    a = np.asarray(variant, dtype=np.float64)
    b = np.asarray(base, dtype=np.float64)
    if a.shape != b.shape or a.ndim != 1:
        raise ValueError(f"needs two latency arrays of one length, got {a.shape} and {b.shape}")
    if not 0.0 < quantile < 1.0 or not 0.0 < alpha < 1.0:
        raise ValueError(f"needs 0 < quantile < 1 and 0 < alpha < 1, got {quantile}, {alpha}")
    if a.size < 2:
        return None
    draws = Draws(a.size, quantile, seed, resamples)
    return draws.ratio(a, b, draws.of(a), draws.of(b), alpha)


@dataclass(frozen=True, slots=True)
class Draws:
    """The bootstrap's resamples of `n` paired queries: the same for every array of that
    length, so that an array's resampled quantiles, computed once, serve every pair it
    is in (an experiment's front pairs each variant with every other of its group)."""

    n: int
    quantile: float
    seed: int = 0
    resamples: int = RESAMPLES

    def of(self, latencies: npt.NDArray[np.float64]) -> npt.NDArray[np.float64]:
        """The quantile of each resample of `latencies` (n of them)."""
        picks = np.random.default_rng(self.seed).integers(0, self.n, size=(self.resamples, self.n))
        found: npt.NDArray[np.float64] = np.percentile(
            latencies[picks], self.quantile * 100, axis=1
        )
        return found

    def ratio(
        self,
        a: npt.NDArray[np.float64],
        b: npt.NDArray[np.float64],
        tops: npt.NDArray[np.float64],
        bottoms: npt.NDArray[np.float64],
        alpha: float,
    ) -> Ratio | None:
        """`paired_ratio` of `a` over `b` from their resampled quantiles (`of`)."""
        point_base = float(np.percentile(b, self.quantile * 100))
        if point_base <= 0.0:
            return None
        with np.errstate(divide="ignore", invalid="ignore"):
            ratios = np.where(bottoms > 0, tops / np.where(bottoms > 0, bottoms, 1.0), np.inf)
        low, high = np.quantile(ratios, [alpha / 2, 1 - alpha / 2])
        point = float(np.percentile(a, self.quantile * 100)) / point_base
        return Ratio(self.quantile, point, float(low), float(high), self.n)


def times(number: float, *others: float) -> str:
    """A multiple, with as many decimals as the largest of it and `others` calls for:
    two below 10 (where 1.04 and 1.09 differ), one below 100, none above."""
    largest = max([number, *others])
    if largest < 10:
        return f"{number:.2f}"
    return f"{number:.1f}" if largest < 100 else f"{number:.0f}"


def _span(low: float, high: float) -> str:
    """`1.34–14.40`: both ends with the decimals of the larger; an end just above 1
    with three (`1.004`), so that a difference is never written as `1.00`."""
    start = times(low, high)
    if start in ("1.00", "1.0", "1") and low > 1.0:
        start = f"{low:.3f}"
    return f"{start}–{times(high, low)}"


def ratio_words(ratio: Ratio | None, base: str, clock: str = "wall") -> str:
    """`as fast as `base` at p95 (0.91–1.08×)`, `1.42–1.87× slower than `base` at p95`,
    `2.10–2.60× faster than `base` at p95`; the ratio unknown without one. On the `cpu`
    clock, `at p95 CPU time`."""
    if ratio is None:
        return f"at a latency that cannot be compared with `{base}`'s"
    at = f"{ratio.label} CPU time" if clock == "cpu" else ratio.label
    if ratio.tied:
        return f"as fast as `{base}` at {at} within noise ({_span(ratio.low, ratio.high)}×)"
    if ratio.faster:
        return f"{_span(1 / ratio.high, 1 / ratio.low)}× faster than `{base}` at {at}"
    return f"{_span(ratio.low, ratio.high)}× slower than `{base}` at {at}"


def ratio_cell(ratio: Ratio | None) -> str:
    """`as fast`, `1.42–1.87× slower`, `2.10–2.60× faster` (a table cell)."""
    if ratio is None:
        return "n/a"
    if ratio.tied:
        return "as fast"
    if ratio.faster:
        return f"{_span(1 / ratio.high, 1 / ratio.low)}× faster"
    return f"{_span(ratio.low, ratio.high)}× slower"
