"""The report's headline table: Table 2 laid out as the paper does, with the noise phase and CIs.

One row per algorithm; per phase (training, final with noise, final greedy) the IQM and its
95 % CI of V, Dnorm and Dnorm+, then the tier on its tier colour with P(tier). It reads
iqm.csv and tiers.csv as the engine wrote them and recomputes nothing; a value the files do
not hold is an empty cell. Bold: the best value per column among the algorithms other than
the baseline (the paper's rule, as in Table 2's own files).
"""
from __future__ import annotations

import html

import numpy as np
import pandas as pd

from metrics.schema import PHASES, require_columns
from metrics.thresholds import N_TIERS
from workflow.products.style import (HIGHER_IS_BETTER, METRIC_LABELS, PHASE_LABELS, TIER_COLORS, TIER_LABELS,
                                     algo_label, ordered_algos)
from workflow.products.tables import best_rows, fmt_num

HEADLINE_METRICS = ("V", "Dnorm", "Dnorm_plus")
DARK_TIERS = {3, 4}  # tier colours dark enough to need white text


def _cell(value: float | None, low: float | None, high: float | None, decimals: int, bold: bool) -> str:
    if value is None or not np.isfinite(value):
        return "<td></td>"
    shown = html.escape(fmt_num(value, decimals))
    shown = f"<b>{shown}</b>" if bold else shown
    ci = ""
    if low is not None and high is not None and np.isfinite(low) and np.isfinite(high):
        ci = f"<span class='ci'>[{fmt_num(low, decimals)}, {fmt_num(high, decimals)}]</span>"
    return f"<td>{shown}{ci}</td>"


def _tier_cell(row) -> str:
    if row is None or not np.isfinite(float(row["tier"])):
        return "<td></td>"
    tier = int(row["tier"])
    p = float(row[f"p_tier{tier}"])
    text = "#fff" if tier in DARK_TIERS else "#222"
    p_text = f"<span class='ci'>P = {p:.2f}</span>" if np.isfinite(p) else ""
    return (f"<td class='tier' style='background:{TIER_COLORS[tier]};color:{text}' "
            f"title='tier {tier} {TIER_LABELS[tier]}'>{tier} {TIER_LABELS[tier]}{p_text}</td>")


def headline_table(iqm: pd.DataFrame, tiers: pd.DataFrame, *, baseline: str | None = "ppo",
                   decimals: dict | None = None) -> str:
    """The table as HTML (a <table> element)."""
    require_columns(iqm, ["algo", "phase", "metric", "iqm", "ci_low", "ci_high"], "iqm.csv")
    require_columns(tiers, ["algo", "phase", "tier"] + [f"p_tier{k}" for k in range(N_TIERS)], "tiers.csv")
    decimals = {"V": 2, "Dnorm": 2, "Dnorm_plus": 2, **(decimals or {})}
    algos = ordered_algos(list(iqm["algo"].astype(str)) + list(tiers["algo"].astype(str)))
    phases = [p for p in PHASES if p in set(iqm["phase"]) | set(tiers["phase"])]
    values = {(str(r.algo), r.phase, r.metric): (float(r.iqm), float(r.ci_low), float(r.ci_high))
              for r in iqm.itertuples()}
    tier_rows = {(str(r["algo"]), r["phase"]): r for _, r in tiers.iterrows()}

    winners = {}
    for phase in phases:
        for metric in HEADLINE_METRICS:
            column = {a: values[(a, phase, metric)][0] for a in algos if (a, phase, metric) in values}
            winners[(phase, metric)] = best_rows(column, {a: True for a in column}, HIGHER_IS_BETTER[metric], baseline)

    head = ("<tr><th rowspan='2'>Algorithm</th>"
            + "".join(f"<th colspan='{len(HEADLINE_METRICS) + 1}' class='phase'>{html.escape(PHASE_LABELS[p])}</th>"
                      for p in phases) + "</tr><tr>"
            + "".join("".join(f"<th>{METRIC_LABELS[m]}</th>" for m in HEADLINE_METRICS) + "<th>Tier</th>"
                      for _ in phases) + "</tr>")
    body = []
    for algo in algos:
        cells = []
        for phase in phases:
            for metric in HEADLINE_METRICS:
                got = values.get((algo, phase, metric))
                cells.append(_cell(*(got or (None, None, None)), decimals[metric],
                                   algo in winners[(phase, metric)]))
            cells.append(_tier_cell(tier_rows.get((algo, phase))))
        body.append(f"<tr><th>{html.escape(algo_label(algo))}</th>{''.join(cells)}</tr>")
    return f"<table class='headline'><thead>{head}</thead><tbody>{''.join(body)}</tbody></table>"


def tier_legend() -> str:
    """The five tier colours with their names, for the line under the table."""
    return " ".join(f"<span class='swatch' style='background:{TIER_COLORS[k]};"
                    f"color:{'#fff' if k in DARK_TIERS else '#222'}'>{k} {TIER_LABELS[k]}</span>"
                    for k in range(N_TIERS))
