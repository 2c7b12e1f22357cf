"""IQM and the stratified bootstrap (docs/protocol.md: aggregation and uncertainty), vectorised over replicates."""

from __future__ import annotations

import zlib

import numpy as np

CI_PERCENTILES = (2.5, 97.5)


def iqm(values, axis=0):
    """Interquartile mean, equal to scipy.stats.trim_mean(values, 0.25): cut floor(n/4) values
    from each end (found by partitioning) and average the rest. Computed here, the same way,
    because importing scipy.stats costs about a second in every process that aggregates."""
    values = np.asarray(values, dtype=np.float64)
    if values.ndim == 0:
        raise ValueError("iqm needs at least one axis")
    # partitioning is much faster on contiguous last-axis rows
    values = np.ascontiguousarray(np.moveaxis(values, axis, -1))
    n = values.shape[-1]
    if n == 0:
        return np.full(values.shape[:-1], np.nan)[()]
    cut = int(0.25 * n)
    kept = np.partition(values, (cut, n - cut - 1), axis=-1)[..., cut:n - cut]
    return np.mean(kept, axis=-1)


def percentile_ci(replicates, axis=0):
    """95 % percentile interval (2.5th and 97.5th percentiles, numpy's linear interpolation)."""
    low, high = np.percentile(replicates, CI_PERCENTILES, axis=axis)
    return low, high


def group_rng(seed: int, *names) -> np.random.Generator:
    """A generator for one (algo, phase) group: depends on the seed and the group's names only,
    so an algorithm's CIs do not change when other algorithms are added or removed."""
    words = [int(seed)] + [zlib.crc32(str(n).encode()) for n in names]
    return np.random.default_rng(words)


def stratified_draws(stratum_sizes, reps: int, rng: np.random.Generator) -> np.ndarray:
    """Indices (reps, n) of resampled runs: inside each stratum, n_s draws with replacement
    from that stratum's n_s runs. Runs are laid out stratum after stratum (sizes may differ).
    One draw serves every metric (and the CDF) of a replicate."""
    sizes = np.asarray(stratum_sizes, dtype=np.int64)
    offsets = np.concatenate([[0], np.cumsum(sizes)[:-1]])
    size_of_slot = np.repeat(sizes, sizes)
    offset_of_slot = np.repeat(offsets, sizes)
    return offset_of_slot + rng.integers(0, size_of_slot, size=(reps, size_of_slot.size))


def stratum_means(values: np.ndarray, draws: np.ndarray, stratum_sizes) -> np.ndarray:
    """Mean over each stratum's drawn runs: values (n, m), draws (reps, n) -> (reps, S, m)."""
    sizes = np.asarray(stratum_sizes)
    starts = np.concatenate([[0], np.cumsum(sizes)[:-1]])
    return np.add.reduceat(values[draws], starts, axis=1) / sizes[None, :, None]


def draw_counts(draws: np.ndarray, n: int) -> np.ndarray:
    """How often each run was drawn in each replicate: (reps, n) -> (reps, n) counts."""
    reps = draws.shape[0]
    flat = (np.arange(reps)[:, None] * n + draws).ravel()
    return np.bincount(flat, minlength=reps * n).reshape(reps, n)
