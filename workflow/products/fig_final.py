"""Final-policy figures: Figure 1 (one seed, noise vs greedy) and Figures A.7 onwards
(per task: final episode-cost distributions, noise vs greedy, per algorithm and bound).

Both take a table of final-phase episode costs (columns task, bound, algo, seed, phase,
episode, cost; phases final_explore and final_greedy) and the metrics the engine computed
(a run's V; per condition the means and stds over seeds); nothing here measures safety itself.
"""
from __future__ import annotations

import numpy as np
import pandas as pd
import matplotlib.pyplot as plt
from matplotlib.lines import Line2D
from matplotlib.ticker import MaxNLocator
from matplotlib.patches import Patch

from metrics.schema import FINAL_PHASES, require_columns as _require

from .style import BOUND_COLOR, algo_label, algo_style, apply_rc, format_bound, ordered_algos, task_label

COST_AXIS = "episode cost c (sum of step costs)"  # one episode's cost; C is a mean of them


def figure1(costs: pd.DataFrame, violation: dict[str, float], *, task: str, bound: float, algo: str,
            seed: int, why: str = ""):
    """One run's final episode costs with noise and greedy, the bound d marked, V in the legend.

    `costs`: that run's final-phase rows (phase, episode, cost); `violation`: V per phase;
    `why`: a second title line saying why this run is shown.
    """
    _require(costs, ["phase", "episode", "cost"], "figure 1 episode costs")
    apply_rc()
    style = algo_style(algo)
    fig, ax = plt.subplots(figsize=(6.0, 3.2))
    looks = {
        "final_explore": dict(marker="o", facecolors="none", edgecolors=style.color, s=22, linewidths=1.0),
        "final_greedy": dict(marker="^", facecolors="#777777", edgecolors="#222222", s=22, linewidths=0.6),
    }
    names = {"final_explore": "with exploration noise", "final_greedy": "greedy (noise off)"}
    for phase in FINAL_PHASES:
        rows = costs[costs["phase"] == phase].sort_values("episode")
        if rows.empty:
            raise ValueError(f"figure 1: no {phase} episodes for {task} d={bound} {algo} seed {seed}")
        ax.scatter(rows["episode"], rows["cost"], label=f"{names[phase]} (V = {100 * violation[phase]:.0f} %)",
                   zorder=3, **looks[phase])
    ax.axhline(bound, color=BOUND_COLOR, linestyle="--", linewidth=1.2, label=f"bound d = {format_bound(bound)}",
               zorder=2)
    ax.xaxis.set_major_locator(MaxNLocator(integer=True))
    ax.set_xlabel("final evaluation episode (index)")
    ax.set_ylabel(COST_AXIS)
    ax.set_ylim(bottom=0)
    ax.set_title(f"{algo_label(algo)} on {task_label(task)}, d = {format_bound(bound)}, seed {seed}"
                 + (f"\n{why}" if why else ""))
    ax.legend(loc="upper left", bbox_to_anchor=(1.01, 1.0), frameon=False)
    return fig


def _percent(v: float) -> str:
    """V as a percentage with three significant digits: 100, 41.3, 0.4 (never a rounded-away 0)."""
    return f"{100 * v:.3g}" if np.isfinite(v) else "-"


def annotation(v: float, dnorm_plus: float) -> str:
    """The text above one box: V in percent and Dnorm+ (both means over seeds)."""
    return f"V {_percent(v)} %, D+ {dnorm_plus:.3f}" if np.isfinite(dnorm_plus) else f"V {_percent(v)} %, D+ -"


def _mark_outliers_above(ax, fliers: dict, top: float) -> float:
    """The y limit for the bulk of the data: `top`, or the highest outlier when none lies far
    above it. Outliers a limit of `top` cuts off are marked at the panel's top edge, an arrow
    with their count (text gid "outliers"), so a few huge episode costs no longer flatten
    every box to a line at 0."""
    highest = max((float(np.max(v)) for v in fliers.values() if len(v)), default=0.0)
    if highest <= 1.25 * top:
        return max(top, highest * 1.02)
    for pos, values in fliers.items():
        above = np.asarray(values)[np.asarray(values) > top]
        if above.size:
            # inside the panel, just under its top edge: the V / D+ note sits above the edge
            ax.annotate("", (pos, 0.985), xycoords=("data", "axes fraction"), xytext=(pos, 0.93),
                        textcoords=("data", "axes fraction"), arrowprops=dict(arrowstyle="-|>", color="black", lw=1.0))
            ax.annotate(f"{above.size} up to {above.max():.3g}", (pos, 0.96), xycoords=("data", "axes fraction"),
                        xytext=(4, 0), textcoords="offset points", ha="left", va="center", fontsize=6.5,
                        gid="outliers")
    return top


def _tallest_points(fig, texts) -> float:
    """Height in points of the tallest of `texts` as drawn (a rotated label's length)."""
    renderer = fig.canvas.get_renderer()
    return max((t.get_window_extent(renderer).height * 72.0 / fig.dpi for t in texts), default=0.0)


