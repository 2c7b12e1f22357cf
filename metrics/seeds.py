"""Seed planning: how many seeds per (task, bound) stratum an algorithm's tier needs to be settled.

From the runs at hand (stage 1's per-run values), for K = 2 .. k_max seeds in every stratum,
per algorithm and phase: the expected 95 % CI width of each IQM the tiers use, and P(tier at
K = the full-data tier), the share of replicate experiments whose IQMs land in the tier of
the point IQMs of all the runs at hand. See docs/metrics.md ("Seed planning").

- K <= K_have (the fewest seeds any stratum of the group has): resampled. The engine's own
  bootstrap draws (same seed, same stream as stage 2) cut to their first K draws in each
  stratum: K seeds drawn with replacement from the stratum's seeds at hand, i.e. an
  experiment with K seeds whose seed-to-seed spread is the one observed.
- K > K_have: extrapolated, not resampled (drawing more seeds than exist would invent
  diversity): the replicate IQMs at K_have shrunk towards the point IQMs by sqrt(K_have / K),
  the 1/sqrt(K) law of a mean over K independent seeds. Marked ``extrapolated`` in the output.
"""

from __future__ import annotations

import json
import os
import warnings
from dataclasses import dataclass, field

import numpy as np
import pandas as pd
import pyarrow.parquet as pq

from .aggregate import DEFAULT_REPS, check_strata
from .atomic import staged_directory
from .bootstrap import group_rng, iqm, percentile_ci, stratified_draws, stratum_means
from .safe_text import csv_safe, markdown_cell
from .schema import METRICS, PHASES, RUN_KEYS, EpisodeTableError, MetricsWarning, require_columns
from .summary import _META_KEY, check_finite, read_summary, sort_frame, summarise
from .thresholds import load_thresholds, tier_of, validate_thresholds

DEFAULT_K_MAX = 30
MAX_K = 1000  # seeds per stratum worth planning for; past this a k_max is a typo (it would run for hours)
DEFAULT_TARGET = 0.9
PLAN_FILES = {"table": "plan.csv", "needed": "needed.csv", "markdown": "needed.md", "meta": "plan.json"}
FIGURE_FILE = "seed_planning.png"
RULE = (
    "K <= k_have: the stage-2 bootstrap draws cut to their first K draws per (task, bound) stratum "
    "(K seeds with replacement from the seeds at hand); K > k_have: extrapolated, the replicate IQMs at "
    "k_have shrunk towards the point IQMs by sqrt(k_have / K)"
)


@dataclass
class SeedPlan:
    """``table``: one row per (algo, phase, k); ``needed``: one row per (algo, phase), the
    tier confidence now and the seeds needed for the target; ``meta``: the settings."""

    table: pd.DataFrame
    needed: pd.DataFrame
    meta: dict = field(default_factory=dict)


def tier_metrics(thresholds) -> list:
    """The metrics the thresholds test, in METRICS order (the ones whose CI widths matter)."""
    named = {m for limits in thresholds.values() for m in limits}
    return [m for m in METRICS if m in named]


def _check_settings(k_max, target, reps, seed, phases) -> tuple:
    """The phases to plan (None: all); raises ValueError naming the bad setting."""
    if isinstance(k_max, bool) or int(k_max) != k_max or k_max < 2:
        raise ValueError(f"k_max must be an integer >= 2 (got {k_max!r}): K = 1 seed has no spread to plan with")
    if k_max > MAX_K:
        raise ValueError(f"k_max must be <= {MAX_K} (got {k_max!r})")
    if not 0 < target <= 1:
        raise ValueError(f"target must be a probability in (0, 1] (got {target!r})")
    if int(reps) < 1 or int(seed) < 0:
        raise ValueError(f"reps must be >= 1 and seed >= 0 (got reps={reps}, seed={seed})")
    if phases is None:
        return None
    phases = (phases,) if isinstance(phases, str) else tuple(phases)
    unknown = [p for p in phases if p not in PHASES]
    if unknown:
        raise ValueError(f"unknown phase(s) {', '.join(map(repr, unknown))} (phases: {', '.join(PHASES)})")
    return phases


