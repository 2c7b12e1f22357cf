"""The seed-planning figure: P(tier) and the CI widths of the tier metrics against K, per algorithm.

matplotlib belongs to the sweep extra, not to the engine's base install, so it is imported
only when a figure is drawn (inside `_matplotlib`) and its absence is a
:class:`MatplotlibMissing` the caller turns into a warning; the tables never need it.
"""

from __future__ import annotations

from .schema import PHASES

# Okabe-Ito (colour-blind safe), as the product figures use; algorithms in sorted order.
_COLORS = ["#000000", "#0072B2", "#D55E00", "#E69F00", "#56B4E9", "#009E73", "#CC79A7", "#F0E442", "#999999"]
_LABELS = {"p_tier": "P(tier = full-data tier)", "V": "V", "Dnorm": "Dnorm", "Dnorm_plus": "Dnorm+"}


class MatplotlibMissing(ImportError):
    """The figure needs matplotlib (pip install 'saferl-eval[sweep]')."""


def _matplotlib():
    try:
        from matplotlib.backends.backend_agg import FigureCanvasAgg
        from matplotlib.figure import Figure
    except ImportError as err:
        raise MatplotlibMissing(f"the seed-planning figure needs matplotlib ({err}; pip install 'saferl-eval[sweep]')") from None
    return Figure, FigureCanvasAgg


def plan_figure(plan):
    """A matplotlib Figure (Agg canvas, no pyplot state): one column per phase; the top row
    P(tier at K = full-data tier) with the target, one row per tier metric's 95 % CI width
    of its IQM. Solid: resampled K; dashed: extrapolated K; the dot marks the seeds at hand."""
    Figure, Canvas = _matplotlib()
    table = plan.table
    widths = [c for c in table.columns if c.startswith("ci_width_")]
    rows = ["p_tier", *widths]
    phases = [p for p in PHASES if p in set(table["phase"])]
    algos = sorted(set(table["algo"]))
    fig = Figure(figsize=(3.4 * len(phases) + 0.6, 2.1 * len(rows) + 0.8), layout="constrained")
    Canvas(fig)
    axes = fig.subplots(len(rows), len(phases), sharex=True, squeeze=False)
    for j, phase in enumerate(phases):
        axes[0, j].set_title(phase)
        for i, col in enumerate(rows):
            ax = axes[i, j]
            for a, algo in enumerate(algos):
                curve = table[(table["algo"] == algo) & (table["phase"] == phase)]
                if curve.empty:
                    continue
                color = _COLORS[a % len(_COLORS)]
                have = curve[~curve["extrapolated"]]
                past = curve[curve["k"] >= (have["k"].max() if len(have) else 0)]  # joined at K_have
                ax.plot(have["k"], have[col], color=color, lw=1.6, label=algo if (i, j) == (0, 0) else None)
                ax.plot(past["k"], past[col], color=color, lw=1.2, ls="--")
                if len(have):
                    ax.plot(have["k"].iloc[-1], have[col].iloc[-1], "o", color=color, ms=3.5)
            if col == "p_tier":
                ax.axhline(plan.meta["target"], color="0.5", lw=0.8, ls=":")
                ax.set_ylim(-0.02, 1.02)
            if j == 0:
                metric = col.removeprefix("ci_width_")
                ax.set_ylabel(_LABELS["p_tier"] if col == "p_tier" else f"95 % CI width\nof IQM({_LABELS.get(metric, metric)})")
            if i == len(rows) - 1:
                ax.set_xlabel("seeds per (task, bound), K")
            ax.grid(alpha=0.3, lw=0.5)
    fig.legend(loc="outside lower center", ncols=min(len(algos), 6), frameon=False,
               title=f"solid: resampled from the seeds at hand (dot: seeds at hand); dashed: extrapolated; "
                     f"dotted: target {plan.meta['target']:g}")
    return fig


def save_plan_figure(plan, path, dpi: int = 150) -> None:
    """Draw :func:`plan_figure` into a PNG at path (the caller makes the write atomic)."""
    plan_figure(plan).savefig(path, dpi=dpi, format="png")
