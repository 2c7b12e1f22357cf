"""All three stages in one call: episode files -> every output file in one folder, all or nothing."""

from __future__ import annotations

from .aggregate import DEFAULT_REPS, Aggregate, aggregate, write_aggregate_files
from .atomic import staged_directory
from .summary import summarise
from .thresholds import load_thresholds
from .tiers import assign_tiers, write_tier_files


def evaluate(
    episode_paths, out_dir, reps: int = DEFAULT_REPS, seed: int = 0, thresholds_path=None, estimator="stratified", jobs: int = 1,
    dnorm_plus: str = "paper",
):
    """Summarise, aggregate and tier episode files; write stage 2's and stage 3's files to out_dir.

    Returns (Aggregate, {'tiers': DataFrame, 'conditions': DataFrame}). Thresholds are loaded
    first so that a bad threshold file fails before any work; nothing is written on error.
    """
    thresholds = load_thresholds(thresholds_path)
    result: Aggregate = aggregate(summarise(episode_paths, jobs=jobs), reps=reps, seed=seed, estimator=estimator,
                                  dnorm_plus=dnorm_plus)
    tables = assign_tiers(result, thresholds)
    with staged_directory(out_dir) as stage:
        write_aggregate_files(result, stage)
        write_tier_files(tables, stage)
    return result, tables
