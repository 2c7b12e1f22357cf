"""The paper's findings in the report: one verdict per claim, then the numbers behind them.

Reads a `metrics.findings.Findings` and only words it: algorithms by their labels, phases and
thresholds by name, a value that does not exist as an empty cell.
"""
from __future__ import annotations

import html

import numpy as np
import pandas as pd

from workflow.products.style import METRIC_LABELS, PHASE_LABELS, TIER_LABELS, algo_label, task_label

VERDICT_CLASS = {"holds": "yes", "fails": "no", "mixed": "mixed", "undecided": "mixed", "reversed": "no"}


def _overall(verdicts) -> str:
    verdicts = set(verdicts)
    if verdicts == {"holds"}:
        return "holds"
    if verdicts <= {"fails", "reversed"}:
        return "fails"
    return "undecided" if verdicts == {"undecided"} else "mixed"


def _badge(verdict: str) -> str:
    return f"<span class='verdict {VERDICT_CLASS[verdict]}'>{html.escape(verdict)}</span>"


def _tier(tier: int) -> str:
    return f"{tier} {TIER_LABELS[tier]}"


def _pct(x: float) -> str:
    return f"{100 * x:.0f} %"


def tier_verdict(tiers: pd.DataFrame) -> tuple[str, str]:
    per = "; ".join(f"{algo_label(r.algo)} {_tier(r.train_tier)} → {_tier(r.greedy_tier)} "
                    f"(P(final ≥ training) = {r.p_holds:.2f})" for r in tiers.itertuples())
    verdict = _overall("holds" if r.holds else "fails" for r in tiers.itertuples())
    return verdict, f"Deployment at least as safe as training (final greedy tier ≥ training tier): {per}."


def noise_verdict(noise: pd.DataFrame) -> tuple[str, str]:
    parts = []
    for metric, rows in noise.groupby("metric", sort=False):
        per = ", ".join(f"{algo_label(r.algo)} {r.verdict} ({_pct(r.share)} of {r.n_conditions} conditions, "
                        f"CI {_pct(r.ci_low)}–{_pct(r.ci_high)})" for r in rows.itertuples())
        parts.append(f"on {METRIC_LABELS.get(metric, metric)}: {per}")
    return (_overall(noise["verdict"]),
            "Exploration noise makes the final policy at least as safe as greedy: " + "; ".join(parts) + ".")


def threshold_verdict(thresholds: pd.DataFrame, margin: float) -> tuple[str, str]:
    if thresholds.empty:
        return "fails", f"Tiers hinge on a threshold: no tier changes when one threshold moves by {margin:g}."
    which = sorted({f"{algo_label(r.algo)} {PHASE_LABELS.get(r.phase, r.phase).lower()} ({r.threshold})"
                    for r in thresholds.itertuples()})
    return "holds", (f"Tiers hinge on a threshold: a move of {margin:g} in one threshold changes "
                     f"{len(which)} tier(s): " + ", ".join(which) + ".")


def verdict_list(found) -> str:
    """The short list at the top of the report: a badge and one sentence per claim."""
    items = []
    if len(found.tiers):
        items.append(tier_verdict(found.tiers))
    if len(found.noise):
        items.append(noise_verdict(found.noise))
    items.append(threshold_verdict(found.thresholds, found.margin))
    return ("<ol class='findings'>" + "".join(f"<li>{_badge(v)} {html.escape(text)}</li>" for v, text in items)
            + "</ol>")


def _labelled(df: pd.DataFrame) -> pd.DataFrame:
    """Names as the reader knows them: labels for algorithms, tasks, phases and metrics."""
    df = df.copy()
    for column, label in (("algo", algo_label), ("task", task_label),
                          ("phase", lambda p: PHASE_LABELS.get(p, p)), ("metric", lambda m: METRIC_LABELS.get(m, m))):
        if column in df.columns:
            df[column] = df[column].map(lambda v, f=label: f(str(v)))
    return df


def _shown(value) -> str:
    if isinstance(value, (bool, np.bool_)):
        return "yes" if value else "no"
    if isinstance(value, (float, np.floating)):
        return "" if not np.isfinite(value) else f"{value:.4g}"
    return str(value)


def _table(df: pd.DataFrame, headers: dict) -> str:
    if df.empty:
        return "<p>none</p>"
    df = _labelled(df)
    head = "".join(f"<th>{html.escape(headers.get(c, c))}</th>" for c in df.columns)
    rows = "".join("<tr>" + "".join(f"<td>{html.escape(_shown(v))}</td>" for v in row) + "</tr>"
                   for row in df.itertuples(index=False))
    return f"<table><thead><tr>{head}</tr></thead><tbody>{rows}</tbody></table>"


HEADERS = {"algo": "Algorithm", "task": "Task", "phase": "Phase", "metric": "Metric", "train_tier": "training tier",
           "greedy_tier": "final greedy tier", "p_train": "P(training tier)", "p_greedy": "P(final greedy tier)",
           "p_holds": "P(final ≥ training)", "holds": "holds", "n_conditions": "conditions",
           "n_at_most": "noise ≤ greedy", "n_tied": "tied", "share": "share", "ci_low": "CI low",
           "ci_high": "CI high", "verdict": "verdict", "gap": "mean noise − greedy", "threshold": "threshold",
           "configured": "configured", "moved_to": "moved to", "iqm": "IQM", "tier": "tier",
           "moved_tier": "tier when moved"}


def evidence(found) -> str:
    """The numbers behind each verdict, one small table per claim."""
    sections = [("(1) Final greedy tier vs training tier", found.tiers),
                ("(2) Share of conditions with noise at most greedy (95 % CI)", found.noise),
                ("(2) Mean noise-minus-greedy gap per task (negative: noise safer)", found.gaps),
                (f"(3) Tiers a move of {found.margin:g} in one threshold changes", found.thresholds)]
    return "".join(f"<h3>{html.escape(title)}</h3>{_table(df, HEADERS)}" for title, df in sections)
