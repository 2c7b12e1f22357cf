"""The paper's three findings as checks on any sweep, per constrained algorithm.

1. Deployment is at least as safe as training: the final greedy tier >= the training tier. How
   sure: P(tier) on each side, and the probability that a bootstrap replicate of the final
   greedy IQMs lands in a tier >= one of training's (the phases' replicates are independent).
2. Exploration noise makes the final policy safer than running it greedily: the share of
   (task, bound) conditions whose seed-mean V (and Dnorm) with noise is at most the greedy one,
   with a stratified-bootstrap CI (each condition's seeds resampled, the two phases of a seed
   kept together); the claim holds when the CI lies above 1/2, is reversed when it lies below.
   Beside it, per task, the mean noise-minus-greedy gap over the task's conditions.
3. Tiers hinge on thresholds: each (algorithm, phase) whose tier changes when one threshold
   moves by +-margin (the others as configured), as in the tier-sensitivity analysis; a move
   outside the values a metric can take (V below 0 or above 1, Dnorm+ below 0) is not tried.
"""

from __future__ import annotations

import copy
from dataclasses import dataclass

import numpy as np
import pandas as pd

from .aggregate import DEFAULT_REPS
from .bootstrap import group_rng, percentile_ci, stratified_draws, stratum_means
from .schema import RUN_KEYS, require_columns
from .thresholds import N_TIERS, tier_of, validate_thresholds

NOISE_METRICS = ("V", "Dnorm")
DEFAULT_MARGIN = 0.05
THRESHOLD_COLUMNS = ["algo", "phase", "threshold", "configured", "moved_to", "iqm", "tier", "moved_tier"]
LOWEST, HIGHEST = {"V": 0.0, "Dnorm_plus": 0.0}, {"V": 1.0}  # the values the metrics can take


def tier_claim(tiers: pd.DataFrame, algos) -> pd.DataFrame:
    """Claim 1 per algorithm from tiers.csv: train_tier, greedy_tier, p_train, p_greedy (P(tier)
    of each), p_holds (P(replicate greedy tier >= replicate training tier)) and holds."""
    p_cols = [f"p_tier{k}" for k in range(N_TIERS)]
    require_columns(tiers, ["algo", "phase", "tier"] + p_cols, "tiers.csv")
    by = tiers.set_index(["algo", "phase"])
    rows = []
    for algo in algos:
        if (algo, "train") not in by.index or (algo, "final_greedy") not in by.index:
            continue
        train, greedy = by.loc[(algo, "train")], by.loc[(algo, "final_greedy")]
        pt, pg = train[p_cols].to_numpy(float), greedy[p_cols].to_numpy(float)
        rows.append({"algo": algo, "train_tier": int(train["tier"]), "greedy_tier": int(greedy["tier"]),
                     "p_train": pt[int(train["tier"])], "p_greedy": pg[int(greedy["tier"])],
                     "p_holds": float(sum(pg[a] * pt[b] for a in range(N_TIERS) for b in range(a + 1))),
                     "holds": int(greedy["tier"]) >= int(train["tier"])})
    return pd.DataFrame(rows, columns=["algo", "train_tier", "greedy_tier", "p_train", "p_greedy", "p_holds", "holds"])


def _paired_final(runs: pd.DataFrame, algo: str, metrics) -> pd.DataFrame:
    """One row per seed with both final phases: task, bound, seed, <metric>_explore, <metric>_greedy."""
    own = runs[runs["algo"] == algo]
    wide = own.pivot_table(index=["task", "bound", "seed"], columns="phase", values=list(metrics), aggfunc="first")
    cols = {f"{m}_{p.split('_')[1]}": wide[(m, p)] for m in metrics for p in ("final_explore", "final_greedy")
            if (m, p) in wide.columns}
    if len(cols) < 2 * len(metrics):
        return pd.DataFrame()
    return pd.DataFrame(cols).dropna().reset_index().sort_values(["task", "bound", "seed"], kind="stable")


def noise_claim(runs: pd.DataFrame, algos, metrics=NOISE_METRICS, reps: int = DEFAULT_REPS, seed: int = 0):
    """Claim 2 from the per-run table (run_metrics.parquet). Returns (shares, gaps): shares has
    per algorithm and metric n_conditions, n_at_most (conditions where noise <= greedy), n_tied
    (where they are equal, e.g. both 0), share,
    ci_low, ci_high, verdict (holds / reversed / undecided); gaps per algorithm, task and metric
    the mean over the task's conditions of seed-mean noise minus seed-mean greedy."""
    require_columns(runs, list(RUN_KEYS) + ["phase"] + list(metrics), "run metrics")
    shares, gaps = [], []
    for algo in algos:
        paired = _paired_final(runs, algo, metrics)
        if paired.empty:
            continue
        sizes = paired.groupby(["task", "bound"], sort=False).size()
        values = paired[[f"{m}_{p}" for m in metrics for p in ("explore", "greedy")]].to_numpy(np.float64)
        starts = np.concatenate([[0], np.cumsum(sizes.to_numpy())[:-1]])
        means = np.add.reduceat(values, starts, axis=0) / sizes.to_numpy()[:, None]  # (S, 2m)
        draws = stratified_draws(sizes.to_numpy(), int(reps), group_rng(seed, "findings", algo))
        rep_means = stratum_means(values, draws, sizes.to_numpy())  # (reps, S, 2m)
        tasks = sizes.index.get_level_values("task").to_numpy()
        for j, metric in enumerate(metrics):
            explore, greedy = means[:, 2 * j], means[:, 2 * j + 1]
            at_most = explore <= greedy
            rep_share = (rep_means[:, :, 2 * j] <= rep_means[:, :, 2 * j + 1]).mean(axis=1)
            low, high = percentile_ci(rep_share)
            verdict = "holds" if low > 0.5 else "reversed" if high < 0.5 else "undecided"
            shares.append({"algo": algo, "metric": metric, "n_conditions": len(at_most), "n_at_most": int(at_most.sum()),
                           "n_tied": int((explore == greedy).sum()),
                           "share": float(at_most.mean()), "ci_low": float(low), "ci_high": float(high),
                           "verdict": verdict})
            for task in pd.unique(tasks):
                here = tasks == task
                gaps.append({"algo": algo, "task": task, "metric": metric,
                             "gap": float((explore[here] - greedy[here]).mean())})
    return (pd.DataFrame(shares, columns=["algo", "metric", "n_conditions", "n_at_most", "n_tied", "share", "ci_low",
                                          "ci_high", "verdict"]),
            pd.DataFrame(gaps, columns=["algo", "task", "metric", "gap"]))