def _select_runs(runs: pd.DataFrame, phases) -> pd.DataFrame:
    """Validated runs of the phases to plan, in stage 2's order (algo, phase, task, bound, seed)."""
    require_columns(runs, RUN_KEYS + ("phase",) + METRICS, "runs table")
    if runs.empty:
        raise EpisodeTableError("no runs to plan seeds for")
    if "source" not in runs.columns:
        runs = runs.assign(source="runs table")
    if phases is not None:
        absent = [p for p in phases if p not in set(runs["phase"])]
        if absent:
            raise EpisodeTableError(f"no runs in phase(s) {', '.join(absent)} (phases in the runs: "
                                    f"{', '.join(p for p in PHASES if p in set(runs['phase']))})")
        runs = runs[runs["phase"].isin(phases)]
    check_finite(runs)
    return sort_frame(runs, ["algo", "phase", "task", "bound", "seed"])


def _check_two_seeds(algo, phase, rows: pd.DataFrame) -> None:
    """One seed in a stratum gives no seed-to-seed spread: every replicate would draw that seed
    and P(tier) would read 1 whatever the truth."""
    sizes = rows.groupby(["task", "bound"], sort=False)["seed"].agg(["size", "first"])
    single = sizes[sizes["size"] < 2]
    if len(single):
        (task, bound), first = single.index[0], single.iloc[0]
        source = rows.loc[(rows["task"] == task) & (rows["bound"] == bound), "source"].iloc[0]
        raise EpisodeTableError(
            f"{source}: algo={algo}, phase={phase}: stratum task={task}, bound={bound:g} has 1 seed "
            f"(seed={first['first']}; {len(single)} of {len(sizes)} strata have one); seed planning needs "
            f"at least 2 seeds in every (task, bound) stratum to measure the seed-to-seed spread")


def replicates_by_k(values: np.ndarray, sizes, draws: np.ndarray, k_have: int) -> np.ndarray:
    """Replicate IQMs for K = 1..k_have seeds per stratum: (k_have, reps, m).

    Replicate r's K seeds in stratum s are its first K draws there (draws with replacement
    from the stratum's seeds), so K and K + 1 share K seeds and the curves are smooth in K."""
    sizes = np.asarray(sizes)
    offsets = np.concatenate([[0], np.cumsum(sizes)[:-1]])
    total = np.zeros((draws.shape[0], sizes.size, values.shape[1]))
    out = np.empty((k_have, draws.shape[0], values.shape[1]))
    for k in range(k_have):
        total += values[draws[:, offsets + k]]
        out[k] = iqm(total / (k + 1), axis=1)
    return out


def extrapolate(base: np.ndarray, point: np.ndarray, k_have: int, k: int) -> np.ndarray:
    """Replicates at k_have seeds shrunk towards the point by sqrt(k_have / k) (the 1/sqrt(K) law)."""
    return point + (base - point) * np.sqrt(k_have / k)


def seeds_needed(ks, p, target):
    """Smallest K from which P stays >= target up to the last K planned, or None."""
    ks, ok = np.asarray(ks), np.asarray(p) >= target
    if not ok[-1]:
        return None
    bad = np.flatnonzero(~ok)
    return int(ks[bad[-1] + 1]) if bad.size else int(ks[0])


def _tiers(replicates: np.ndarray, thresholds) -> np.ndarray:
    return tier_of(dict(zip(METRICS, replicates.T)), thresholds, validate=False)