def figure_final_costs(costs: pd.DataFrame, stats: pd.DataFrame, *, task: str):
    """Figures A.7 onwards: one panel per bound; per algorithm the final episode costs with
    noise (hatched, open) beside greedy (filled).

    Each box is the distribution of all seeds' final episode costs (whiskers 1.5 IQR, outliers
    as dots; the y axis shows the bulk, and outliers far above it are counted at its top); the
    marker on it is the mean over seeds of each seed's mean cost C with a 1-sigma error bar
    (the sample std over seeds); above each box, V in percent and Dnorm+ (means over seeds).
    `stats`: the engine's per-condition statistics (condition_stats.parquet) for this task,
    columns bound, algo, phase, C_mean, C_std, V_mean, Dnorm_plus_mean.
    """
    _require(costs, ["task", "bound", "algo", "phase", "cost"], f"final episode costs of {task}")
    _require(stats, ["bound", "algo", "phase", "C_mean", "C_std", "V_mean", "Dnorm_plus_mean"],
             f"condition statistics of {task}")
    costs = costs[(costs["task"] == task) & costs["phase"].isin(FINAL_PHASES)]
    if costs.empty:
        raise ValueError(f"figure of final costs: no final-phase episodes for task {task!r}")
    apply_rc()
    bounds = sorted(costs["bound"].unique())
    algos = ordered_algos(costs["algo"].unique())
    stat_of = stats.set_index(["bound", "algo", "phase"])
    width = max(3.0, 0.8 * len(algos) + 0.8)
    fig, axes = plt.subplots(1, len(bounds), figsize=(max(6.4, width * len(bounds)), 4.3), squeeze=False)
    notes = []  # the rotated V / D+ texts above the boxes, which the panel titles must clear
    for ax, bound in zip(axes[0], bounds):
        here = costs[costs["bound"] == bound]
        top, fliers = bound, {}  # the axis shows the bulk: whiskers, error bars, the bound
        for i, algo in enumerate(algos):
            style = algo_style(algo, algos)
            for j, phase in enumerate(FINAL_PHASES):
                vals = here[(here["algo"] == algo) & (here["phase"] == phase)]["cost"].to_numpy()
                if vals.size == 0:
                    continue
                pos = i + (j - 0.5) * 0.4
                greedy = phase == "final_greedy"
                box = ax.boxplot(vals, positions=[pos], widths=0.32, patch_artist=True, showfliers=True,
                                 flierprops=dict(marker=".", markersize=2, markerfacecolor=style.color,
                                                 markeredgecolor=style.color, alpha=0.6),
                                 medianprops=dict(color=style.color if not greedy else "white", linewidth=1.0),
                                 whiskerprops=dict(color=style.color), capprops=dict(color=style.color))
                top = max(top, float(np.max(box["whiskers"][1].get_ydata())))
                fliers[pos] = box["fliers"][0].get_ydata()
                patch = box["boxes"][0]
                patch.set_edgecolor(style.color)
                patch.set_facecolor(style.color if greedy else "white")
                patch.set_alpha(0.45 if greedy else 1.0)
                if not greedy:
                    patch.set_hatch(style.hatch or "//")
                if (bound, algo, phase) not in stat_of.index:
                    raise ValueError(f"condition statistics: no row for task={task!r}, bound={bound:g}, "
                                     f"algo={algo!r}, phase={phase!r}")
                row = stat_of.loc[(bound, algo, phase)]
                mean, std = float(row["C_mean"]), float(row["C_std"])
                bar = ax.errorbar([pos], [mean], yerr=[std] if np.isfinite(std) else None, fmt="o", markersize=4,
                                  color="black", markerfacecolor="white" if greedy else "black", capsize=3,
                                  elinewidth=1.2, zorder=4)
                bar.set_label(f"{algo}|{phase}")  # how tests find it; not shown in the legend
                top = max(top, mean + (std if np.isfinite(std) else 0.0))
                notes.append(ax.annotate(annotation(float(row["V_mean"]), float(row["Dnorm_plus_mean"])), (pos, 1.0),
                                         xycoords=("data", "axes fraction"), ha="center", va="bottom", fontsize=6.5,
                                         rotation=90))
        ax.axhline(bound, color=BOUND_COLOR, linestyle="--", linewidth=1.0)
        ax.set_xticks(range(len(algos)), [algo_label(a) for a in algos], rotation=30, ha="right")
        ax.set_xlim(-0.6, len(algos) - 0.4)
        ax.set_ylim(bottom=0, top=_mark_outliers_above(ax, fliers, top * 1.08))
        ax.grid(axis="x", visible=False)
    pad = _tallest_points(fig, notes) + 4
    for ax, bound in zip(axes[0], bounds):
        ax.set_title(f"d = {format_bound(bound)}", pad=pad)
    axes[0][0].set_ylabel(COST_AXIS)
    handles = [Patch(facecolor="white", edgecolor="black", hatch="//", label="with noise"),
               Patch(facecolor="#777777", edgecolor="black", alpha=0.45, label="greedy"),
               Line2D([], [], color="black", marker="o", linestyle="-", markersize=4,
                      label="mean over seeds ± 1 std"),
               Line2D([], [], color=BOUND_COLOR, linestyle="--", label="bound d"),
               Line2D([], [], color="black", marker="^", linestyle="", markersize=5,
                      label="outliers above the axis: count, highest")]
    fig.legend(handles=handles, loc="outside lower center", ncols=3, frameon=False,
               title="boxes: all seeds' final episode costs\nabove each box: violation rate V and "
                     "D+ = Dnorm+ (means over seeds)")
    fig.suptitle(f"{task_label(task)}: final episode costs, exploration noise vs greedy")
    return fig
