"""Stage 2: threshold-free aggregation of run summaries.

Per algorithm and phase: IQM over (task, bound) strata of the seed means with stratified-
bootstrap CIs (or rliable's pooled IQM), every replicate's IQMs, per-condition statistics and
replicate means, and the CDF of (c - d)/d with bootstrap bands. See docs/metrics.md.
"""

from __future__ import annotations

import json
import os
import warnings
from dataclasses import dataclass, field

import numpy as np
import pandas as pd

from . import grid
from .atomic import staged_directory
from .bootstrap import draw_counts, group_rng, iqm, percentile_ci, stratified_draws, stratum_means
from .dnorm_plus import check_definition, over_violating_seeds, training_over_violating_iterates
from .safe_text import csv_safe, read_csv
from .schema import FINAL_PHASES, METRICS, RUN_KEYS, EpisodeTableError, MetricsWarning
from .summary import Summary, check_finite, sort_frame

ESTIMATORS = ("stratified", "pooled")
DEFAULT_REPS = 2000
CONDITION_KEYS = ("task", "bound", "algo", "phase")
OUTPUT_FILES = {
    "iqm": "iqm.csv",
    "bootstrap": "bootstrap.parquet",
    "cdf": "cdf.parquet",
    "run_metrics": "run_metrics.parquet",
    "condition_stats": "condition_stats.parquet",
    "condition_bootstrap": "condition_bootstrap.parquet",
    "iterates": "iterates.parquet",
    "final_episodes": "final_episodes.parquet",
}
META_FILE = "aggregate.json"


@dataclass
class Aggregate:
    iqm: pd.DataFrame
    bootstrap: pd.DataFrame
    cdf: pd.DataFrame
    run_metrics: pd.DataFrame
    condition_stats: pd.DataFrame
    condition_bootstrap: pd.DataFrame
    iterates: pd.DataFrame
    final_episodes: pd.DataFrame
    meta: dict = field(default_factory=dict)


def _warn(message, collected):
    collected.append(message)
    warnings.warn(message, MetricsWarning, stacklevel=3)


def check_strata(runs: pd.DataFrame) -> list:
    """Warnings (also issued as MetricsWarning) for the documented rules:

    - a run without episodes of some phase (training, or a final phase) is left out of that
      phase's results;
    - an algorithm missing from a (task, bound) stratum that other algorithms have in that phase:
      its IQM is over the strata it has;
    - a stratum with one seed: kept; its seed mean is that seed's value, its sample std is NaN
      and it adds no resampling spread to the bootstrap.
    """
    messages = []
    for phase, rows in runs.groupby("phase", sort=False):
        strata = set(zip(rows["task"], rows["bound"]))
        for algo, own in rows.groupby("algo", sort=True):
            missing = sorted(strata - set(zip(own["task"], own["bound"])))
            if missing:
                names = ", ".join(f"(task={t}, bound={b:g})" for t, b in missing)
                files = ", ".join(sorted(set(";".join(own["source"]).split(";"))))
                _warn(
                    f"algo {algo!r}, phase {phase}: no runs in stratum/strata {names} that other algorithms have "
                    f"(files read: {files}); its IQM is over the {len(strata) - len(missing)} of {len(strata)} strata it has",
                    messages,
                )
    per_run = runs.groupby(list(RUN_KEYS), sort=True).agg(phases=("phase", frozenset), source=("source", "first"))
    for (task, bound, algo, seed), phases, source in zip(per_run.index, per_run["phases"], per_run["source"]):
        run = f"{source}: run task={task}, bound={bound:g}, algo={algo}, seed={seed}"
        if "train" in phases:
            for phase in sorted(set(FINAL_PHASES) - phases):
                _warn(f"{run} has training episodes but no {phase} episodes; it is left out of the {phase} results",
                      messages)
        else:
            _warn(f"{run} has {', '.join(sorted(phases))} episodes but no training episodes; it is left out of "
                  "the train results", messages)
    per_condition = runs.groupby(list(CONDITION_KEYS), sort=True).agg(
        n=("seed", "size"), seed=("seed", "first"), source=("source", "first"))
    single = per_condition[per_condition["n"] == 1]
    for (task, bound, algo, phase), seed, source in zip(single.index, single["seed"], single["source"]):
        _warn(
            f"{source}: rows of task={task}, bound={bound:g}, algo={algo}, seed={seed}, phase={phase} "
            f"are the only seed of their stratum; its sample std is NaN and the bootstrap cannot resample it",
            messages,
        )
    return messages


def _run_codes(df: pd.DataFrame, categories: dict) -> np.ndarray:
    """One int64 per row identifying (task, bound, algo, seed, phase) against the runs table."""
    key = np.zeros(len(df), np.int64)
    for name in RUN_KEYS + ("phase",):
        cats = categories[name]
        # factorising first matches each distinct value once (fast on Arrow-backed strings)
        found, distinct = pd.factorize(df[name])
        codes = np.append(pd.Index(cats).get_indexer(distinct), -1)[found]
        if (codes < 0).any():
            raise EpisodeTableError(f"histogram rows of runs missing from the runs table (e.g. {name}={df[name][codes < 0].iloc[0]!r})")
        key = key * len(cats) + codes
    return key