def _plan_group(algo, phase, rows, k_max, target, thresholds, metrics, reps, seed):
    """The planned rows (one per K) and the needed row of one (algo, phase)."""
    strata = rows.groupby(["task", "bound"], sort=False).size()
    sizes = strata.to_numpy()
    values = rows[list(METRICS)].to_numpy(np.float64)
    draws = stratified_draws(sizes, reps, group_rng(seed, algo, phase))  # stage 2's very draws
    now = iqm(stratum_means(values, draws, sizes), axis=1)  # stage 2's replicate IQMs
    means = np.add.reduceat(values, np.concatenate([[0], np.cumsum(sizes)[:-1]]), axis=0) / sizes[:, None]
    point = iqm(means, axis=0)
    tier = int(_tiers(point[None, :], thresholds)[0])
    k_have = int(sizes.min())

    by_k = replicates_by_k(values, sizes, draws, min(k_have, k_max))
    if (sizes == k_have).all() and k_have <= k_max:
        by_k[-1] = now  # equal strata at K = k_have: exactly stage 2's bootstrap (same P as tiers.csv)
    ks = np.arange(2, k_max + 1)
    planned = [by_k[k - 1] if k <= k_have else extrapolate(by_k[-1], point, k_have, k) for k in ks]
    p = np.array([np.mean(_tiers(r, thresholds) == tier) for r in planned])
    table = pd.DataFrame({"algo": algo, "phase": phase, "k": ks, "extrapolated": ks > k_have, "tier": tier, "p_tier": p})
    for m in metrics:
        j = METRICS.index(m)
        low, high = np.array([percentile_ci(r[:, j]) for r in planned]).T
        table[f"ci_width_{m}"] = high - low

    p_now = float(np.mean(_tiers(now, thresholds) == tier))
    k_needed = seeds_needed(ks, p, target)
    needed = {
        "algo": algo,
        "phase": phase,
        "n_strata": int(sizes.size),
        "k_have": k_have,
        "tier": tier,
        "p_tier": p_now,
        "target": float(target),
        "settled": p_now >= target,
        "k_needed": k_needed,
        "k_needed_extrapolated": None if k_needed is None else k_needed > k_have,
        "add_seeds": None if k_needed is None else max(k_needed - k_have, 0),
    }
    return table, needed


def plan_seeds(
    runs: pd.DataFrame,
    k_max: int = DEFAULT_K_MAX,
    target: float = DEFAULT_TARGET,
    thresholds=None,
    phases=None,
    reps: int = DEFAULT_REPS,
    seed: int = 0,
) -> SeedPlan:
    """Seed plan of a runs table (``Summary.runs``, stage 1's per-run values; any number of files).

    Per (algo, phase): ``needed`` holds the tier of the point IQMs, ``p_tier`` (the share of
    stage 2's bootstrap replicates in that tier: tiers.csv's value for the same reps and seed),
    ``settled`` (p_tier >= target), ``k_needed`` (the smallest K from which the planned P stays
    >= target up to k_max; missing when none) and ``add_seeds`` (k_needed - k_have, at least 0).
    ``table`` holds per K = 2..k_max: extrapolated, p_tier and ci_width_<metric> for every
    metric the thresholds test. Raises ValueError on bad settings and EpisodeTableError on a
    runs table that cannot be planned from (a stratum with one seed, a phase without runs)."""
    phases = _check_settings(k_max, target, reps, seed, phases)
    thresholds = load_thresholds() if thresholds is None else validate_thresholds(thresholds)
    messages = check_strata(_select_runs(runs, None))  # stage 2's warnings for the same runs (missing strata...)
    runs = _select_runs(runs, phases)
    groups = list(runs.groupby(["algo", "phase"], sort=False))
    for (algo, phase), rows in groups:
        _check_two_seeds(algo, phase, rows)
    metrics = tier_metrics(thresholds)
    parts = [_plan_group(a, ph, rows, int(k_max), target, thresholds, metrics, int(reps), int(seed)) for (a, ph), rows in groups]
    table = pd.concat([t for t, _ in parts], ignore_index=True)
    needed = pd.DataFrame([n for _, n in parts])
    for col in ("k_needed", "add_seeds"):
        needed[col] = needed[col].astype("Int64")
    needed["k_needed_extrapolated"] = needed["k_needed_extrapolated"].astype("boolean")
    meta = {
        "k_max": int(k_max),
        "target": float(target),
        "reps": int(reps),
        "seed": int(seed),
        "phases": sorted(set(runs["phase"]), key=PHASES.index),
        "thresholds": thresholds,
        "ci": "95 % percentile interval of the replicate IQMs",
        "rule": RULE,
        "n_runs": int(runs[list(RUN_KEYS)].drop_duplicates().shape[0]),
        "warnings": messages,
    }
    return SeedPlan(table=table, needed=needed, meta=meta)


def _is_summary_file(path) -> bool:
    if not str(path).lower().endswith((".parquet", ".pq")):
        return False
    try:
        return _META_KEY in (pq.read_schema(path).metadata or {})
    except Exception:  # not Parquet: the episode reader names the problem
        return False


