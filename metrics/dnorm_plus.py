"""Definitions of how Dnorm+ is averaged over iterates and seeds (stage 2's `dnorm_plus` option).

- ``paper`` (the default): eq. 5 and 6 as written. A policy without violating episodes has
  Dnorm+ = 0; a run's training value is the mean over all its logged iterates, a condition's
  value the mean over all its K seeds.
- ``saferleval``: what the paper's own suite computes (its published Dnorm+ values come from
  it). A run's training value is the mean over the iterates that violated at least once only
  (so it is the paper's value divided by the share of violating iterates), and a condition's
  final-phase value is the mean over the seeds whose final policy violated at least once only
  (0 when none did); bootstrap replicates apply the same rule to the resampled seeds.
  Training conditions still average all seeds.
"""

from __future__ import annotations

import numpy as np
import pandas as pd

from .schema import RUN_KEYS

DEFINITIONS = ("paper", "saferleval")


def check_definition(name: str) -> str:
    if name not in DEFINITIONS:
        raise ValueError(f"dnorm_plus must be one of {', '.join(DEFINITIONS)}, not {name!r}")
    return name


def training_over_violating_iterates(runs: pd.DataFrame, iterates: pd.DataFrame) -> pd.DataFrame:
    """`runs` with each run's training Dnorm_plus replaced by its mean over the iterates with V > 0."""
    keys = list(RUN_KEYS) + ["phase"]
    train = iterates[iterates["phase"] == "train"]
    per_run = (train.assign(violating=(train["V"] > 0).astype(np.int64))
               .groupby(keys, sort=False)[["Dnorm_plus", "violating"]].sum())
    ratio = np.where(per_run["violating"] > 0, per_run["Dnorm_plus"] / per_run["violating"].clip(lower=1), 0.0)
    key = pd.MultiIndex.from_frame(runs[keys])
    replaced = pd.Series(ratio, index=per_run.index).reindex(key).to_numpy()
    out = runs.copy()
    is_train = (runs["phase"] == "train").to_numpy()
    out.loc[is_train, "Dnorm_plus"] = replaced[is_train]
    return out


def over_violating_seeds(dnorm_plus_mean: np.ndarray, violating_share: np.ndarray) -> np.ndarray:
    """Mean Dnorm+ over the violating seeds only, from means over all seeds: Dnorm+ is 0 for a
    seed without violations, so the sum over violating seeds is the sum over all, and the mean
    over them is the ratio of the two means (0 where no seed violated)."""
    safe = np.where(violating_share > 0, violating_share, 1.0)
    return np.where(violating_share > 0, dnorm_plus_mean / safe, 0.0)


__all__ = ["DEFINITIONS", "check_definition", "over_violating_seeds", "training_over_violating_iterates"]
