"""Stage 2: IQM, stratified bootstrap, pooled estimator, per-condition statistics and CDFs."""

import warnings

import numpy as np
import pandas as pd
import pytest
from scipy.stats import trim_mean

from metrics import KAPPA, MetricsWarning, aggregate, iqm, stratified_draws, summarise
from metrics.bootstrap import group_rng, stratum_means

from test_metrics_episodes import episodes, write

TASKS = ["a", "b", "c", "d"]
BOUNDS = [10.0, 20.0, 40.0]


def test_iqm_of_twelve_values_is_mean_of_middle_six():
    x = np.array([9.0, -3.0, 100.0, 4.0, 2.0, 7.0, 0.5, 1.0, 6.0, 5.0, -50.0, 3.0])
    middle = np.sort(x)[3:9]  # 1, 2, 3, 4, 5, 6
    assert iqm(x) == middle.mean() == 3.5
    assert iqm(x) == trim_mean(x, 0.25)


def test_iqm_equals_scipy_trim_mean_bit_for_bit():
    rng = np.random.default_rng(5)
    for _ in range(60):
        shape = tuple(int(n) for n in rng.integers(1, 30, size=rng.integers(1, 4)))
        x = rng.normal(size=shape) * 10.0 ** rng.uniform(-3, 6)
        axis = int(rng.integers(0, len(shape)))
        rows = np.ascontiguousarray(np.moveaxis(x, axis, -1))  # the layout iqm averages in
        np.testing.assert_array_equal(iqm(x, axis=axis), trim_mean(rows, 0.25, axis=-1))


def twelve_strata_sweep(tmp_path, n=20):
    """One train iterate per run, 20 episodes; stratum i has v0 = 7i mod 12 violations for seed 0
    and v1 = 0 (v0 < 6) or 12 (v0 >= 6) for seed 1, so its mean V is (v0 + v1) / 40."""
    parts = []
    for i, (task, bound) in enumerate([(t, b) for t in TASKS for b in BOUNDS]):
        v0 = (7 * i) % 12
        for k, v in enumerate((v0, 0 if v0 < 6 else 12)):
            costs = np.where(np.arange(n) < v, 2 * bound, bound / 2)
            parts.append(episodes(costs, bound=bound, task=task, seed=k))
    return summarise(write(pd.concat(parts, ignore_index=True), tmp_path / "sweep.parquet"))


def iqm_row(result, metric, phase="train", algo="ppo"):
    t = result.iqm
    return t[(t.algo == algo) & (t.phase == phase) & (t.metric == metric)].iloc[0]


def test_stratified_iqm_over_seed_means_by_hand(tmp_path):
    result = aggregate(twelve_strata_sweep(tmp_path), reps=50, seed=1)
    # v0 + v1 over strata: 0..5 and 18..23; the middle six are 3, 4, 5, 18, 19, 20 -> 69/6/40
    row = iqm_row(result, "V")
    assert row["iqm"] == pytest.approx(69 / 6 / 40, abs=1e-15)
    assert row["n_strata"] == 12 and row["n_runs"] == 24
    assert row["ci_low"] <= row["iqm"] <= row["ci_high"]
    stats = result.condition_stats
    one = stats[(stats.task == "a") & (stats.bound == 20.0)].iloc[0]  # i = 1: v0 = 7, v1 = 12
    assert one["n_seeds"] == 2 and one["V_mean"] == 19 / 40
    assert one["V_std"] == pytest.approx(np.std([7 / 20, 12 / 20], ddof=1), abs=1e-15)


def test_pooled_estimator_is_iqm_over_all_runs(tmp_path):
    summary = twelve_strata_sweep(tmp_path)
    result = aggregate(summary, reps=50, seed=1, estimator="pooled")
    runs = summary.runs[summary.runs.phase == "train"]
    assert iqm_row(result, "V")["iqm"] == trim_mean(runs["V"].to_numpy(), 0.25)
    assert set(result.iqm["estimator"]) == {"pooled"}
    stratified = aggregate(summary, reps=50, seed=1)
    # pooled: 24 run values 0 (x7), 1..11, 12 (x6) over 20 -> middle twelve 0..11 -> 5.5 / 20
    assert iqm_row(result, "V")["iqm"] == pytest.approx(5.5 / 20, abs=1e-15)
    assert iqm_row(stratified, "V")["iqm"] == pytest.approx(69 / 6 / 40, abs=1e-15)