def load_runs(paths, jobs: int = 1) -> pd.DataFrame:
    """Per-run values (``Summary.runs``) of any mix of episode tables, summary files written by
    `summarise` and stage-2 folders (their run_metrics.parquet)."""
    paths = [os.fspath(p) for p in ([paths] if isinstance(paths, (str, os.PathLike)) else paths)]
    if not paths:
        raise EpisodeTableError("no input files given")
    folders = [p for p in paths if os.path.isdir(p)]
    summaries = [p for p in paths if p not in folders and _is_summary_file(p)]
    episodes = [p for p in paths if p not in folders and p not in summaries]
    frames = []  # each with the input it came from, to name both inputs of a run given twice
    for folder in folders:
        path = os.path.join(folder, "run_metrics.parquet")
        if not os.path.exists(path):
            raise EpisodeTableError(f"{folder}: a folder, but no run_metrics.parquet in it (not a stage-2 folder)")
        frames.append(pd.read_parquet(path).assign(input=folder))
    frames += [read_summary(p).runs.assign(input=p) for p in summaries]
    if episodes:
        runs = summarise(episodes, jobs=jobs).runs
        frames.append(runs.assign(input=runs["source"]))
    runs = pd.concat(frames, ignore_index=True)
    keys = list(RUN_KEYS) + ["phase"]
    dup = runs.duplicated(keys, keep=False)
    if dup.any():
        first = runs[dup].iloc[0]
        inputs = runs.loc[dup & (runs[keys] == first[keys]).all(axis=1), "input"]
        raise EpisodeTableError(f"run task={first['task']}, bound={first['bound']:g}, algo={first['algo']}, seed={first['seed']}, "
                                f"phase={first['phase']} appears in more than one input: {', '.join(inputs)}")
    return runs.drop(columns="input")
    return runs


def needed_markdown(plan: SeedPlan) -> str:
    """The seeds-needed table as Markdown, one row per (algo, phase)."""
    target, k_max = plan.meta["target"], plan.meta["k_max"]
    lines = [
        f"| algo | phase | seeds per stratum now | tier | P(tier) now | seeds for P(tier) >= {target:g} |",
        "|---|---|---|---|---|---|",
    ]
    for row in plan.needed.itertuples():
        if pd.isna(row.k_needed):
            how = f"> {k_max}"
        elif row.settled:
            how = f"{row.k_needed} (settled now)"
        else:
            how = f"{row.k_needed} ({'extrapolated' if row.k_needed_extrapolated else 'resampled'})"
        lines.append(f"| {markdown_cell(row.algo)} | {markdown_cell(row.phase)} | {row.k_have} | {row.tier} | {row.p_tier:.3f} | {how} |")
    return "\n".join(lines) + "\n"


def write_plan(plan: SeedPlan, out_dir, figure: bool = True) -> list:
    """Write plan.csv, needed.csv, needed.md, plan.json (and seed_planning.png) into out_dir, all
    or nothing. Returns the file names written; without matplotlib the figure is skipped with
    a MetricsWarning (the base install has no matplotlib)."""
    with staged_directory(out_dir) as stage:
        csv_safe(plan.table).to_csv(os.path.join(stage, PLAN_FILES["table"]), index=False)
        csv_safe(plan.needed).to_csv(os.path.join(stage, PLAN_FILES["needed"]), index=False)
        with open(os.path.join(stage, PLAN_FILES["markdown"]), "w", encoding="utf-8") as fh:
            fh.write(needed_markdown(plan))
        with open(os.path.join(stage, PLAN_FILES["meta"]), "w") as fh:
            json.dump(plan.meta, fh, indent=2)
        if figure:
            from .seeds_figure import MatplotlibMissing, save_plan_figure

            try:
                save_plan_figure(plan, os.path.join(stage, FIGURE_FILE))
            except MatplotlibMissing as err:
                warnings.warn(f"{err}; {FIGURE_FILE} not written", MetricsWarning, stacklevel=2)
        names = sorted(os.listdir(stage))
    return names


__all__ = ["SeedPlan", "plan_seeds", "load_runs", "write_plan", "needed_markdown", "seeds_needed", "tier_metrics",
           "replicates_by_k", "extrapolate"]
