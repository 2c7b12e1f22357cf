"""The paper's findings as checks (metrics/findings.py) on hand-built tables where each claim
holds and where it fails."""
import numpy as np
import pandas as pd
import pytest

from metrics.findings import findings, noise_claim, threshold_claim, tier_claim
from metrics.thresholds import PAPER_THRESHOLDS


def _tiers(rows):
    out = []
    for algo, phase, tier, shares in rows:
        out.append({"algo": algo, "phase": phase, "tier": tier, **{f"p_tier{k}": p for k, p in enumerate(shares)}})
    return pd.DataFrame(out)


TIERS = _tiers([
    ("ppo_lag", "train", 0, [1, 0, 0, 0, 0]), ("ppo_lag", "final_greedy", 2, [0, 0, 1, 0, 0]),   # holds, surely
    ("p3o", "train", 1, [0.5, 0.5, 0, 0, 0]), ("p3o", "final_greedy", 1, [0.2, 0.8, 0, 0, 0]),   # holds, P = 0.9
    ("focops", "train", 2, [0, 0.3, 0.7, 0, 0]), ("focops", "final_greedy", 0, [0.6, 0.4, 0, 0, 0]),  # fails
    ("ppo", "train", 0, [1, 0, 0, 0, 0]), ("ppo", "final_greedy", 0, [1, 0, 0, 0, 0]),
])


def test_tier_claim_holds_and_fails_with_its_probability():
    got = tier_claim(TIERS, ["ppo_lag", "p3o", "focops"]).set_index("algo")
    assert got.loc["ppo_lag", "holds"] and got.loc["ppo_lag", "p_holds"] == 1.0
    assert got.loc["p3o", "holds"] and got.loc["p3o", "p_holds"] == pytest.approx(0.2 * 0.5 + 0.8 * 1.0)
    assert got.loc["p3o", "p_greedy"] == 0.8 and got.loc["p3o", "p_train"] == 0.5
    assert not got.loc["focops", "holds"]
    assert got.loc["focops", "p_holds"] == pytest.approx(0.6 * 0 + 0.4 * 0.3)  # greedy 0 needs train 0 (never)


def _runs(levels, tasks=("goal", "circle"), bounds=(15.0, 25.0), seeds=(0, 1, 2)):
    """levels[algo][(task, bound)] = (noise V, greedy V); seeds jitter by +-0.01, Dnorm = V - 0.5."""
    rows = []
    for algo, per in levels.items():
        for task in tasks:
            for bound in bounds:
                noise, greedy = per[(task, bound)]
                for seed in seeds:
                    jitter = 0.01 * (seed - 1)
                    for phase, v in (("final_explore", noise), ("final_greedy", greedy)):
                        rows.append({"task": task, "bound": bound, "algo": algo, "seed": seed, "phase": phase,
                                     "V": v + jitter, "Dnorm": v + jitter - 0.5, "Dnorm_plus": 0.0})
    return pd.DataFrame(rows)


CONDS = [("goal", 15.0), ("goal", 25.0), ("circle", 15.0), ("circle", 25.0)]
LEVELS = {
    "safer_noise": {c: (0.1, 0.4) for c in CONDS},                                    # the paper's finding
    "safer_greedy": {c: (0.6, 0.2) for c in CONDS},                                   # reversed (our default sweep)
    "mixed": {("goal", 15.0): (0.1, 0.5), ("goal", 25.0): (0.1, 0.5),                 # half each way
              ("circle", 15.0): (0.5, 0.1), ("circle", 25.0): (0.5, 0.1)},
}


def test_noise_claim_share_ci_verdict_and_per_task_gap():
    shares, gaps = noise_claim(_runs(LEVELS), list(LEVELS), reps=400, seed=0)
    s = shares.set_index(["algo", "metric"])
    assert s.loc[("safer_noise", "V"), ["share", "ci_low", "ci_high"]].tolist() == [1.0, 1.0, 1.0]
    assert s.loc[("safer_noise", "V"), "verdict"] == "holds"
    assert s.loc[("safer_greedy", "Dnorm"), ["share", "ci_high"]].tolist() == [0.0, 0.0]
    assert s.loc[("safer_greedy", "Dnorm"), "verdict"] == "reversed"
    # the gap between phases is much larger than the seed jitter: resampling seeds never flips a condition
    assert s.loc[("mixed", "V"), ["n_conditions", "n_at_most", "n_tied", "share"]].tolist() == [4, 2, 0, 0.5]
    assert s.loc[("mixed", "V"), "verdict"] == "undecided"
    g = gaps.set_index(["algo", "task", "metric"])["gap"]
    assert g[("mixed", "goal", "V")] == pytest.approx(-0.4) and g[("mixed", "circle", "V")] == pytest.approx(0.4)
    assert g[("safer_greedy", "goal", "Dnorm")] == pytest.approx(0.4)