def _dense_histograms(runs: pd.DataFrame, histograms: pd.DataFrame) -> np.ndarray:
    """Counts (len(runs), N_BINS), row i for runs.iloc[i]."""
    categories = {name: np.sort(runs[name].unique()) for name in RUN_KEYS + ("phase",)}
    run_key = _run_codes(runs, categories)
    hist_key = _run_codes(histograms, categories)
    order = np.argsort(run_key)
    where = order[np.searchsorted(run_key[order], hist_key)]
    dense = np.zeros((len(runs), grid.N_BINS), np.int64)
    dense[where, histograms["bin"].to_numpy()] = histograms["count"].to_numpy()  # (run, bin) rows are unique
    return dense


def _group_results(algo, phase, rows, hist, reps, seed, estimator, violating_seeds_only=False):
    """Everything stage 2 computes for one (algo, phase): runs sorted by (task, bound, seed).
    violating_seeds_only: a condition's Dnorm+ is the mean over its violating seeds (metrics.dnorm_plus)."""
    strata = rows.groupby(["task", "bound"], sort=False).size()
    sizes = strata.to_numpy()
    values = rows[list(METRICS)].to_numpy(np.float64)
    draws = stratified_draws(sizes, reps, group_rng(seed, algo, phase))
    means = np.add.reduceat(values, np.concatenate([[0], np.cumsum(sizes)[:-1]]), axis=0) / sizes[:, None]
    rep_means = stratum_means(values, draws, sizes)  # (reps, S, m)
    if violating_seeds_only:
        j, violated = METRICS.index("Dnorm_plus"), (values[:, [METRICS.index("V")]] > 0).astype(np.float64)
        starts = np.concatenate([[0], np.cumsum(sizes)[:-1]])
        means[:, j] = over_violating_seeds(means[:, j], np.add.reduceat(violated, starts, axis=0)[:, 0] / sizes)
        rep_means[:, :, j] = over_violating_seeds(rep_means[:, :, j], stratum_means(violated, draws, sizes)[:, :, 0])
        rows = rows.assign(Dnorm_plus=rows["Dnorm_plus"].where(rows["V"] > 0))  # its std too: violating seeds only
    if estimator == "stratified":
        point, reps_iqm = iqm(means, axis=0), iqm(rep_means, axis=1)
    else:  # rliable's: IQM over all runs of all strata, pooled
        point, reps_iqm = iqm(values, axis=0), iqm(values[draws], axis=1)
    low, high = percentile_ci(reps_iqm, axis=0)
    iqm_rows = pd.DataFrame(
        {
            "algo": algo,
            "phase": phase,
            "metric": list(METRICS),
            "iqm": point,
            "ci_low": low,
            "ci_high": high,
            "n_strata": len(sizes),
            "n_runs": len(rows),
            "estimator": estimator,
        }
    )
    boot = pd.DataFrame({"algo": algo, "phase": phase, "replicate": np.arange(reps), **dict(zip(METRICS, reps_iqm.T))})

    tasks = strata.index.get_level_values("task").to_numpy()
    bounds = strata.index.get_level_values("bound").to_numpy()
    std = rows.groupby(["task", "bound"], sort=False)[list(METRICS)].std(ddof=1).to_numpy()
    stats = pd.DataFrame({"task": tasks, "bound": bounds, "algo": algo, "phase": phase, "n_seeds": sizes})
    for j, m in enumerate(METRICS):
        stats[f"{m}_mean"] = means[:, j]
        stats[f"{m}_std"] = std[:, j]
    n_strata = len(sizes)
    cond_boot = pd.DataFrame(
        {
            "task": np.tile(tasks, reps),
            "bound": np.tile(bounds, reps),
            "algo": algo,
            "phase": phase,
            "replicate": np.repeat(np.arange(reps), n_strata),
            **{m: rep_means[:, :, j].ravel() for j, m in enumerate(METRICS)},
        }
    )

    # CDF of (c-d)/d pooled over all episodes of the group; bands from the same draws.
    cum = np.cumsum(hist[:, :-1], axis=1).astype(np.float64)  # (n, points): episodes <= kappa_k
    total = hist.sum(axis=1).astype(np.float64)
    counts = draw_counts(draws, len(rows)).astype(np.float64)
    # Grid points where no run's count changes repeat the point before; the bands are computed
    # once per distinct column. Every product sums whole numbers below 2**53, so it is exact
    # in any order and the result equals the bands of every column.
    new_column = np.concatenate([[True], (cum[:, 1:] != cum[:, :-1]).any(axis=0)])
    rep_cdf = (counts @ cum[:, new_column]) / (counts @ total)[:, None]
    f_low, f_high = (band[np.cumsum(new_column) - 1] for band in percentile_ci(rep_cdf, axis=0))
    cdf = pd.DataFrame(
        {"algo": algo, "phase": phase, "kappa": grid.KAPPA, "F": cum.sum(0) / total.sum(), "F_low": f_low, "F_high": f_high}
    )
    return iqm_rows, boot, stats, cond_boot, cdf


