"""Build one product from files: read the metrics engine's outputs, draw or tabulate, write
atomically. One function per product, each called as `f(inputs, outputs, settings, wildcards)`
by workflow/scripts/product.py for the entry of the product table (`registry.PRODUCTS`) that
names it; see `registry` for what each argument holds.
"""
from __future__ import annotations

import numpy as np
import pandas as pd

from metrics import run_layout
from metrics.schema import FINAL_PHASES, RUN_KEYS

from . import fig_final, fig_training, setup_tables, tables
from .outputs import save_figure
from .style import apply_rc
from .tablefmt import save_table

RUN_KEYS = list(RUN_KEYS)


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
            try:
                df = df.assign(**run_layout.run_of_path(path))
            except ValueError as err:
                raise ValueError(f"{err}, and the file has no task/bound/algo/seed columns") from None
        frames.append(df)
    if not frames:
        raise ValueError("no trace files given")
    return pd.concat(frames, ignore_index=True)


def _settings_rc(settings):
    apply_rc(settings["font_size"])


def _save(table: tables.Table, out: dict) -> tables.Table:
    save_table(table, out["csv"], out["md"], out["tex"], out.get("html"))
    return table


# ---- tables --------------------------------------------------------------------------------

def _iqm_table(builder, inputs, out, settings) -> tables.Table:
    grid = setup_tables.grid_note(setup_tables.read_run_configs(inputs["runs"])) if inputs.get("runs") else None
    return _save(builder(pd.read_csv(inputs["iqm"]), pd.read_csv(inputs["tiers"]), baseline=settings["baseline"],
                         decimals=settings["decimals"], bold=settings["bold"], grid=grid), out)


def table2(inputs, out, settings, wildcards=None) -> tables.Table:
    return _iqm_table(tables.table2, inputs, out, settings)


def table_a2(inputs, out, settings, wildcards=None) -> tables.Table:
    return _iqm_table(tables.table_a2, inputs, out, settings)


def table_a3(inputs, out, settings, wildcards=None) -> tables.Table:
    return _iqm_table(tables.table_a3, inputs, out, settings)


def task_table(inputs, out, settings, wildcards) -> tables.Table:
    """Tables A.4 onwards: one task's per-condition table from conditions.csv."""
    return _save(tables.task_table(pd.read_csv(inputs["conditions"]), wildcards["task"],
                                   decimals=settings["decimals"]), out)


def table1(inputs, out, settings=None, wildcards=None) -> tables.Table:
    """Table 1: the tier definitions from the thresholds the tiers step used."""
    from metrics import load_thresholds

    return _save(setup_tables.table1(load_thresholds(inputs["thresholds"])), out)


def table_a1(inputs, out, settings=None, wildcards=None) -> tables.Table:
    """Table A.1: the hyperparameters every run recorded in its run.json."""
    return _save(setup_tables.table_a1(setup_tables.read_run_configs(inputs["runs"])), out)


# ---- figures -------------------------------------------------------------------------------

def figure1(inputs, out, settings: dict, wildcards=None) -> None:
    """Figure 1 from one run's summary: its final episodes and its per-phase V."""
    run, summary_path = settings["run"], inputs["summary"]
    summary = _read_summaries([summary_path])
    sel = np.ones(len(summary.final_episodes), bool)
    for key in RUN_KEYS:
        sel &= (summary.final_episodes[key] == (float(run[key]) if key == "bound" else run[key])).to_numpy()
    costs = summary.final_episodes[sel]
    runs = summary.runs.set_index("phase")
    violation = {phase: float(runs.loc[phase, "V"]) for phase in FINAL_PHASES if phase in runs.index}
    missing = [p for p in FINAL_PHASES if p not in violation]
    if missing:
        raise ValueError(f"{summary_path}: no {missing} phase for Figure 1's run {run}")
    _settings_rc(settings)
    fig = fig_final.figure1(costs, violation, task=run["task"], bound=float(run["bound"]), algo=run["algo"],
                            seed=int(run["seed"]))
    save_figure(fig, out, dpi=settings["dpi"])


def figure_final_costs(inputs, out, settings: dict, wildcards) -> None:
    """Figures A.7 onwards: the task's final episodes (final_episodes.parquet) and the engine's
    per-condition means and stds over seeds (condition_stats.parquet)."""
    task = wildcards["task"]
    _settings_rc(settings)
    stats = pd.read_parquet(inputs["condition_stats"])
    fig = fig_final.figure_final_costs(pd.read_parquet(inputs["final_episodes"]), stats[stats["task"] == task],
                                       task=task)
    save_figure(fig, out, dpi=settings["dpi"])


def figure_training_curves(inputs, out, settings: dict, wildcards) -> None:
    _settings_rc(settings)
    summary = _read_summaries(inputs["summaries"])
    iterates = summary.iterates[summary.iterates["phase"] == "train"]
    if inputs.get("traces"):
        steps = _read_traces(inputs["traces"])
        if "env_steps" in steps.columns:
            iterates = iterates.merge(steps[RUN_KEYS + ["iteration", "env_steps"]], on=RUN_KEYS + ["iteration"],
                                      how="left", validate="one_to_one")
            if iterates["env_steps"].isna().any():  # a trace without some iterate: fall back to iterates
                iterates = iterates.drop(columns="env_steps")
    fig = fig_training.figure_training_curves(iterates, task=wildcards["task"], window=settings["smoothing_window"])
    save_figure(fig, out, dpi=settings["dpi"])


def figure_multipliers(inputs, out, settings: dict, wildcards=None) -> None:
    _settings_rc(settings)
    fig = fig_training.figure_multipliers(_read_traces(inputs["traces"]), yscale=settings["multiplier_yscale"])
    save_figure(fig, out, dpi=settings["dpi"])


def _figure_cdf(inputs, out, settings: dict, xmax: float) -> None:
    from . import fig_cdf

    _settings_rc(settings)
    save_figure(fig_cdf.figure_cdf(pd.read_parquet(inputs["cdf"]), xmax=float(xmax)), out, dpi=settings["dpi"])


def figure2(inputs, out, settings: dict, wildcards=None) -> None:
    """Figure 2 from cdf.parquet, x up to products.cdf_xmax.figure2 (2)."""
    _figure_cdf(inputs, out, settings, settings["cdf_xmax"]["figure2"])


def figure_a1(inputs, out, settings: dict, wildcards=None) -> None:
    """Figure A.1: Figure 2 with x up to products.cdf_xmax.figureA1 (20)."""
    _figure_cdf(inputs, out, settings, settings["cdf_xmax"]["figureA1"])


def tier_sensitivity(inputs, out, settings: dict, wildcards=None):
    """The tier-sensitivity figure; returns (shares, sweep) as drawn. The shares are tiers.csv's;
    the sweep moves each threshold with the metrics engine's `tier_of` (thresholds validated
    once, when read)."""
    from metrics import load_thresholds

    from . import fig_sensitivity

    thresholds = load_thresholds(inputs["thresholds"])
    sens = settings["sensitivity"]
    shares = pd.read_csv(inputs["tiers"])
    sweep = fig_sensitivity.tier_sweep(pd.read_csv(inputs["iqm"]), thresholds, sens["ranges"], sens["points"])
    _settings_rc(settings)
    save_figure(fig_sensitivity.figure_tier_sensitivity(shares, sweep, thresholds), out, dpi=settings["dpi"])
    return shares, sweep
