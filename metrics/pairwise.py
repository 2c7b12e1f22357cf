"""Pairwise comparisons: the probability that one algorithm is safer than another.

rliable's probability of improvement (Agarwal et al., 2021), on a safety metric where lower is
better: for algorithms X and Y and one (task, bound) stratum with X's seeds x_1..x_n and Y's
seeds y_1..y_m,

    P_s(X safer than Y) = (1 / nm) * sum_ij ( [x_i < y_j] + 0.5 [x_i = y_j] )

(the Mann-Whitney U statistic over nm), and P(X safer than Y) is its mean over the strata both
algorithms have. 0.5 means neither is safer; P(X, Y) + P(Y, X) = 1. The 95 % interval comes
from the stratified bootstrap: each algorithm's seeds are resampled inside each stratum, as
for its IQM (one draw of an algorithm's seeds serves all its pairs and metrics).
"""

from __future__ import annotations

import numpy as np
import pandas as pd

from .aggregate import DEFAULT_REPS
from .bootstrap import group_rng, percentile_ci, stratified_draws
from .schema import PHASES, RUN_KEYS, require_columns

SAFETY_METRICS = ("V", "Dnorm", "Dnorm_plus")  # the metrics comparable across tasks and bounds
COLUMNS = ["phase", "algo", "other", "metric", "p", "ci_low", "ci_high", "n_strata"]


def stratum_probability(x: np.ndarray, y: np.ndarray) -> np.ndarray:
    """P(a draw of x is below a draw of y), ties counting half: x (..., n, m), y (..., k, m) with the same
    leading shape -> (..., m).

    By ranks rather than all n*k pairs (Mann-Whitney): with ties given their average rank, y's
    rank sum minus k(k+1)/2 counts the pairs with x < y, ties half. Exact: the sums are halves."""
    from scipy.stats import rankdata  # here: importing scipy.stats costs ~0.5 s (see bootstrap.iqm)

    n, k = x.shape[-2], y.shape[-2]
    ranks = rankdata(np.concatenate([x, y], axis=-2), axis=-2)
    return (ranks[..., n:, :].sum(axis=-2) - k * (k + 1) / 2) / (n * k)


class AlgoRuns:
    """One algorithm's runs in one phase, stratum after stratum, and its resampled runs."""

    def __init__(self, rows: pd.DataFrame, metrics, reps: int, seed: int, algo: str, phase: str):
        counts = rows.groupby(["task", "bound"], sort=False).size()
        self.values = rows[list(metrics)].to_numpy(np.float64)
        sizes = counts.to_numpy()
        starts = np.concatenate([[0], np.cumsum(sizes)[:-1]])
        self.slices = {key: slice(a, a + n) for key, a, n in zip(counts.index, starts, sizes)}
        draws = stratified_draws(sizes, reps, group_rng(seed, "pairwise", algo, phase))
        self.resampled = self.values[draws]  # (reps, n, m)


def pairwise_replicates(x: AlgoRuns, y: AlgoRuns):
    """(point (m,), replicates (reps, m), n_strata) over the strata X and Y share."""
    shared = [key for key in x.slices if key in y.slices]
    if not shared:
        return None
    point = np.mean([stratum_probability(x.values[x.slices[k]], y.values[y.slices[k]]) for k in shared], axis=0)
    reps = np.mean([stratum_probability(x.resampled[:, x.slices[k]], y.resampled[:, y.slices[k]]) for k in shared],
                   axis=0)
    return point, reps, len(shared)


def probability_of_improvement(runs: pd.DataFrame, metrics=SAFETY_METRICS, reps: int = DEFAULT_REPS,
                               seed: int = 0) -> pd.DataFrame:
    """For every phase, ordered pair of algorithms (algo X, other Y) and metric, P(X safer than Y)
    with its 95 % stratified-bootstrap interval. `runs`: the per-run table (stage 2's
    run_metrics.parquet: task, bound, algo, seed, phase and the metrics). A pair that shares
    no (task, bound) stratum gets no row."""
    require_columns(runs, list(RUN_KEYS) + ["phase"] + list(metrics), "run metrics")
    if int(reps) < 1 or int(seed) < 0:
        raise ValueError(f"reps must be >= 1 and seed >= 0 (got reps={reps}, seed={seed})")
    runs = runs.sort_values(["phase", "algo", "task", "bound", "seed"], kind="stable")
    out = []
    for phase in [p for p in PHASES if p in set(runs["phase"])]:
        here = runs[runs["phase"] == phase]
        algos = {a: AlgoRuns(rows, metrics, int(reps), int(seed), a, phase) for a, rows in here.groupby("algo", sort=True)}
        names = list(algos)
        for i, a in enumerate(names):
            for b in names[i + 1:]:
                got = pairwise_replicates(algos[a], algos[b])
                if got is None:
                    continue
                point, replicates, n_strata = got
                low, high = percentile_ci(replicates, axis=0)
                # P(Y safer than X) = 1 - P(X safer than Y), replicate by replicate, so its interval mirrors
                for x, y, p, lo, hi in ((a, b, point, low, high), (b, a, 1.0 - point, 1.0 - high, 1.0 - low)):
                    out.append(pd.DataFrame({"phase": phase, "algo": x, "other": y, "metric": list(metrics), "p": p,
                                             "ci_low": lo, "ci_high": hi, "n_strata": n_strata}))
    if not out:
        return pd.DataFrame(columns=COLUMNS)
    return pd.concat(out, ignore_index=True).sort_values(["phase", "algo", "other"], key=lambda c: c.map(
        PHASES.index) if c.name == "phase" else c, kind="stable").reset_index(drop=True)


__all__ = ["AlgoRuns", "SAFETY_METRICS", "pairwise_replicates", "probability_of_improvement", "stratum_probability"]
