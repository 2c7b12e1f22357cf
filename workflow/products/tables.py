"""Table 2, Table A.2, Table A.3 (IQM tables) and the per-task tables (A.4 onwards).

Inputs are the metrics engine's outputs as data frames: `iqm.csv` (algo, phase, metric, iqm,
ci_low, ci_high), `tiers.csv` (algo, phase, tier, p_tier0..p_tier4) and `conditions.csv`.
Numbers are never recomputed here; the CSV of every table holds them unrounded.

Bolding (Table 2, A.2, A.3), config `products.bold`: with the paper's rule (`paper`, the
default) the best value in each column among the algorithms other than the unconstrained
baseline (config `products.baseline`, PPO) is bold; the stricter `safe` rule also requires
tier >= 1 (Minimal: IQM(Dnorm) <= 0) in that column's phase. Best is the highest R or tier
and the lowest C, Dnorm, V or Dnorm+; tier 0 is never bold. Ties on unrounded values are all bold.
"""
from __future__ import annotations


import numpy as np
import pandas as pd

from metrics.schema import require_columns as _require
from metrics.tiers import P_COLUMNS as P_TIER_COLUMNS

from .settings import SHARED
from .style import HIGHER_IS_BETTER, METRIC_LABELS, PHASE_LABELS, TABLE_METRICS, algo_label, ordered_algos, task_label
from .tablefmt import Table

DEFAULT_DECIMALS = SHARED["decimals"]
BOLD_RULES = ("paper", "safe")


def _fix_negative_zero(text: str) -> str:
    return text[1:] if text.startswith("-") and float(text) == 0 else text


def fmt_num(value: float, decimals: int) -> str:
    if value is None or not np.isfinite(value):
        return "-"
    return _fix_negative_zero(f"{value:.{decimals}f}")


def fmt_shares(shares) -> str:
    """Tier distribution p_tier0..p_tier4 compactly: '0/.18/.82/0/0'."""
    def one(p):
        p = float(p)
        if not np.isfinite(p):
            return "-"
        if p == 0 or p == 1:
            return str(int(p))
        text = f"{p:.2f}"
        return {"0.00": "<.01", "1.00": ">.99"}.get(text, text.lstrip("0"))
    return "/".join(one(p) for p in shares)


def best_rows(values: dict[str, float], eligible: dict[str, bool], higher_is_better: bool,
              baseline: str | None) -> set[str]:
    """The algorithms whose value is best among the eligible, non-baseline ones (ties: all)."""
    candidates = {a: v for a, v in values.items()
                  if a != baseline and eligible.get(a, False) and v is not None and np.isfinite(v)}
    if not candidates:
        return set()
    best = max(candidates.values()) if higher_is_better else min(candidates.values())
    return {a for a, v in candidates.items() if v == best}