def aggregate(summary: Summary, reps: int = DEFAULT_REPS, seed: int = 0, estimator: str = "stratified",
              dnorm_plus: str = "paper") -> Aggregate:
    """Stage 2 on a (concatenated) summary; see docs/metrics.md for every output's columns.
    dnorm_plus: "paper" (eq. 5 and 6) or "saferleval" (the paper's suite; metrics.dnorm_plus)."""
    compat = check_definition(dnorm_plus) == "saferleval"
    if estimator not in ESTIMATORS:
        raise ValueError(f"estimator must be one of {', '.join(ESTIMATORS)}, not {estimator!r}")
    if int(reps) < 1 or int(seed) < 0:
        raise ValueError(f"reps must be >= 1 and seed >= 0 (got reps={reps}, seed={seed})")
    runs = sort_frame(summary.runs, ["algo", "phase", "task", "bound", "seed"])
    if runs.empty:
        raise EpisodeTableError("no runs to aggregate")
    check_finite(runs)
    if compat:
        runs = training_over_violating_iterates(runs, summary.iterates)
    messages = check_strata(runs)
    dense = _dense_histograms(runs, summary.histograms)

    parts = []
    for (algo, phase), rows in runs.groupby(["algo", "phase"], sort=False):
        parts.append(_group_results(algo, phase, rows, dense[rows.index.to_numpy()], int(reps), int(seed), estimator,
                                    compat and phase != "train"))
    iqm_df, boot, stats, cond_boot, cdf = (pd.concat(p, ignore_index=True) for p in zip(*parts))
    meta = {
        "reps": int(reps),
        "seed": int(seed),
        "estimator": estimator,
        "dnorm_plus": dnorm_plus,
        "ci": "95 % percentile interval of the bootstrap replicates",
        "grid": grid.GRID_SPEC,
        "n_runs": int(runs[list(RUN_KEYS)].drop_duplicates().shape[0]),
        "warnings": messages,
    }
    return Aggregate(
        iqm=iqm_df,
        bootstrap=boot,
        cdf=cdf,
        run_metrics=sort_frame(runs, list(RUN_KEYS) + ["phase"]),
        condition_stats=sort_frame(stats, ["task", "bound", "algo", "phase"]),
        condition_bootstrap=sort_frame(cond_boot, ["task", "bound", "algo", "phase", "replicate"]),
        iterates=summary.iterates,
        final_episodes=summary.final_episodes,
        meta=meta,
    )


def write_aggregate_files(result: Aggregate, folder) -> None:
    """Write every stage-2 file into ``folder`` (a staging folder: see write_aggregate)."""
    for name, filename in OUTPUT_FILES.items():
        df = getattr(result, name)
        path = os.path.join(folder, filename)
        if filename.endswith(".csv"):
            csv_safe(df).to_csv(path, index=False)
        else:
            df.to_parquet(path, index=False)
    with open(os.path.join(folder, META_FILE), "w") as fh:
        json.dump(result.meta, fh, indent=2)


def write_aggregate(result: Aggregate, out_dir) -> None:
    """Write stage 2's files into out_dir, all or nothing."""
    with staged_directory(out_dir) as stage:
        write_aggregate_files(result, stage)


def read_aggregate(folder) -> Aggregate:
    """Stage 2's files back as DataFrames (what stage 3 and the figures read)."""
    folder = os.fspath(folder)
    missing = [f for f in list(OUTPUT_FILES.values()) + [META_FILE] if not os.path.exists(os.path.join(folder, f))]
    if missing:
        raise EpisodeTableError(f"{folder}: not a stage-2 folder (missing {', '.join(missing)}; run `saferl-eval aggregate`)")
    frames = {}
    path = folder
    try:
        for name, filename in OUTPUT_FILES.items():
            path = os.path.join(folder, filename)
            frames[name] = read_csv(path) if filename.endswith(".csv") else pd.read_parquet(path)
        path = os.path.join(folder, META_FILE)
        with open(path) as fh:
            meta = json.load(fh)
    except (OSError, ValueError) as err:  # pyarrow's ArrowInvalid and pandas' parser errors are ValueErrors
        raise EpisodeTableError(f"{path}: cannot be read ({type(err).__name__}: {str(err).splitlines()[0]}); "
                                f"write the folder again with `saferl-eval aggregate`") from None
    return Aggregate(meta=meta, **frames)


__all__ = ["Aggregate", "aggregate", "check_strata", "read_aggregate", "write_aggregate", "ESTIMATORS"]
