"""One visual identity per algorithm, phase and metric, shared by every figure and table.

Colours come from the Okabe-Ito colour-blind-safe palette and are chosen so their grey
levels differ (black, dark blue, vermillion, orange); each algorithm also has its own line
style and marker, so figures stay readable when printed in greyscale.
"""
from __future__ import annotations

from dataclasses import dataclass

import matplotlib

matplotlib.use("Agg")  # products are rendered headless (Snakemake jobs, CI)
import matplotlib.pyplot as plt  # noqa: E402

import envs  # noqa: E402  (the task table; imports no JAX)
from algos import registry as algo_registry  # noqa: E402  (the algorithm table; imports no JAX)
from metrics.schema import METRICS  # noqa: E402
from metrics.thresholds import TIER_NAMES  # noqa: E402


@dataclass(frozen=True)
class AlgoStyle:
    label: str
    color: str
    linestyle: str | tuple
    marker: str
    hatch: str


# Grey levels (0.299 R + 0.587 G + 0.114 B): 0.00, 0.34, 0.47, 0.64. Labels: the algorithm table's.
KNOWN_ALGOS: dict[str, AlgoStyle] = {
    name: AlgoStyle(algo_registry.label(name), *look) for name, look in {
        "ppo": ("#000000", "solid", "o", ""),
        "ppo_lag": ("#0072B2", "dashed", "s", "//"),
        "focops": ("#D55E00", "dashdot", "^", "\\\\"),
        "p3o": ("#E69F00", (0, (1, 1)), "D", ".."),
    }.items()
}
ALGO_ORDER = list(KNOWN_ALGOS)

# Algorithms a user brings: further Okabe-Ito colours and styles, assigned in sorted order.
_EXTRA_COLORS = ["#56B4E9", "#009E73", "#CC79A7", "#F0E442", "#999999"]
_EXTRA_LINESTYLES = [(0, (5, 1, 1, 1, 1, 1)), (0, (8, 2)), (0, (3, 3)), (0, (1, 3)), (0, (6, 2, 2, 2))]
_EXTRA_MARKERS = ["v", "P", "X", "*", "h"]
_EXTRA_HATCHES = ["xx", "--", "++", "oo", "||"]

PHASE_LABELS = {
    "train": "Training (with noise)",
    "final_explore": "Final, with noise",
    "final_greedy": "Final, greedy",
}

# Columns of the IQM and per-task tables in the paper's order (metrics.schema.METRICS holds
# the same names in the engine's order).
TABLE_METRICS = ["R", "C", "Dnorm", "V", "Dnorm_plus"]
if sorted(TABLE_METRICS) != sorted(METRICS):
    raise ImportError(f"style.TABLE_METRICS {TABLE_METRICS} must name the engine's metrics {METRICS}")
METRIC_LABELS = {  # plain text, used in Markdown and CSV headers
    "R": "R",
    "C": "C",
    "Dnorm": "Dnorm",
    "V": "V",
    "Dnorm_plus": "Dnorm+",
}
# Which direction is better when bolding a column (tiers: higher is better).
HIGHER_IS_BETTER = {"R": True, "C": False, "Dnorm": False, "V": False, "Dnorm_plus": False, "tier": True}

# Display names of tiers 0..4 (the engine names tiers 1..4; tier 0 is unsafe).
TIER_LABELS = ["Unsafe"] + [name.capitalize() for name in TIER_NAMES]
# Tier colours run light (unsafe, peach) to dark (strict, purple) so they read in greyscale too.
TIER_COLORS = ["#fde0c5", "#bcbddc", "#9e9ac8", "#6a51a3", "#3f007d"]


BOUND_COLOR = "#CC0000"  # the bound line in every figure

def multiplier_label(algo: str) -> str:
    """What an algorithm's trace `multiplier` column holds, as the algorithm table names it."""
    return algo_registry.multiplier_label(algo) or "multiplier"