def iqm_table(iqm: pd.DataFrame, tiers: pd.DataFrame, *, title: str, phases, metrics=TABLE_METRICS,
              with_ci: bool, baseline: str | None = "ppo", decimals=None, bold: str = "paper",
              grid: str | None = None) -> Table:
    """One row per algorithm; per phase a column per metric's IQM (with its 95 % CI if asked),
    the tier, and the tier confidence P(tier) = share of bootstrap replicates in that tier."""
    _require(iqm, ["algo", "phase", "metric", "iqm", "ci_low", "ci_high"], "iqm.csv")
    _require(tiers, ["algo", "phase", "tier"] + P_TIER_COLUMNS, "tiers.csv")
    if bold not in BOLD_RULES:
        raise ValueError(f"bold rule must be one of {BOLD_RULES}, got {bold!r}")
    rule = bold  # `bold` below is the mask of bold cells
    decimals = {**DEFAULT_DECIMALS, **(decimals or {})}
    algos = ordered_algos(iqm["algo"].unique())
    by_key = iqm.set_index(["algo", "phase", "metric"])
    tier_by_key = tiers.set_index(["algo", "phase"])
    for phase in phases:
        for algo in algos:
            if (algo, phase) not in tier_by_key.index:
                raise ValueError(f"tiers.csv: no row for algo={algo!r}, phase={phase!r}")
            for metric in metrics:
                if (algo, phase, metric) not in by_key.index:
                    raise ValueError(f"iqm.csv: no row for algo={algo!r}, phase={phase!r}, metric={metric!r}")

    data = pd.DataFrame({"algo": algos})
    columns, cells, bold = [], [[] for _ in algos], [[] for _ in algos]
    for phase in phases:
        group = PHASE_LABELS[phase]
        tier_of = {a: int(tier_by_key.loc[(a, phase), "tier"]) for a in algos}
        eligible = {a: (t >= 1 if rule == "safe" else True) for a, t in tier_of.items()}
        for metric in metrics:
            vals = {a: float(by_key.loc[(a, phase, metric), "iqm"]) for a in algos}
            lows = {a: float(by_key.loc[(a, phase, metric), "ci_low"]) for a in algos}
            highs = {a: float(by_key.loc[(a, phase, metric), "ci_high"]) for a in algos}
            winners = best_rows(vals, eligible, HIGHER_IS_BETTER[metric], baseline)
            columns.append((group, f"IQM({METRIC_LABELS[metric]})"))
            d = decimals[metric]
            for i, a in enumerate(algos):
                text = fmt_num(vals[a], d)
                if with_ci:
                    text += f" [{fmt_num(lows[a], d)}, {fmt_num(highs[a], d)}]"
                cells[i].append(text)
                bold[i].append(a in winners)
            data[f"{phase}_{metric}_iqm"] = [vals[a] for a in algos]
            data[f"{phase}_{metric}_ci_low"] = [lows[a] for a in algos]
            data[f"{phase}_{metric}_ci_high"] = [highs[a] for a in algos]
            data[f"{phase}_{metric}_bold"] = [a in winners for a in algos]
        # tier 0 (unsafe) is never bold, even when it is the best there is
        tier_winners = best_rows({a: float(t) for a, t in tier_of.items() if t >= 1}, eligible, True, baseline)
        columns += [(group, "Tier"), (group, "P(tier)"), (group, "P(T0/../T4)")]
        for i, a in enumerate(algos):
            p = float(tier_by_key.loc[(a, phase), f"p_tier{tier_of[a]}"])
            dist = fmt_shares(tier_by_key.loc[(a, phase), P_TIER_COLUMNS])
            cells[i] += [str(tier_of[a]), f"{p:.2f}", dist]
            bold[i] += [a in tier_winners, False, False]
        data[f"{phase}_tier"] = [tier_of[a] for a in algos]
        data[f"{phase}_tier_bold"] = [a in tier_winners for a in algos]
        for col in P_TIER_COLUMNS:
            data[f"{phase}_{col}"] = [float(tier_by_key.loc[(a, phase), col]) for a in algos]

    notes = [
        "IQM over (task, bound) conditions of the seed means"
        + ("; [95 % stratified-bootstrap CI]." if with_ci else "."),
        "Tier 0 Unsafe, 1 Minimal, 2 Moderate, 3 Substantial, 4 Strict; P(tier) = share of "
        "bootstrap replicates that land in the shown tier; P(T0/../T4) = their shares in tiers 0 to 4.",
        ("Bold: best value per column among algorithms with tier >= 1 in that phase"
         if rule == "safe" else "Bold: best value per column")
        + (f", {algo_label(baseline)} (unconstrained baseline) excluded." if baseline else "."),
    ] + ([grid] if grid else [])
    return Table(title=title, row_header=["Algorithm"], rows=[[algo_label(a)] for a in algos],
                 columns=columns, cells=cells, bold=bold, data=data, notes=notes)


def table2(iqm, tiers, **options) -> Table:
    """options: baseline, decimals, bold (see `iqm_table`)."""
    return iqm_table(iqm, tiers, title="Table 2: training and final greedy IQMs and tiers",
                     phases=["train", "final_greedy"], with_ci=False, **options)


def table_a3(iqm, tiers, **options) -> Table:
    return iqm_table(iqm, tiers, title="Table A.3: Table 2 with 95 % confidence intervals",
                     phases=["train", "final_greedy"], with_ci=True, **options)


def table_a2(iqm, tiers, **options) -> Table:
    return iqm_table(iqm, tiers, title="Table A.2: final policy with exploration noise vs greedy",
                     phases=["final_explore", "final_greedy"], with_ci=True, **options)


