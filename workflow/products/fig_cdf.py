"""Figure 2 and Figure A.1: empirical CDFs of the normalised cost excess (c - d)/d over all
episodes of all (task, bound, seed) instances (docs/protocol.md, the ECDF), three panels (training, final
with noise, final greedy), one curve per algorithm with its stratified-bootstrap 95 % band.

Input: the metrics engine's cdf.parquet (algo, phase, kappa, F, F_low, F_high), exact at its
grid points kappa = -1.00, -0.99, ..., 20.00.
"""
from __future__ import annotations

import pandas as pd
import matplotlib.pyplot as plt

from metrics.schema import PHASES, require_columns

from .style import PHASE_LABELS, algo_label, algo_style, apply_rc, ordered_algos


def figure_cdf(cdf: pd.DataFrame, *, xmax: float, xmin: float = -1.0):
    require_columns(cdf, ("algo", "phase", "kappa", "F", "F_low", "F_high"), "cdf.parquet")
    if xmax <= 0:
        raise ValueError(f"CDF figure: x limit must be > 0 (the bound is at 0), got {xmax}")
    phases = [p for p in PHASES if p in set(cdf["phase"])]
    if not phases:
        raise ValueError(f"cdf.parquet: no known phase among {sorted(set(cdf['phase']))}")
    apply_rc()
    algos = ordered_algos(cdf["algo"].unique())
    fig, axes = plt.subplots(1, len(phases), figsize=(3.0 * len(phases) + 1.2, 3.1), squeeze=False, sharey=True)
    for ax, phase in zip(axes[0], phases):
        for algo in algos:
            rows = cdf[(cdf["algo"] == algo) & (cdf["phase"] == phase)].sort_values("kappa")
            rows = rows[(rows["kappa"] >= xmin) & (rows["kappa"] <= xmax)]
            if rows.empty:
                continue
            style = algo_style(algo, algos)
            ax.fill_between(rows["kappa"], rows["F_low"], rows["F_high"], step="post", color=style.color, alpha=0.2,
                            linewidth=0)
            ax.step(rows["kappa"], rows["F"], where="post", color=style.color, linestyle=style.linestyle,
                    label=algo_label(algo))
        ax.axvline(0.0, color="black", linestyle="--", linewidth=1.0, label="bound (c = d)")
        ax.set_xlim(xmin, xmax)
        ax.set_ylim(0, 1.02)
        ax.set_title(PHASE_LABELS[phase])
    axes[0][0].set_ylabel("F(x): fraction of episodes with (c \u2212 d) / d \u2264 x")
    fig.supxlabel("x = (c \u2212 d) / d: episode cost c above the bound d, in multiples of d (0 = at the bound)",
                  fontsize=plt.rcParams["axes.labelsize"])
    fig.get_layout_engine().set(wspace=0.06)
    handles, labels = axes[0][0].get_legend_handles_labels()
    fig.legend(handles, labels, loc="outside right center", frameon=False)
    return fig
