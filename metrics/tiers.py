"""Stage 3: safety tiers and tier confidence from stage 2's threshold-free results.

- ``tiers``: per (algo, phase), the tier of the IQM point estimates and the share of bootstrap
  replicates whose IQMs land in each tier 0..4 (p_tier0..p_tier4);
- ``conditions``: per (task, bound, algo, phase), mean and sample std over seeds of every
  metric, the tier of the seed means and the share of that condition's bootstrap replicates
  (resampled seeds) in each tier.
"""

from __future__ import annotations

import os

import numpy as np
import pandas as pd

from .aggregate import Aggregate, read_aggregate
from .atomic import staged_directory
from .safe_text import csv_safe
from .schema import METRICS
from .thresholds import N_TIERS, load_thresholds, tier_of, validate_thresholds

TIER_FILES = {"tiers": "tiers.csv", "conditions": "conditions.csv"}
P_COLUMNS = [f"p_tier{k}" for k in range(N_TIERS)]


def _tier_shares(replicates: pd.DataFrame, keys, thresholds) -> pd.DataFrame:
    tiers = tier_of({m: replicates[m].to_numpy() for m in METRICS}, thresholds)
    group = replicates.groupby(list(keys), sort=False).ngroup().to_numpy()
    n_groups = group.max() + 1 if group.size else 0
    counts = np.bincount(group * N_TIERS + tiers, minlength=n_groups * N_TIERS).reshape(n_groups, N_TIERS)
    shares = counts / counts.sum(axis=1, keepdims=True)
    firsts = replicates.drop_duplicates(list(keys))[list(keys)].reset_index(drop=True)
    return pd.concat([firsts, pd.DataFrame(shares, columns=P_COLUMNS)], axis=1)


def assign_tiers(result: Aggregate, thresholds=None) -> dict:
    """{'tiers': DataFrame, 'conditions': DataFrame} for stage 2's result and the thresholds
    (a mapping, or None for the paper's Table 1, docs/protocol.md)."""
    thresholds = load_thresholds() if thresholds is None else validate_thresholds(thresholds)
    point = result.iqm.pivot_table(index=["algo", "phase"], columns="metric", values="iqm", sort=False).reset_index()
    point["tier"] = tier_of({m: point[m].to_numpy() for m in METRICS}, thresholds)
    shares = _tier_shares(result.bootstrap, ["algo", "phase"], thresholds)
    tiers = point[["algo", "phase", "tier"]].merge(shares, on=["algo", "phase"], how="left", validate="1:1")

    keys = ["task", "bound", "algo", "phase"]
    cond = result.condition_stats.copy()
    cond["tier"] = tier_of({m: cond[f"{m}_mean"].to_numpy() for m in METRICS}, thresholds)
    cond_shares = _tier_shares(result.condition_bootstrap, keys, thresholds)
    conditions = cond.merge(cond_shares, on=keys, how="left", validate="1:1")
    return {"tiers": tiers, "conditions": conditions}


def write_tier_files(tables: dict, folder) -> None:
    """tiers.csv and conditions.csv into `folder` (a staging folder), names spreadsheet-safe."""
    for name, filename in TIER_FILES.items():
        csv_safe(tables[name]).to_csv(os.path.join(folder, filename), index=False)


def write_tiers(tables: dict, out_dir) -> None:
    """Write tiers.csv and conditions.csv into out_dir, both or neither."""
    with staged_directory(out_dir) as stage:
        write_tier_files(tables, stage)


def tiers(aggregate_dir, thresholds_path=None, out_dir=None) -> dict:
    """Stage 3 on disk: read stage 2's folder, write tiers.csv and conditions.csv (into out_dir,
    default the same folder)."""
    thresholds = load_thresholds(thresholds_path)
    tables = assign_tiers(read_aggregate(aggregate_dir), thresholds)
    write_tiers(tables, out_dir if out_dir is not None else aggregate_dir)
    return tables