_BOUND_LINESTYLES = ["solid", "dashed", "dotted", "dashdot"]


def bound_styles(bounds) -> dict:
    """Colour and line style per bound for figures that overlay bounds: a dark-to-light
    sequential ramp (viridis, monotonic in grey level) plus line styles, so prints in
    greyscale stay readable. The smallest (strictest) bound is darkest."""
    bounds = sorted(bounds)
    cmap = matplotlib.colormaps["viridis"]
    n = len(bounds)
    points = [0.1 + 0.7 * i / max(n - 1, 1) for i in range(n)]
    return {b: (matplotlib.colors.to_hex(cmap(p)), _BOUND_LINESTYLES[i % len(_BOUND_LINESTYLES)])
            for i, (b, p) in enumerate(zip(bounds, points))}


def ordered_algos(algos) -> list[str]:
    """The paper's algorithms first in their usual order, then any others sorted."""
    algos = list(dict.fromkeys(algos))
    known = [a for a in ALGO_ORDER if a in algos]
    return known + sorted(a for a in algos if a not in KNOWN_ALGOS)


TASK_ORDER = list(envs.TASKS)


def ordered_tasks(tasks) -> list[str]:
    """The task table's order (goal, circle, push, button; with or without the CRAX
    `safe_..._point` spelling), then any others sorted."""
    def rank(task):
        short = task.removeprefix("safe_").removesuffix("_point")
        return (TASK_ORDER.index(short), task) if short in TASK_ORDER else (len(TASK_ORDER), task)
    return sorted(dict.fromkeys(tasks), key=rank)


def algo_style(algo: str, all_algos=None) -> AlgoStyle:
    """The style of one algorithm; unknown ones get a stable style from their sorted rank."""
    if algo in KNOWN_ALGOS:
        return KNOWN_ALGOS[algo]
    others = sorted(a for a in (all_algos or [algo]) if a not in KNOWN_ALGOS)
    if algo not in others:
        others = sorted(others + [algo])
    i = others.index(algo) % len(_EXTRA_COLORS)
    return AlgoStyle(algo_label(algo), _EXTRA_COLORS[i], _EXTRA_LINESTYLES[i], _EXTRA_MARKERS[i], _EXTRA_HATCHES[i])


def algo_label(algo: str) -> str:
    """The algorithm table's label (algos/registry.py); a name it does not know as it is."""
    return algo_registry.label(algo)


def task_label(task: str) -> str:
    """`safe_circle_point` or `circle` -> `Circle`; a task id with a level (runs.run_layout.task_id)
    keeps it: `safe_goal_point@l2` -> `Goal L2`."""
    name, _, level = str(task).partition("@l")
    name = name.removeprefix("safe_").removesuffix("_point").replace("_", " ").capitalize()
    return f"{name} L{level}" if level else name


def format_bound(bound: float) -> str:
    return f"{bound:g}"


_FONT_SIZE = {"base": 9.0}


def apply_rc(font_size: float | None = None) -> None:
    """Matplotlib settings for every product (sizes chosen for a single-column paper figure).

    A size given once (config `products.font_size`) is kept for later calls without one."""
    if font_size is not None:
        _FONT_SIZE["base"] = float(font_size)
    font_size = _FONT_SIZE["base"]
    plt.rcParams.update({
        "font.size": font_size,
        "axes.titlesize": font_size + 1,
        "axes.labelsize": font_size,
        "legend.fontsize": font_size - 1,
        "xtick.labelsize": font_size - 1,
        "ytick.labelsize": font_size - 1,
        "axes.spines.top": False,
        "axes.spines.right": False,
        "axes.grid": True,
        "grid.alpha": 0.3,
        "lines.linewidth": 1.5,
        "figure.constrained_layout.use": True,
        "pdf.fonttype": 42,  # embed TrueType so PDF text stays selectable
        "savefig.dpi": 150,
    })