def test_noise_claim_ci_reflects_seed_spread():
    """One condition where the seeds disagree: its comparison flips across replicates, so the
    interval of the share is wider than a point."""
    runs = _runs({"a": {c: (0.3, 0.3) for c in CONDS}})
    flip = (runs["task"] == "goal") & (runs["bound"] == 15.0) & (runs["phase"] == "final_explore")
    runs.loc[flip, "V"] = np.where(runs.loc[flip, "seed"] == 0, 0.0, 0.45)  # seed means 0.3 vs greedy 0.3
    shares, _ = noise_claim(runs, ["a"], metrics=("V",), reps=2000, seed=1)
    row = shares.iloc[0]
    assert row["share"] == 1.0 and row["ci_low"] == 0.75 and row["ci_high"] == 1.0
    assert row["n_tied"] == 4  # every condition's seed means are equal: "at most" holds by ties alone
    assert "a 100% [75%, 100%] of 4 (4 tied)" in findings(
        _tiers([("a", "train", 0, [1, 0, 0, 0, 0]), ("a", "final_greedy", 0, [1, 0, 0, 0, 0])]), runs,
        pd.DataFrame(columns=["algo", "phase", "metric", "iqm"]), PAPER_THRESHOLDS, reps=2000, seed=1).sentences()[1]


def test_threshold_claim_lists_only_tiers_a_small_move_changes():
    iqm = pd.DataFrame([
        ("edge", "final_greedy", "V", 0.48), ("edge", "final_greedy", "Dnorm", -0.2),
        ("edge", "final_greedy", "Dnorm_plus", 0.3),                   # tier 2; moderate.V at 0.45 gives 1
        ("firm", "final_greedy", "V", 0.25), ("firm", "final_greedy", "Dnorm", -0.5),
        ("firm", "final_greedy", "Dnorm_plus", 0.3),                   # tier 2 and no move of 0.05 changes it
    ], columns=["algo", "phase", "metric", "iqm"])
    got = threshold_claim(iqm, PAPER_THRESHOLDS, ["edge", "firm"], margin=0.05)
    assert got[["algo", "threshold", "moved_to", "tier", "moved_tier"]].values.tolist() == [
        ["edge", "moderate.V", pytest.approx(0.45), 2, 1]]
    assert threshold_claim(iqm, PAPER_THRESHOLDS, ["firm"]).empty
    # strict (V = Dnorm+ = 0): its limits at 0 would only move below what V and Dnorm+ can be
    strict = pd.DataFrame([("s", "train", "V", 0.0), ("s", "train", "Dnorm", -0.6), ("s", "train", "Dnorm_plus", 0.0)],
                          columns=["algo", "phase", "metric", "iqm"])
    assert threshold_claim(strict, PAPER_THRESHOLDS, ["s"]).empty


def test_findings_sentences_say_which_hold():
    runs = _runs({a: LEVELS["safer_greedy"] for a in ("ppo_lag", "p3o", "focops", "ppo")})
    iqm = pd.DataFrame([(a, p, m, v) for a in ("ppo_lag", "p3o", "focops") for p in ("train", "final_greedy")
                        for m, v in (("V", 0.2), ("Dnorm", -0.3), ("Dnorm_plus", 0.3))],
                       columns=["algo", "phase", "metric", "iqm"])
    f = findings(TIERS, runs, iqm, PAPER_THRESHOLDS, reps=100)
    one, two, three = f.sentences()
    assert "holds for 2 of 3 constrained algorithms" in one and "focops: training 2 (P = 0.70)" in one
    assert "ppo:" not in one  # the unconstrained baseline is not checked
    assert "on V it holds for 0, is reversed for 3 and undecided for 0 of 3" in two
    assert three == "(3) Tiers hinge on a threshold: no constrained algorithm's tier changes when any one threshold moves by 0.05."


def test_report_shows_the_findings_section_first(tmp_path):
    from workflow import report

    runs = _runs({a: LEVELS["safer_greedy"] for a in ("ppo_lag", "p3o", "focops")})
    iqm = pd.DataFrame([(a, p, m, v) for a in ("ppo_lag", "p3o", "focops") for p in ("train", "final_greedy")
                        for m, v in (("V", 0.2), ("Dnorm", -0.3), ("Dnorm_plus", 0.3))],
                       columns=["algo", "phase", "metric", "iqm"])
    # iqm.csv as metrics.aggregate writes it: each IQM with its CI
    iqm_csv = iqm.assign(ci_low=iqm["iqm"] - 0.05, ci_high=iqm["iqm"] + 0.05)
    for name, df in (("iqm", iqm_csv), ("tiers", TIERS), ("conditions", TIERS)):
        df.to_csv(tmp_path / f"{name}.csv", index=False)
    config = {"preset": "x", "backend": "builtin", "tasks": ["goal"], "bounds": [15], "algos": ["p3o"], "seeds": [0]}
    out = tmp_path / "report.html"
    report.write_report(str(out), config=config, products=[], findings=findings(TIERS, runs, iqm, PAPER_THRESHOLDS, reps=50),
                        **{k: str(tmp_path / f"{k}.csv") for k in ("iqm", "tiers", "conditions")})
    text = out.read_text()
    assert text.index("<h2 id='findings'>Findings</h2>") < text.index("<h2 id='table2'>")
    # finding (1) holds for 2 of 3 algorithms (mixed), (2) is reversed for all, each algorithm named
    assert "<span class='verdict mixed'>mixed</span> Deployment at least as safe as training" in text
    assert "P3O 1 Minimal → 1 Minimal (P(final ≥ training) = 0.90)" in text
    assert "<span class='verdict no'>fails</span> Exploration noise" in text and "on V: FOCOPS reversed" in text
    assert "noise-minus-greedy gap per task" in text
