"""Final-policy figures: Figure 1 (one seed, noise vs greedy) and Figures A.7 onwards
(per task: final episode-cost distributions, noise vs greedy, per algorithm and bound).

Both take a table of final-phase episode costs (columns task, bound, algo, seed, phase,
episode, cost; phases final_explore and final_greedy) and violation rates computed by the
metrics engine; nothing here measures safety itself.
"""
from __future__ import annotations

import numpy as np
import pandas as pd
import matplotlib.pyplot as plt
from matplotlib.lines import Line2D
from matplotlib.ticker import MaxNLocator
from matplotlib.patches import Patch

from .style import algo_label, algo_style, apply_rc, format_bound, ordered_algos, task_label

FINAL_PHASES = ["final_explore", "final_greedy"]
COST_AXIS = "episode cost C (sum of step costs)"
BOUND_COLOR = "#CC0000"


def _require(df, columns, what):
    missing = [c for c in columns if c not in df.columns]
    if missing:
        raise ValueError(f"{what}: missing column(s) {missing}; has {list(df.columns)}")


def figure1(costs: pd.DataFrame, violation: dict[str, float], *, task: str, bound: float, algo: str,
            seed: int):
    """One run's final episode costs with noise and greedy, the bound d marked, V in the legend.

    `costs`: that run's final-phase rows (phase, episode, cost); `violation`: V per phase.
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
    ax.set_title(f"{algo_label(algo)} on {task_label(task)}, d = {format_bound(bound)}, seed {seed}")
    ax.legend(loc="upper left", bbox_to_anchor=(1.01, 1.0), frameon=False)
    return fig


def figure_final_costs(costs: pd.DataFrame, violation: pd.DataFrame, *, task: str):
    """One panel per bound; per algorithm a box of final episode costs with noise (hatched,
    open) beside one greedy (filled), all seeds pooled; the mean-over-seeds V above each box.

    `violation`: rows (bound, algo, phase, V) for this task, from the metrics engine.
    """
    _require(costs, ["task", "bound", "algo", "phase", "cost"], f"final episode costs of {task}")
    _require(violation, ["bound", "algo", "phase", "V"], f"violation rates of {task}")
    costs = costs[(costs["task"] == task) & costs["phase"].isin(FINAL_PHASES)]
    if costs.empty:
        raise ValueError(f"figure of final costs: no final-phase episodes for task {task!r}")
    apply_rc()
    bounds = sorted(costs["bound"].unique())
    algos = ordered_algos(costs["algo"].unique())
    v_of = violation.set_index(["bound", "algo", "phase"])["V"]
    width = max(3.0, 0.75 * len(algos) + 0.8)
    fig, axes = plt.subplots(1, len(bounds), figsize=(max(6.4, width * len(bounds)), 3.9), squeeze=False,
                             sharey=True)
    for ax, bound in zip(axes[0], bounds):
        here = costs[costs["bound"] == bound]
        top = float(here["cost"].max()) if len(here) else bound
        for i, algo in enumerate(algos):
            style = algo_style(algo, algos)
            for j, phase in enumerate(FINAL_PHASES):
                vals = here[(here["algo"] == algo) & (here["phase"] == phase)]["cost"].to_numpy()
                if vals.size == 0:
                    continue
                pos = i + (j - 0.5) * 0.36
                box = ax.boxplot(vals, positions=[pos], widths=0.3, patch_artist=True, showfliers=True,
                                 flierprops=dict(marker=".", markersize=2, markerfacecolor=style.color,
                                                 markeredgecolor=style.color),
                                 medianprops=dict(color="black" if phase == "final_explore" else "white"),
                                 whiskerprops=dict(color=style.color), capprops=dict(color=style.color))
                patch = box["boxes"][0]
                patch.set_edgecolor(style.color)
                if phase == "final_explore":
                    patch.set_facecolor("white")
                    patch.set_hatch(style.hatch or "//")
                else:
                    patch.set_facecolor(style.color)
                v = v_of.get((bound, algo, phase), np.nan)
                ax.annotate(f"{v:.2f}" if np.isfinite(v) else "-", (pos, 1.0), xycoords=("data", "axes fraction"),
                            ha="center", va="bottom", fontsize=7, rotation=90)
        ax.axhline(bound, color=BOUND_COLOR, linestyle="--", linewidth=1.0)
        ax.set_xticks(range(len(algos)), [algo_label(a) for a in algos], rotation=30, ha="right")
        ax.set_xlim(-0.6, len(algos) - 0.4)
        ax.set_title(f"d = {format_bound(bound)}", pad=26)
        ax.set_ylim(bottom=0, top=max(top, bound) * 1.08)
        ax.grid(axis="x", visible=False)
    axes[0][0].set_ylabel(COST_AXIS)
    handles = [Patch(facecolor="white", edgecolor="black", hatch="//", label="with noise"),
               Patch(facecolor="#777777", edgecolor="black", label="greedy"),
               Line2D([], [], color=BOUND_COLOR, linestyle="--", label="bound d")]
    fig.legend(handles=handles, loc="outside lower center", ncols=3, frameon=False,
               title="violation rate V (mean over seeds) above each box")
    fig.suptitle(f"{task_label(task)}: final episode costs, exploration noise vs greedy")
    return fig
