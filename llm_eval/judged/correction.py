"""Judged values corrected by the human labels: prediction-powered inference (pure).

Angelopoulos, Bates, Fannjiang, Jordan & Zrnic (2023), "Prediction-powered inference",
Science 382(6671):669-674. The judge predicts a per-query score Ŷ in [0, 1] on every
judged query; on the n queries a person labelled, the gold labels give the same score Y
(context precision computed from the labels of the same chunks). For the mean θ of Y
over the queries of a scope, with N judged queries that carry no human label:

    θ̂ = mean over the N of Ŷ  +  mean over the n of (Y − Ŷ)     (the rectifier)

The interval is the paper's general construction: a confidence set for the rectifier's
mean at level δ plus one for the predictions' mean at α − δ, here δ = α/2 (a union
bound, so no independence between the two is needed). Each set here is the
finite-sample betting bound of a bounded mean that the gate's statistics use for graded
scores (`betting.Betting`, Waudby-Smith & Ramdas 2024), not the paper's normal
approximation, so the interval is valid at every n from 1 up, for every distribution
in [0, 1]. With N = 0 (every judged query is
labelled) the estimate is the labels' mean and its bound is at α. The guarantee assumes
the labelled queries are like the others (a random sample of them); unlabelled chunks of
a labelled query count as not relevant, as in trec_eval.

`raw` is what the judge alone says: the predictions' mean over all n + N queries with
the same kind of bound, which ignores the judge's error and so can miss θ by its bias.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass

import numpy as np

from llm_eval.betting import Betting


@dataclass(frozen=True, slots=True)
class Bounds:
    """A mean and its one-sided bounds, each at the stated level."""

    mean: float
    low: float
    high: float


@dataclass(frozen=True, slots=True)
class Corrected:
    """One judged metric over one scope: the judge's value and the corrected one."""

    metric: str
    raw: Bounds
    """The judge's mean over every judged query, bounded as if the judge were right."""
    corrected: Bounds
    """The prediction-powered estimate and its interval."""
    labelled: int
    """Judged queries with human labels (n)."""
    unlabelled: int
    """Judged queries without (N)."""
    alpha: float
    """Each bound is one-sided at alpha: [low, high] is a 1 − 2·alpha interval."""


def mean_bounds(values: Sequence[float] | np.ndarray, alpha: float, seed: int = 0) -> Bounds:
    """The mean of scores in [0, 1] with its one-sided alpha bounds (kept in [0, 1],
    where the mean lies)."""
    x = np.asarray(values, dtype=np.float64)
    found = _difference(x, np.zeros_like(x), alpha, seed)
    return Bounds(found.mean, max(0.0, found.low), min(1.0, found.high))


def _difference(y: np.ndarray, y_hat: np.ndarray, alpha: float, seed: int) -> Bounds:
    """mean(y − y_hat) for paired scores in [0, 1], with its one-sided alpha bounds."""
    test = Betting(y - y_hat, alpha, seed, span=1.0)
    mean = float(np.mean(y - y_hat))
    low, high, _, _ = test.bounds(mean, alpha)
    return Bounds(mean, low, high)


def prediction_powered(
    labels: Sequence[float],
    predicted_labelled: Sequence[float],
    predicted_unlabelled: Sequence[float],
    alpha: float,
    seed: int = 0,
) -> Bounds:
    """The prediction-powered mean and its one-sided alpha bounds (module docstring).
    `labels` and `predicted_labelled` are paired; at least one label is needed."""
    y = np.asarray(labels, dtype=np.float64)
    y_hat = np.asarray(predicted_labelled, dtype=np.float64)
    if y.size == 0 or y.shape != y_hat.shape:
        raise ValueError("prediction-powered inference needs paired labels and predictions")
    if len(predicted_unlabelled) == 0:
        return mean_bounds(y, alpha, seed)
    rectifier = _difference(y, y_hat, alpha / 2, seed)
    predicted = mean_bounds(predicted_unlabelled, alpha / 2, seed)
    return Bounds(
        predicted.mean + rectifier.mean,
        max(0.0, predicted.low + rectifier.low),
        min(1.0, predicted.high + rectifier.high),
    )


def correct(
    metric: str,
    predicted: Mapping[str, float],
    labels: Mapping[str, float],
    alpha: float,
    seed: int = 0,
) -> Corrected | None:
    """`metric` over the judged queries `predicted` ({query: judge's value}), corrected
    by `labels` ({query: the labels' value}, any of them); None when no judged query is
    labelled."""
    labelled = [q for q in predicted if q in labels]
    if not labelled:
        return None
    others = [predicted[q] for q in predicted if q not in labels]
    corrected = prediction_powered(
        [labels[q] for q in labelled], [predicted[q] for q in labelled], others, alpha, seed
    )
    raw = mean_bounds(list(predicted.values()), alpha, seed)
    return Corrected(metric, raw, corrected, len(labelled), len(others), alpha)
