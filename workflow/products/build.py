"""Build one product from files: read the metrics engine's outputs, draw or tabulate, write
atomically. One function per product; the Snakemake scripts in workflow/scripts/ call these
with the rule's input and output paths and its settings (`workflow.products.settings`).
"""
from __future__ import annotations

import numpy as np
import pandas as pd

from . import fig_final, fig_training, tables
from .outputs import save_figure
from .style import apply_rc
from .tablefmt import save_table

RUN_KEYS = ["task", "bound", "algo", "seed"]


def _read_summaries(paths):
    from metrics.summary import read_summaries  # the engine's own reader (format checks included)

    return read_summaries(list(paths))


def _read_traces(paths) -> pd.DataFrame:
    frames = []
    for path in paths:
        df = pd.read_parquet(path)
        missing = [c for c in ("iteration", "multiplier") if c not in df.columns]
        if missing:
            raise ValueError(f"{path}: trace is missing column(s) {missing} (docs/api-contracts.md)")
        if not set(RUN_KEYS) <= set(df.columns):
            df = df.assign(**_run_of_path(path))
        frames.append(df)
    if not frames:
        raise ValueError("no trace files given")
    return pd.concat(frames, ignore_index=True)


def _run_of_path(path) -> dict:
    """task, bound, algo, seed of results/runs/{task}/d{bound}/{algo}/seed{seed}/FILE."""
    parts = str(path).replace("\\", "/").split("/")
    try:
        task, d, algo, seed = parts[-5], parts[-4], parts[-3], parts[-2]
        if not (d.startswith("d") and seed.startswith("seed")):
            raise ValueError
        return {"task": task, "bound": float(d[1:]), "algo": algo, "seed": int(seed[4:])}
    except (IndexError, ValueError):
        raise ValueError(f"{path}: expected a run file under .../{{task}}/d{{bound}}/{{algo}}/seed{{seed}}/, "
                         f"and the file has no task/bound/algo/seed columns") from None


def _settings_rc(settings):
    apply_rc(settings["font_size"])


# ---- tables --------------------------------------------------------------------------------

def iqm_table(kind: str, iqm_csv, tiers_csv, out: dict, settings: dict) -> tables.Table:
    """kind: table2, tableA2 or tableA3; out: paths csv, md, tex (and html, optional)."""
    builders = {"table2": tables.table2, "tableA2": tables.table_a2, "tableA3": tables.table_a3}
    if kind not in builders:
        raise ValueError(f"unknown IQM table {kind!r}; known: {sorted(builders)}")
    table = builders[kind](pd.read_csv(iqm_csv), pd.read_csv(tiers_csv), baseline=settings["baseline"],
                           decimals=settings["decimals"])
    save_table(table, out["csv"], out["md"], out["tex"], out.get("html"))
    return table


# ---- figures -------------------------------------------------------------------------------

def figure1(summary_path, out, settings: dict, run: dict) -> None:
    """Figure 1 from one run's summary: its final episodes and its per-phase V."""
    summary = _read_summaries([summary_path])
    sel = np.ones(len(summary.final_episodes), bool)
    for key in RUN_KEYS:
        sel &= (summary.final_episodes[key] == (float(run[key]) if key == "bound" else run[key])).to_numpy()
    costs = summary.final_episodes[sel]
    runs = summary.runs.set_index("phase")
    violation = {phase: float(runs.loc[phase, "V"]) for phase in fig_final.FINAL_PHASES if phase in runs.index}
    missing = [p for p in fig_final.FINAL_PHASES if p not in violation]
    if missing:
        raise ValueError(f"{summary_path}: no {missing} phase for Figure 1's run {run}")
    _settings_rc(settings)
    fig = fig_final.figure1(costs, violation, task=run["task"], bound=float(run["bound"]), algo=run["algo"],
                            seed=int(run["seed"]))
    save_figure(fig, out, dpi=settings["dpi"])


def condition_violation(summary) -> pd.DataFrame:
    """V per (task, bound, algo, phase): the metrics engine's mean over seeds of each run's V
    (its per-condition statistics, PAPER.md aggregation step 2), threshold-free."""
    import warnings

    from metrics import MetricsWarning, aggregate

    with warnings.catch_warnings():  # missing strata / single seeds are reported by the metrics rules
        warnings.simplefilter("ignore", MetricsWarning)
        stats = aggregate(summary, reps=1).condition_stats
    return stats[["task", "bound", "algo", "phase", "V_mean"]].rename(columns={"V_mean": "V"})


def figure_final_costs(summary_paths, task: str, out, settings: dict) -> None:
    _settings_rc(settings)
    summary = _read_summaries(summary_paths)
    violation = condition_violation(summary)
    fig = fig_final.figure_final_costs(summary.final_episodes, violation[violation["task"] == task], task=task)
    save_figure(fig, out, dpi=settings["dpi"])


def figure_training_curves(summary_paths, trace_paths, task: str, out, settings: dict) -> None:
    _settings_rc(settings)
    summary = _read_summaries(summary_paths)
    iterates = summary.iterates[summary.iterates["phase"] == "train"]
    if trace_paths:
        steps = _read_traces(trace_paths)
        if "env_steps" in steps.columns:
            iterates = iterates.merge(steps[RUN_KEYS + ["iteration", "env_steps"]], on=RUN_KEYS + ["iteration"],
                                      how="left", validate="one_to_one")
            if iterates["env_steps"].isna().any():  # a trace without some iterate: fall back to iterates
                iterates = iterates.drop(columns="env_steps")
    fig = fig_training.figure_training_curves(iterates, task=task, window=settings["smoothing_window"])
    save_figure(fig, out, dpi=settings["dpi"])


def figure_multipliers(trace_paths, out, settings: dict) -> None:
    _settings_rc(settings)
    fig = fig_training.figure_multipliers(_read_traces(trace_paths), yscale=settings["multiplier_yscale"])
    save_figure(fig, out, dpi=settings["dpi"])


def task_table(conditions_csv, task: str, out: dict, settings: dict) -> tables.Table:
    """Tables A.4 onwards: one task's per-condition table from conditions.csv."""
    table = tables.task_table(pd.read_csv(conditions_csv), task, decimals=settings["decimals"])
    save_table(table, out["csv"], out["md"], out["tex"], out.get("html"))
    return table


def figure_cdf(cdf_parquet, out, settings: dict, xmax: float) -> None:
    """Figure 2 (xmax 2) or Figure A.1 (xmax about 20) from cdf.parquet."""
    from . import fig_cdf

    _settings_rc(settings)
    save_figure(fig_cdf.figure_cdf(pd.read_parquet(cdf_parquet), xmax=float(xmax)), out, dpi=settings["dpi"])


def tier_sensitivity(iqm_csv, bootstrap_parquet, thresholds: dict, out, settings: dict):
    """The tier-sensitivity figure; returns (shares, sweep) as drawn. Tiers come from the
    metrics engine's `tier_of` with the configured thresholds (validated by the engine)."""
    from metrics import tier_of, validate_thresholds

    from . import fig_sensitivity

    thresholds = validate_thresholds(dict(thresholds), "config thresholds")
    sens = settings["sensitivity"]
    shares = fig_sensitivity.tier_shares(pd.read_parquet(bootstrap_parquet), thresholds, tier_of)
    sweep = fig_sensitivity.tier_sweep(pd.read_csv(iqm_csv), thresholds, tier_of, sens["ranges"], sens["points"])
    _settings_rc(settings)
    save_figure(fig_sensitivity.figure_tier_sensitivity(shares, sweep, thresholds), out, dpi=settings["dpi"])
    return shares, sweep
