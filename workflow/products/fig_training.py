"""Training-time figures: Figure A.2 (multiplier trajectories) and Figures A.3 onwards
(per task: return and cost training curves).

Curves are smoothed per seed with a trailing moving average (window 5 by default, config
`products.smoothing_window`), then shown as the mean over seeds with +- 1 sample std shaded.
The x axis is environment steps when the input has an `env_steps` column, else the iterate.
"""
from __future__ import annotations

import numpy as np
import pandas as pd
import matplotlib.pyplot as plt

from metrics.schema import require_columns as _require

from .style import (BOUND_COLOR, algo_label, algo_style, apply_rc, bound_styles, format_bound, multiplier_label,
                    ordered_algos, ordered_tasks, task_label)


def seed_band(df: pd.DataFrame, value: str, x: str, window: int) -> pd.DataFrame:
    """Per x: mean and sample std over seeds of the per-seed trailing moving average of `value`.

    Rows need columns seed, x and value (one group of one task/bound/algo). A single seed
    has std 0 (no band), not NaN.
    """
    if window < 1:
        raise ValueError(f"smoothing window must be >= 1, got {window}")
    df = df.sort_values(["seed", x])
    smooth = df.groupby("seed", sort=False)[value].transform(lambda s: s.rolling(window, min_periods=1).mean())
    stats = pd.DataFrame({x: df[x].to_numpy(), "v": smooth.to_numpy()}).groupby(x)["v"].agg(["mean", "std", "count"])
    stats["std"] = stats["std"].fillna(0.0)
    return stats.reset_index()


def _x_column(df):
    return ("env_steps", "environment steps") if "env_steps" in df.columns else ("iteration", "logged iterate j")


def _format_steps(ax, xmax: float) -> None:
    """Step counts of 10^4 and more as a x 10^k offset, so long tick labels never collide
    (smaller axes are left exactly as matplotlib draws them)."""
    if xmax >= 1e4:
        ax.ticklabel_format(axis="x", style="sci", scilimits=(-3, 4), useMathText=True)


def _plot_band(ax, stats, x, algo, algos):
    style = algo_style(algo, algos)
    ax.plot(stats[x], stats["mean"], color=style.color, linestyle=style.linestyle, label=algo_label(algo))
    ax.fill_between(stats[x], stats["mean"] - stats["std"], stats["mean"] + stats["std"],
                    color=style.color, alpha=0.18, linewidth=0)


def figure_training_curves(per_iterate: pd.DataFrame, *, task: str, window: int = 5):
    """Rows: mean episode return R and mean episode cost C per iterate (training phase);
    columns: bounds; one curve per algorithm; the bound drawn on the cost panels."""
    _require(per_iterate, ["task", "bound", "algo", "seed", "R", "C"], f"per-iterate metrics of {task}")
    df = per_iterate[per_iterate["task"] == task]
    if "phase" in df.columns:
        df = df[df["phase"] == "train"]
    if df.empty:
        raise ValueError(f"training curves: no training iterates for task {task!r}")
    x, x_label = _x_column(df)
    apply_rc()
    bounds = sorted(df["bound"].unique())
    algos = ordered_algos(df["algo"].unique())
    fig, axes = plt.subplots(2, len(bounds), figsize=(max(6.4, 3.2 * len(bounds) + 1.0), 5.0), squeeze=False, sharex="col")
    for col, bound in enumerate(bounds):
        for algo in algos:
            group = df[(df["bound"] == bound) & (df["algo"] == algo)]
            if group.empty:
                continue
            for row, metric in enumerate(["R", "C"]):
                _plot_band(axes[row][col], seed_band(group, metric, x, window), x, algo, algos)
        axes[1][col].axhline(bound, color=BOUND_COLOR, linestyle="--", linewidth=1.0, label="bound d")
        axes[0][col].set_title(f"d = {format_bound(bound)}")
        axes[1][col].set_xlabel(x_label)
        _format_steps(axes[1][col], float(df[x].max()))
    axes[0][0].set_ylabel("episode return R")
    axes[1][0].set_ylabel("episode cost C (sum of step costs)")
    handles, labels = axes[1][0].get_legend_handles_labels()
    fig.legend(handles, labels, loc="outside right center", frameon=False)
    fig.suptitle(f"{task_label(task)}: training curves\n(moving average over {window} iterates, "
                 f"mean \u00b1 1 std over seeds)")
    return fig


def figure_multipliers(traces: pd.DataFrame, *, yscale: str = "linear"):
    """Figure A.2: the multiplier over training, one panel per task (rows) and algorithm with a
    multiplier (columns: PPO-Lag's lambda first, as the paper draws it; P3O's kappa and FOCOPS's
    nu are different quantities, so each has its own column and y axis, labelled with what the
    algorithm table says its multiplier is). In each panel one
    curve per bound, mean +- 1 sample std over seeds, so the bounds compare at a glance."""
    _require(traces, ["task", "bound", "algo", "seed", "iteration", "multiplier"], "traces")
    df = traces[np.isfinite(traces["multiplier"].astype(float))]
    if df.empty:
        raise ValueError("multiplier figure: no algorithm has a finite multiplier in any trace")
    x, x_label = _x_column(df)
    apply_rc()
    tasks = ordered_tasks(df["task"].unique())
    algos = ordered_algos(df["algo"].unique())
    bounds = sorted(df["bound"].unique())
    looks = bound_styles(bounds)
    fig, axes = plt.subplots(len(tasks), len(algos), figsize=(max(5.0, 3.1 * len(algos) + 1.4), 2.3 * len(tasks) + 1.0),
                             squeeze=False, sharex="col")
    for r, task in enumerate(tasks):
        for c, algo in enumerate(algos):
            ax = axes[r][c]
            here = df[(df["task"] == task) & (df["algo"] == algo)]
            for bound in bounds:
                group = here[here["bound"] == bound]
                if group.empty:
                    continue
                stats = seed_band(group, "multiplier", x, 1)
                color, linestyle = looks[bound]
                ax.plot(stats[x], stats["mean"], color=color, linestyle=linestyle, label=f"d = {format_bound(bound)}")
                ax.fill_between(stats[x], stats["mean"] - stats["std"], stats["mean"] + stats["std"], color=color,
                                alpha=0.18, linewidth=0)
            if yscale == "symlog":
                ax.set_yscale("symlog", linthresh=0.1)
                if len(here):  # keep 0 and the linear range in view, even when every value is 0
                    ax.set_ylim(min(-0.02, float(here["multiplier"].min()) * 1.3),
                                max(0.1, float(here["multiplier"].max()) * 1.3))
            else:
                ax.set_yscale(yscale)
                if yscale == "linear" and len(here) and float(here["multiplier"].min()) >= 0:
                    ax.set_ylim(bottom=0)  # the multipliers are never negative
            if r == 0:
                ax.set_title(algo_label(algo))
            if r == len(tasks) - 1:
                ax.set_xlabel(x_label)
                _format_steps(ax, float(df[x].max()))
            # each algorithm's own quantity (the algorithm table's name for it), the task left of each row
            ax.set_ylabel(f"{task_label(task)}\n{multiplier_label(algo)}" if c == 0 else multiplier_label(algo))
    seen = {}
    for ax in axes.flat:
        for h, label in zip(*ax.get_legend_handles_labels()):
            seen.setdefault(label, h)
    fig.legend(list(seen.values()), list(seen.keys()), loc="outside right center", frameon=False, title="bound")
    fig.suptitle("Multiplier trajectories over training, per bound\nmean \u00b1 1 std over seeds")
    return fig