def test_same_seed_same_cis_other_seed_other_cis(tmp_path):
    rng = np.random.default_rng(0)
    parts = [
        episodes(rng.uniform(0, 30, 8), task=t, bound=b, seed=k, algo=a)
        for t in TASKS[:2]
        for b in BOUNDS[:2]
        for a in ("ppo", "lag")
        for k in range(4)
    ]
    summary = summarise(write(pd.concat(parts, ignore_index=True), tmp_path / "s.parquet"))
    one, two, other = (aggregate(summary, reps=300, seed=s) for s in (7, 7, 8))
    pd.testing.assert_frame_equal(one.iqm, two.iqm, check_exact=True)
    pd.testing.assert_frame_equal(one.cdf, two.cdf, check_exact=True)
    pd.testing.assert_frame_equal(one.bootstrap, two.bootstrap, check_exact=True)
    assert not one.iqm["ci_low"].equals(other.iqm["ci_low"])
    # an algorithm's CIs do not depend on which other algorithms are present
    df = pd.concat(parts, ignore_index=True)
    alone = aggregate(summarise(write(df[df.algo == "ppo"], tmp_path / "ppo.parquet")), reps=300, seed=7)
    pd.testing.assert_frame_equal(alone.iqm, one.iqm[one.iqm.algo == "ppo"].reset_index(drop=True), check_exact=True)


def test_stratified_draws_stay_in_their_stratum_with_unequal_sizes():
    sizes = [1, 3, 5]
    draws = stratified_draws(sizes, 4000, np.random.default_rng(0))
    assert draws.shape == (4000, 9)
    assert np.all(draws[:, 0] == 0)
    assert np.all((draws[:, 1:4] >= 1) & (draws[:, 1:4] <= 3))
    assert np.all((draws[:, 4:] >= 4) & (draws[:, 4:] <= 8))
    share = np.bincount(draws[:, 4:].ravel(), minlength=9)[4:] / draws[:, 4:].size
    assert np.allclose(share, 0.2, atol=0.01)


def test_vectorised_replicates_equal_a_loop_over_replicates():
    sizes = np.array([2, 4, 3, 1])
    values = np.random.default_rng(1).normal(size=(sizes.sum(), 5))
    draws = stratified_draws(sizes, 25, group_rng(3, "ppo", "train"))
    fast = iqm(stratum_means(values, draws, sizes), axis=1)
    starts = np.concatenate([[0], np.cumsum(sizes)[:-1]])
    for b in range(25):
        means = np.array([values[draws[b, s : s + n]].mean(axis=0) for s, n in zip(starts, sizes)])
        np.testing.assert_allclose(fast[b], trim_mean(means, 0.25, axis=0), rtol=0, atol=1e-14)


def test_unequal_seed_counts_missing_stratum_and_single_seed(tmp_path):
    parts = []
    seeds = {("a", 10.0): 4, ("a", 20.0): 2, ("b", 10.0): 1, ("b", 20.0): 3}
    rng = np.random.default_rng(5)
    for (task, bound), n_seeds in seeds.items():
        for k in range(n_seeds):
            parts.append(episodes(rng.uniform(0, 2 * bound, 6), task=task, bound=bound, seed=k))
            if (task, bound) != ("b", 20.0):  # "lag" is missing from stratum (b, 20)
                parts.append(episodes(rng.uniform(0, 2 * bound, 6), task=task, bound=bound, seed=k, algo="lag"))
    summary = summarise(write(pd.concat(parts, ignore_index=True), tmp_path / "u.parquet"))
    with pytest.warns(MetricsWarning) as record:
        result = aggregate(summary, reps=200, seed=0)
    text = [str(w.message) for w in record]
    assert any("algo 'lag', phase train: no runs in stratum/strata (task=b, bound=20)" in t and "u.parquet" in t for t in text)
    assert sum("only seed of their stratum" in t and "u.parquet" in t and "task=b, bound=10" in t for t in text) == 2
    assert iqm_row(result, "V", algo="lag")["n_strata"] == 3
    assert iqm_row(result, "V", algo="ppo")["n_strata"] == 4
    stats = result.condition_stats.set_index(["task", "bound", "algo"])
    assert stats.loc[("a", 10.0, "ppo"), "n_seeds"] == 4
    assert np.isnan(stats.loc[("b", 10.0, "ppo"), "V_std"])
    assert result.meta["warnings"] == text
    # the single-seed stratum never varies across replicates
    cb = result.condition_bootstrap
    single = cb[(cb.task == "b") & (cb.bound == 10.0) & (cb.algo == "ppo")]
    assert single["V"].nunique() == 1 and single["V"].iloc[0] == stats.loc[("b", 10.0, "ppo"), "V_mean"]