TIER_PREFIX = {"train": "T", "final_explore": "N", "final_greedy": "F"}


def task_table(conditions: pd.DataFrame, task: str, *, phases=("train", "final_greedy"), metrics=TABLE_METRICS,
               decimals=None, title: str | None = None) -> Table:
    """Tables A.4 onwards: one task; per bound and algorithm, mean +- sample std over seeds of
    each metric and the condition's tier (T0..T4 training, F0..F4 final greedy, N0..N4 final
    with noise) with its tier confidence, from conditions.csv."""
    needed = ["task", "bound", "algo", "phase", "n_seeds", "tier"] + P_TIER_COLUMNS
    needed += [f"{m}_{s}" for m in metrics for s in ("mean", "std")]
    _require(conditions, needed, "conditions.csv")
    decimals = {**DEFAULT_DECIMALS, **(decimals or {})}
    rows_of_task = conditions[conditions["task"] == task]
    if rows_of_task.empty:
        raise ValueError(f"conditions.csv: no rows for task {task!r}; tasks: {sorted(conditions['task'].unique())}")
    by_key = rows_of_task.set_index(["bound", "algo", "phase"])
    bounds = sorted(rows_of_task["bound"].unique())
    algos = ordered_algos(rows_of_task["algo"].unique())
    keys = [(b, a) for b in bounds for a in algos if any((b, a, p) in by_key.index for p in phases)]

    data = pd.DataFrame({"task": task, "bound": [b for b, _ in keys], "algo": [a for _, a in keys]})
    columns, cells = [], [[] for _ in keys]
    for phase in phases:
        group = PHASE_LABELS[phase]
        got = [by_key.loc[(b, a, phase)] if (b, a, phase) in by_key.index else None for b, a in keys]
        for metric in metrics:
            columns.append((group, METRIC_LABELS[metric]))
            d = decimals[metric]
            for i, row in enumerate(got):
                if row is None:
                    cells[i].append("-")
                    continue
                mean, std = float(row[f"{metric}_mean"]), float(row[f"{metric}_std"])
                # one seed: the sample std is undefined, so only the mean is shown
                cells[i].append(fmt_num(mean, d) + (f" ± {fmt_num(std, d)}" if np.isfinite(std) else ""))
            data[f"{phase}_{metric}_mean"] = [np.nan if r is None else float(r[f"{metric}_mean"]) for r in got]
            data[f"{phase}_{metric}_std"] = [np.nan if r is None else float(r[f"{metric}_std"]) for r in got]
        columns += [(group, "Tier"), (group, "P(tier)"), (group, "P(0/../4)")]
        for i, row in enumerate(got):
            if row is None:
                cells[i] += ["-", "-", "-"]
            else:
                tier = int(row["tier"])
                cells[i] += [f"{TIER_PREFIX[phase]}{tier}", f"{float(row[f'p_tier{tier}']):.2f}",
                             fmt_shares(row[P_TIER_COLUMNS])]
        data[f"{phase}_n_seeds"] = [np.nan if r is None else int(r["n_seeds"]) for r in got]
        data[f"{phase}_tier"] = [np.nan if r is None else int(r["tier"]) for r in got]
        for col in P_TIER_COLUMNS:
            data[f"{phase}_{col}"] = [np.nan if r is None else float(r[col]) for r in got]

    notes = [
        "Mean ± sample std over seeds (the std does not shrink with more seeds); tiers of the seed "
        "means: " + ", ".join(f"{TIER_PREFIX[p]}0..{TIER_PREFIX[p]}4 {PHASE_LABELS[p].lower()}" for p in phases) + ".",
        "P(tier): share of bootstrap replicates (seeds resampled) in the shown tier; P(0/../4): "
        "their shares in tiers 0 to 4.",
    ]
    return Table(title=title or f"Per-condition results on {task_label(task)}", row_header=["d", "Algorithm"],
                 rows=[[f"{b:g}", algo_label(a)] for b, a in keys], columns=columns, cells=cells,
                 bold=[[False] * len(columns) for _ in keys], data=data, notes=notes)
