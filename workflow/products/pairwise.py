"""The pairwise-comparison table and heat map: P(algorithm X is safer than Y) from the metrics
engine (metrics.pairwise) on stage 2's per-run metrics, with the bootstrap settings stage 2 used."""
from __future__ import annotations

import json

import numpy as np
import pandas as pd

from metrics.pairwise import SAFETY_METRICS, probability_of_improvement
from metrics.schema import PHASES

from .style import METRIC_LABELS, PHASE_LABELS, algo_label, ordered_algos
from .tablefmt import Table


def read_pairwise(inputs) -> pd.DataFrame:
    """P(X safer than Y) for the sweep: run_metrics.parquet with aggregate.json's reps and seed."""
    with open(inputs["aggregate"]) as fh:
        meta = json.load(fh)
    return probability_of_improvement(pd.read_parquet(inputs["run_metrics"]), reps=meta["reps"], seed=meta["seed"])


def pairwise_table(pairs: pd.DataFrame, decimals: int = 2) -> Table:
    """One row per phase and ordered pair (X, Y); per metric P(X safer than Y) [95 % CI]. Bold
    where the interval lies wholly above 0.5 (X is safer with 95 % confidence)."""
    wide = pairs.pivot_table(index=["phase", "algo", "other"], columns="metric", values=["p", "ci_low", "ci_high"],
                             sort=False)
    order = {a: i for i, a in enumerate(ordered_algos(pairs["algo"].unique()))}
    keys = sorted(wide.index, key=lambda k: (PHASES.index(k[0]), order[k[1]], order[k[2]]))
    cells, bold = [], []
    for key in keys:
        row = wide.loc[key]
        cells.append([f"{row[('p', m)]:.{decimals}f} [{row[('ci_low', m)]:.{decimals}f}, {row[('ci_high', m)]:.{decimals}f}]"
                      for m in SAFETY_METRICS])
        bold.append([bool(row[("ci_low", m)] > 0.5) for m in SAFETY_METRICS])
    data = pairs.sort_values(["phase", "algo", "other", "metric"], key=lambda c: c.map(PHASES.index)
                             if c.name == "phase" else c).reset_index(drop=True)
    return Table(
        title="Pairwise comparisons: probability that one algorithm is safer than another",
        row_header=["Phase", "X", "Y"],
        rows=[[PHASE_LABELS[p], algo_label(a), algo_label(b)] for p, a, b in keys],
        columns=[("P(X safer than Y)", METRIC_LABELS[m]) for m in SAFETY_METRICS],
        cells=cells, bold=bold, data=data,
        notes=["P(X safer than Y): over the (task, bound) conditions both have, the share of (seed of X, seed of Y) "
               "pairs where X's value is lower (ties count half), averaged over conditions; 0.5: neither is safer.",
               "[95 % stratified-bootstrap CI]; bold: the interval lies above 0.5."])


NO_PAIRS = "One algorithm in this sweep: no pair to compare."


def figure_pairwise(pairs: pd.DataFrame):
    """Rows: phases; columns: V, Dnorm, Dnorm+. Each panel a matrix of P(row safer than column)."""
    import matplotlib.pyplot as plt

    from .style import apply_rc

    apply_rc()
    phases = [p for p in PHASES if p in set(pairs["phase"])]
    algos = ordered_algos(pairs["algo"].unique())
    labels = [algo_label(a) for a in algos]
    n = len(algos)
    if not phases:  # a sweep of one algorithm has no pairs: say so rather than fail the sweep
        fig, ax = plt.subplots(figsize=(6, 1.2))
        ax.axis("off")
        ax.text(0.5, 0.5, NO_PAIRS, ha="center", va="center")
        return fig
    # 0.85 in per cell: four algorithms' three panels fit a page (12.4 in) at print size
    fig, axes = plt.subplots(len(phases), len(SAFETY_METRICS), squeeze=False,
                             figsize=(0.85 * n * len(SAFETY_METRICS) + 2.4, 0.8 * n * len(phases) + 1.6))
    image = None
    for r, phase in enumerate(phases):
        for c, metric in enumerate(SAFETY_METRICS):
            ax = axes[r][c]
            here = pairs[(pairs["phase"] == phase) & (pairs["metric"] == metric)]
            grid = (here.pivot_table(index="algo", columns="other", values="p", aggfunc="first")
                    .reindex(index=algos, columns=algos).to_numpy(dtype=float))
            low = (here.pivot_table(index="algo", columns="other", values="ci_low", aggfunc="first")
                   .reindex(index=algos, columns=algos).to_numpy(dtype=float))
            high = (here.pivot_table(index="algo", columns="other", values="ci_high", aggfunc="first")
                    .reindex(index=algos, columns=algos).to_numpy(dtype=float))
            image = ax.imshow(np.ma.masked_invalid(grid), cmap="RdBu", vmin=0.0, vmax=1.0)
            for i in range(n):
                for j in range(n):
                    if np.isfinite(grid[i, j]):
                        sure = low[i, j] > 0.5 or high[i, j] < 0.5  # the interval excludes 0.5
                        ax.text(j, i, f"{grid[i, j]:.2f}" + ("*" if sure else ""), ha="center", va="center",
                                color="white" if abs(grid[i, j] - 0.5) > 0.3 else "black")
            ax.set_xticks(range(n), labels, rotation=45, ha="right")
            ax.set_yticks(range(n), labels)
            ax.grid(False)
            if r == 0:
                ax.set_title(f"{METRIC_LABELS[metric]} (lower is safer)")
            if c == 0:
                ax.set_ylabel(f"{PHASE_LABELS[phase]}\nX (row)")
            if r == len(phases) - 1:
                ax.set_xlabel("Y (column)")
    fig.colorbar(image, ax=axes, shrink=0.6, label="P(X safer than Y) (probability)")
    fig.suptitle("Probability that the row's algorithm is safer than the column's (* : 95 % CI excludes 0.5)")
    return fig