def threshold_claim(iqm: pd.DataFrame, thresholds, algos, margin: float = DEFAULT_MARGIN) -> pd.DataFrame:
    """Claim 3 from iqm.csv: every (algo, phase, threshold, moved_to) whose tier at the moved
    threshold (one moved, the others as configured) differs from its tier (tier, moved_tier)."""
    thresholds = validate_thresholds(thresholds)
    require_columns(iqm, ["algo", "phase", "metric", "iqm"], "iqm.csv")
    wide = iqm[iqm["algo"].isin(list(algos))].pivot_table(index=["algo", "phase"], columns="metric", values="iqm",
                                                           aggfunc="first", sort=False)
    rows = []
    if wide.empty:
        return pd.DataFrame(rows, columns=THRESHOLD_COLUMNS)
    values = {m: wide[m].to_numpy(float) for m in wide.columns}
    base = tier_of(values, thresholds, validate=False)
    for tier_name, limits in thresholds.items():
        for metric, limit in limits.items():
            for moved_to in (limit - margin, limit + margin):
                if moved_to < LOWEST.get(metric, -np.inf) or moved_to > HIGHEST.get(metric, np.inf):
                    continue  # a limit no value can cross (V < 0, V > 1, Dnorm+ < 0) moves no tier for real
                moved = copy.deepcopy(thresholds)
                moved[tier_name][metric] = moved_to
                changed = tier_of(values, moved, validate=False)
                for i in np.flatnonzero(changed != base):
                    algo, phase = wide.index[i]
                    rows.append({"algo": algo, "phase": phase, "threshold": f"{tier_name}.{metric}", "configured": limit,
                                 "moved_to": moved_to, "iqm": values[metric][i], "tier": int(base[i]),
                                 "moved_tier": int(changed[i])})
    return pd.DataFrame(rows, columns=THRESHOLD_COLUMNS)


@dataclass
class Findings:
    tiers: pd.DataFrame
    noise: pd.DataFrame
    gaps: pd.DataFrame
    thresholds: pd.DataFrame
    margin: float

    def sentences(self) -> list[str]:
        """One sentence per claim saying whether it holds in this sweep and how sure."""
        out = []
        t = self.tiers
        if len(t):
            held = t[t["holds"]]
            detail = "; ".join(f"{r.algo}: training {r.train_tier} (P = {r.p_train:.2f}), final greedy "
                               f"{r.greedy_tier} (P = {r.p_greedy:.2f}), P(final >= training) = {r.p_holds:.2f}"
                               for r in t.itertuples())
            out.append(f"(1) Final greedy tier at least the training tier: holds for {len(held)} of {len(t)} "
                       f"constrained algorithms ({detail}).")
        n = self.noise
        if len(n):
            parts = []
            for metric, rows in n.groupby("metric", sort=False):
                counts = rows["verdict"].value_counts()
                per = ", ".join(f"{r.algo} {r.share:.0%} [{r.ci_low:.0%}, {r.ci_high:.0%}] of {r.n_conditions}"
                                + (f" ({r.n_tied} tied)" if r.n_tied else "") for r in rows.itertuples())
                parts.append(f"on {metric} it holds for {counts.get('holds', 0)}, is reversed for "
                             f"{counts.get('reversed', 0)} and undecided for {counts.get('undecided', 0)} of "
                             f"{len(rows)} algorithms (share of conditions with noise at most greedy, 95 % CI: {per})")
            out.append("(2) With exploration noise the final policy is at least as safe as greedy: "
                       + "; ".join(parts) + ".")
        th = self.thresholds
        if th.empty:
            out.append(f"(3) Tiers hinge on a threshold: no constrained algorithm's tier changes when any one "
                       f"threshold moves by {self.margin:g}.")
        else:
            which = sorted({f"{r.algo} {r.phase} ({r.threshold})" for r in th.itertuples()})
            out.append(f"(3) Tiers hinge on a threshold: a move of {self.margin:g} in one threshold changes "
                       f"{len(which)} tier(s): " + ", ".join(which) + ".")
        return out


def findings(tiers: pd.DataFrame, runs: pd.DataFrame, iqm: pd.DataFrame, thresholds, unconstrained=("ppo",),
             reps: int = DEFAULT_REPS, seed: int = 0, margin: float = DEFAULT_MARGIN) -> Findings:
    """All three checks for the algorithms of the sweep other than the unconstrained ones."""
    algos = [a for a in sorted(set(tiers["algo"])) if a not in set(unconstrained)]
    noise, gaps = noise_claim(runs, algos, reps=reps, seed=seed)
    return Findings(tier_claim(tiers, algos), noise, gaps, threshold_claim(iqm, thresholds, algos, margin), margin)


__all__ = ["Findings", "findings", "noise_claim", "threshold_claim", "tier_claim"]
