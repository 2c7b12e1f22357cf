"""The tier-sensitivity view (a figure none of the paper's anchors has).

Rows are phases. The first column shows, per algorithm, the bootstrap distribution over
tiers (share of replicates in tiers 0..4). Each further column moves one threshold
(tier.metric, e.g. moderate.V) over a range with every other threshold kept, and colours
the tier the algorithm's IQMs would get at each value; a dashed line marks the configured
value. A colour change close to the dashed line means the tier hinges on that threshold.
Tiers come from the metrics engine's `tier_of`; the tier distribution is tiers.csv's.
"""
from __future__ import annotations

import copy
import numpy as np
import pandas as pd
import matplotlib.pyplot as plt
from matplotlib import patheffects
from matplotlib.colors import BoundaryNorm, ListedColormap
from matplotlib.patches import Patch
from matplotlib.ticker import MaxNLocator

from metrics.schema import PHASES
from metrics.thresholds import N_TIERS, tier_of

from .style import METRIC_LABELS, PHASE_LABELS, TIER_COLORS, TIER_LABELS, algo_label, apply_rc, ordered_algos


def threshold_keys(thresholds: dict) -> list[tuple[str, str]]:
    return [(tier, metric) for tier, limits in thresholds.items() for metric in limits]


def sweep_range(thresholds: dict, tier: str, metric: str, ranges: dict, points: int) -> np.ndarray:
    """Values of one threshold to try: the configured range, else +-0.5 around the current value
    (never below 0 for V or Dnorm+, never above 1 for V)."""
    key = f"{tier}.{metric}"
    if key in ranges:
        low, high = ranges[key]
    else:
        value = float(thresholds[tier][metric])
        low, high = value - 0.5, value + 0.5
        if metric in ("V", "Dnorm_plus"):
            low = max(low, 0.0)
        if metric == "V":
            high = min(high, 1.0)
    return np.linspace(float(low), float(high), points)


def tier_sweep(iqm: pd.DataFrame, thresholds: dict, ranges: dict, points: int) -> pd.DataFrame:
    """Tier of every (algo, phase) as each threshold moves: rows algo, phase, threshold,
    value, tier. `iqm` is iqm.csv (algo, phase, metric, iqm); `thresholds` as
    `metrics.validate_thresholds` returns them (moved values stay plain numbers)."""
    wide = iqm.pivot_table(index=["algo", "phase"], columns="metric", values="iqm", aggfunc="first")
    values = {m: wide[m].to_numpy(dtype=float) for m in wide.columns}
    rows = []
    for tier, metric in threshold_keys(thresholds):
        for x in sweep_range(thresholds, tier, metric, ranges, points):
            moved = copy.deepcopy(thresholds)
            moved[tier][metric] = float(x)
            tiers = np.asarray(tier_of(values, moved, validate=False))
            for (algo, phase), t in zip(wide.index, tiers):
                rows.append((algo, phase, f"{tier}.{metric}", float(x), int(t)))
    return pd.DataFrame(rows, columns=["algo", "phase", "threshold", "value", "tier"])


def figure_tier_sensitivity(shares: pd.DataFrame, sweep: pd.DataFrame, thresholds: dict):
    apply_rc()
    phases = [p for p in PHASES if p in set(shares["phase"])]
    algos = ordered_algos(shares["algo"].unique())
    keys = [f"{t}.{m}" for t, m in threshold_keys(thresholds)]
    cmap = ListedColormap(TIER_COLORS)
    norm = BoundaryNorm(np.arange(-0.5, N_TIERS + 0.5), N_TIERS)
    n_cols = 1 + len(keys)
    row_height = max(0.45 * len(algos), 1.4)  # room for a two-line phase label even with few algorithms
    # 1.55 in per panel: seven panels fit a page (and the report's column) at print size, so
    # the text reads at the configured font size rather than scaled down
    fig, axes = plt.subplots(len(phases), n_cols, figsize=(1.55 * n_cols + 1.0, row_height * len(phases) + 2.2),
                             squeeze=False, sharey=True)
    y = np.arange(len(algos))
    for r, phase in enumerate(phases):
        ax = axes[r][0]
        here = shares[shares["phase"] == phase].set_index("algo").reindex(algos)
        left = np.zeros(len(algos))
        for k in range(N_TIERS):
            width = here[f"p_tier{k}"].fillna(0).to_numpy()
            ax.barh(y, width, left=left, color=TIER_COLORS[k], edgecolor="#444444", linewidth=0.4, height=0.7)
            left += width
        ax.set_xlim(0, 1)
        ax.set_xticks([0, 0.5, 1], ["0", "0.5", "1"])
        ax.set_yticks(y, [algo_label(a) for a in algos])
        if r == 0:
            ax.invert_yaxis()  # first algorithm on top; the y axis is shared, so once is enough
        ax.set_ylabel(PHASE_LABELS[phase].replace(", ", ",\n").replace(" (", "\n("))
        ax.grid(False)
        if r == len(phases) - 1:
            ax.set_xlabel("share of bootstrap\nreplicates")
        if r == 0:
            ax.set_title("tier distribution")
        for c, key in enumerate(keys, start=1):
            ax = axes[r][c]
            cur = sweep[(sweep["phase"] == phase) & (sweep["threshold"] == key)]
            xs = np.sort(cur["value"].unique())
            grid = (cur.pivot_table(index="algo", columns="value", values="tier", aggfunc="first")
                    .reindex(index=algos, columns=xs).to_numpy(dtype=float))
            edges = np.concatenate([[xs[0]], (xs[1:] + xs[:-1]) / 2, [xs[-1]]])
            ax.pcolormesh(edges, np.arange(len(algos) + 1) - 0.5, np.ma.masked_invalid(grid), cmap=cmap, norm=norm)
            tier, metric = key.split(".")
            # white dashes edged in black: visible on the lightest and the darkest tier colour
            ax.axvline(float(thresholds[tier][metric]), color="white", linestyle="--", linewidth=1.2,
                       path_effects=[patheffects.withStroke(linewidth=2.6, foreground="black")])
            ax.set_xlim(xs[0] - 0.03 * (xs[-1] - xs[0]), xs[-1])  # a margin so a line at the range's start shows
            ax.xaxis.set_major_locator(MaxNLocator(3))  # three ticks keep a narrow panel's labels apart
            ax.grid(False)
            if r == 0:
                ax.set_title(f"{tier}:\nIQM({METRIC_LABELS[metric]}) \u2264 x", fontsize=plt.rcParams["font.size"])
            if r == len(phases) - 1:
                ax.set_xlabel("threshold x")
    handles = [Patch(facecolor=TIER_COLORS[k], edgecolor="#444444", label=f"{k} {TIER_LABELS[k]}") for k in range(N_TIERS)]
    handles.append(plt.Line2D([], [], color="white", linestyle="--", linewidth=1.2, label="configured threshold",
                              path_effects=[patheffects.withStroke(linewidth=2.6, foreground="black")]))
    fig.legend(handles=handles, loc="outside lower center", ncols=N_TIERS + 1, frameon=False, title="tier",
               columnspacing=1.0, handlelength=1.5)
    fig.suptitle("Tier sensitivity: bootstrap tier distribution, and the tier as one threshold moves")
    return fig