def test_one_seed_everywhere_collapses_cis_and_bands(tmp_path):
    parts = [episodes([b * 0.5, b * 1.5, b * (1 + i / 10)], task=t, bound=b) for i, (t, b) in enumerate([(t, b) for t in TASKS for b in BOUNDS])]
    summary = summarise(write(pd.concat(parts, ignore_index=True), tmp_path / "o.parquet"))
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", MetricsWarning)
        result = aggregate(summary, reps=40, seed=0)
    assert np.all(result.iqm["ci_low"] == result.iqm["iqm"]) and np.all(result.iqm["ci_high"] == result.iqm["iqm"])
    assert np.all(result.cdf["F_low"] == result.cdf["F"]) and np.all(result.cdf["F_high"] == result.cdf["F"])


def test_cdf_from_histograms_equals_exact_ecdf_at_grid_points(tmp_path):
    rng = np.random.default_rng(11)
    parts, costs_of = [], {}
    for t in TASKS[:2]:
        for b in (15.0, 25.0):
            for k in range(3):
                # continuous costs, costs on grid points, zero costs and costs past the grid
                c = np.concatenate([rng.uniform(0, 3 * b, 40), b * (1 + rng.integers(-100, 200, 10) / 100), [0.0, 30 * b]])
                parts.append(episodes(c, task=t, bound=b, seed=k, phase="final_greedy", iteration=5))
                costs_of[(t, b, k)] = (c - b) / b
    summary = summarise(write(pd.concat(parts, ignore_index=True), tmp_path / "c.csv"))
    result = aggregate(summary, reps=20, seed=0)
    excess = np.concatenate(list(costs_of.values()))
    exact = (excess[:, None] <= KAPPA[None, :]).mean(axis=0)
    cdf = result.cdf[(result.cdf.phase == "final_greedy")]
    np.testing.assert_array_equal(cdf["kappa"].to_numpy(), KAPPA)
    np.testing.assert_array_equal(cdf["F"].to_numpy(), exact)
    assert np.all(cdf["F_low"] <= cdf["F_high"])
    assert cdf["F"].iloc[-1] < 1.0  # the 30 d costs lie past the grid's last point
    # the bands, replicate by replicate: the ECDF of the drawn runs' episodes (runs in key order)
    runs = list(costs_of.values())
    draws = stratified_draws([3] * 4, 20, group_rng(0, "ppo", "final_greedy"))
    replicates = [(np.concatenate([runs[i] for i in drawn])[:, None] <= KAPPA[None, :]).mean(axis=0) for drawn in draws]
    low, high = np.percentile(replicates, (2.5, 97.5), axis=0)
    np.testing.assert_array_equal(cdf["F_low"].to_numpy(), low)
    np.testing.assert_array_equal(cdf["F_high"].to_numpy(), high)


def test_splitting_input_over_files_changes_no_aggregate(tmp_path):
    rng = np.random.default_rng(2)
    parts = [
        episodes(rng.uniform(0, 2 * b, 5), task=t, bound=b, seed=k, iteration=j, returns=rng.normal(size=5))
        for t in TASKS[:2]
        for b in BOUNDS[:2]
        for k in range(3)
        for j in range(2)
    ]
    df = pd.concat(parts, ignore_index=True)
    whole = aggregate(summarise(write(df, tmp_path / "w.parquet")), reps=100, seed=3)
    shuffled = df.sample(frac=1.0, random_state=4)
    paths = [write(shuffled.iloc[i : i + 25], tmp_path / f"p{i}.parquet") for i in range(0, len(df), 25)]
    split = aggregate(summarise(paths), reps=100, seed=3)
    for name in ("iqm", "bootstrap", "cdf", "condition_stats", "condition_bootstrap"):
        pd.testing.assert_frame_equal(getattr(whole, name), getattr(split, name), check_exact=True)
