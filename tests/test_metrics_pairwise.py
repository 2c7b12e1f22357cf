"""Probability of improvement (metrics/pairwise.py) against a hand count and against the exact
bootstrap distribution, enumerated over every possible resample of a small case."""
import itertools

import numpy as np
import pandas as pd
import pytest

from metrics.pairwise import AlgoRuns, pairwise_replicates, probability_of_improvement

# Two strata; X and Y have different seed counts, with a tie in the first stratum.
X = {("goal", 15.0): [0.1, 0.3], ("goal", 25.0): [0.5, 0.0, 0.2]}
Y = {("goal", 15.0): [0.2, 0.3], ("goal", 25.0): [0.4, 0.4]}


def _runs(phase="final_greedy"):
    rows = []
    for algo, table in (("x", X), ("y", Y)):
        for (task, bound), values in table.items():
            for seed, v in enumerate(values):
                rows.append({"task": task, "bound": bound, "algo": algo, "seed": seed, "phase": phase,
                             "V": v, "Dnorm": v - 1.0, "Dnorm_plus": 2 * v})
    return pd.DataFrame(rows)


def _poi(x_strata, y_strata):
    """Independent calculation: the mean over strata of the share of pairs with x < y (ties half)."""
    per = []
    for xs, ys in zip(x_strata, y_strata):
        per.append(sum(1.0 if a < b else 0.5 if a == b else 0.0 for a in xs for b in ys) / (len(xs) * len(ys)))
    return float(np.mean(per))


def test_point_estimate_is_the_hand_count():
    # stratum 1: 0.1 < 0.2, 0.1 < 0.3, 0.3 = 0.3 (half): 2.5 / 4; stratum 2: 0.0 and 0.2 below both 0.4s: 4 / 6
    got = probability_of_improvement(_runs(), reps=10)
    row = got[(got["algo"] == "x") & (got["other"] == "y") & (got["metric"] == "V")].iloc[0]
    assert row["p"] == pytest.approx((2.5 / 4 + 4 / 6) / 2, abs=1e-15)
    assert row["n_strata"] == 2
    # a shift of every value does not change which is lower
    assert got.set_index(["algo", "other", "metric"])["p"].loc[("x", "y", "Dnorm")] == pytest.approx(row["p"])


def test_bootstrap_distribution_matches_exact_enumeration():
    """Every resample of X's and Y's seeds inside each stratum is equally likely; enumerating
    them gives the bootstrap distribution exactly. 20000 replicates must match its mean and its
    CDF within Monte-Carlo error (5 standard errors)."""
    keys = list(X)
    draws = []
    for key in keys:
        draws.append(list(itertools.product(X[key], repeat=len(X[key]))))
        draws.append(list(itertools.product(Y[key], repeat=len(Y[key]))))
    exact = np.array([_poi(combo[0::2], combo[1::2]) for combo in itertools.product(*draws)])

    runs = _runs()
    reps = 20000
    x = AlgoRuns(runs[runs["algo"] == "x"], ["V"], reps, 3, "x", "final_greedy")
    y = AlgoRuns(runs[runs["algo"] == "y"], ["V"], reps, 3, "y", "final_greedy")
    point, replicates, n = pairwise_replicates(x, y)
    mc = replicates[:, 0]
    assert n == 2
    assert abs(mc.mean() - exact.mean()) < 5 * exact.std() / np.sqrt(reps)
    for v in np.unique(exact):
        f = (exact <= v + 1e-12).mean()
        assert abs((mc <= v + 1e-12).mean() - f) <= 5 * np.sqrt(f * (1 - f) / reps) + 1e-12


def test_the_two_directions_sum_to_one_and_their_intervals_mirror():
    got = probability_of_improvement(_runs(), reps=500, seed=7).set_index(["algo", "other", "metric"])
    for metric in ("V", "Dnorm", "Dnorm_plus"):
        xy, yx = got.loc[("x", "y", metric)], got.loc[("y", "x", metric)]
        assert xy["p"] + yx["p"] == pytest.approx(1.0, abs=1e-12)
        assert xy["ci_low"] == pytest.approx(1.0 - yx["ci_high"], abs=1e-12)
        assert xy["ci_low"] <= xy["p"] <= xy["ci_high"]


def test_only_shared_strata_count_and_every_phase_is_compared():
    runs = pd.concat([_runs("train"), _runs("final_greedy")], ignore_index=True)
    extra = runs[(runs["algo"] == "x") & (runs["bound"] == 15.0)].assign(bound=50.0, V=9.0)  # Y lacks d = 50
    got = probability_of_improvement(pd.concat([runs, extra], ignore_index=True), reps=50)
    assert sorted(set(got["phase"])) == ["final_greedy", "train"]
    assert set(got["n_strata"]) == {2}
    assert got.loc[(got["algo"] == "x") & (got["metric"] == "V"), "p"].iloc[0] == pytest.approx((2.5 / 4 + 4 / 6) / 2)


def test_the_same_seed_gives_the_same_intervals_and_bad_input_is_named():
    a = probability_of_improvement(_runs(), reps=100, seed=1)
    pd.testing.assert_frame_equal(a, probability_of_improvement(_runs(), reps=100, seed=1))
    with pytest.raises(ValueError, match=r"run metrics: missing column\(s\) \['Dnorm_plus'\]"):
        probability_of_improvement(_runs().drop(columns="Dnorm_plus"))
    with pytest.raises(ValueError, match="reps must be >= 1"):
        probability_of_improvement(_runs(), reps=0)


def test_rank_formula_equals_counting_every_pair_with_ties():
    from metrics.pairwise import stratum_probability

    rng = np.random.default_rng(5)
    x, y = rng.integers(0, 4, (50, 7, 2)).astype(float), rng.integers(0, 4, (50, 3, 2)).astype(float)  # many ties
    got = stratum_probability(x, y)
    for r in range(50):
        for m in range(2):
            assert got[r, m] == _poi([x[r, :, m]], [y[r, :, m]])
