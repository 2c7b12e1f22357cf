"""Stage 1 against a reference computed directly from a random episode table with pandas.

The engine reads files in threads, does not read key columns that Parquet statistics show
constant, and sums over episodes in key order with numpy's reduceat (the first value plus a
pairwise sum of the rest). The reference groups the plain table and sums each group the same
way, so R, C, V and Dnorm agree bit for bit. Dnorm_plus differs in the last bits only: the
engine sums every episode's excess with zeros for the episodes within the bound (one pass per
iterate), the reference sums the violating episodes alone, which rounds differently.
"""

import numpy as np
import pandas as pd
import pytest

from metrics import KAPPA, PHASES, read_episodes, summarise
from metrics.episodes import constant_columns

from test_metrics_episodes import write

RUN_PHASE = ["task", "bound", "algo", "seed", "phase"]


def ordered_sum(values):
    """The engine's sum of a group's values in key order."""
    return np.add.reduceat(np.asarray(values, np.float64), [0])[0]


def random_table(rng):
    """Runs with 1-4 training iterates of 1-40 episodes and a final_explore and final_greedy
    iterate; costs over six orders of magnitude, some exactly at the bound, zero, negative or
    past the grid's end."""
    frames = []
    for task in ("goal", "push"):
        for bound in (0.5, 25.0):
            for algo in ("p3o", "ppo"):
                for seed in (0, 7):
                    n_iterates = int(rng.integers(1, 5))
                    for phase in PHASES:
                        for iteration in range(n_iterates) if phase == "train" else [n_iterates - 1]:
                            n = int(rng.integers(1, 41))
                            cost = rng.gamma(2.0, bound / 2, n) * 10.0 ** rng.uniform(-3, 3, n)
                            special = rng.random(n)
                            cost[special < 0.1] = bound
                            cost[(special >= 0.1) & (special < 0.15)] = 0.0
                            cost[(special >= 0.15) & (special < 0.2)] = -rng.random()
                            frames.append(pd.DataFrame({
                                "task": task, "bound": bound, "algo": algo, "seed": seed, "phase": phase,
                                "iteration": iteration, "episode": rng.permutation(200)[:n],
                                "return": rng.normal(0, 10.0 ** rng.uniform(-2, 4), n), "cost": cost,
                            }))
    return pd.concat(frames, ignore_index=True)


def reference(df):
    """iterates, runs and dense histograms of the table, by grouping it with pandas."""
    df = df.assign(excess=(df["cost"] - df["bound"]) / df["bound"], violates=df["cost"] > df["bound"])
    iterates = []
    for key, g in df.groupby(RUN_PHASE + ["iteration"], sort=True):
        g = g.sort_values("episode")
        n, d = len(g), key[1]
        C = ordered_sum(g["cost"]) / n
        n_viol = int(g["violates"].sum())
        plus = ordered_sum(g.loc[g["violates"], "excess"]) / n_viol if n_viol else 0.0
        iterates.append((*key, n, ordered_sum(g["return"]) / n, C, n_viol / n, (C - d) / d, plus))
    iterates = pd.DataFrame(iterates, columns=RUN_PHASE + ["iteration", "n_episodes", "R", "C", "V", "Dnorm", "Dnorm_plus"])
    runs = iterates.groupby(RUN_PHASE, sort=True).agg(
        n_iterates=("iteration", "size"), n_episodes=("n_episodes", "sum"),
        **{m: (m, lambda v: ordered_sum(v) / len(v)) for m in ("R", "C", "V", "Dnorm", "Dnorm_plus")},
    ).reset_index()
    bins = np.searchsorted(KAPPA, df["excess"].to_numpy(), side="left")
    histograms = pd.crosstab([df[k] for k in RUN_PHASE], bins).reindex(columns=range(KAPPA.size + 1), fill_value=0)
    return iterates, runs, histograms


def by_key(df, keys):
    return df.sort_values(keys).reset_index(drop=True)


def test_summary_equals_a_pandas_reference_on_a_random_table(tmp_path):
    rng = np.random.default_rng(32)
    df = random_table(rng)
    paths = []
    for i, (_, run) in enumerate(df.groupby(["task", "bound", "algo", "seed"])):
        run = run.sample(frac=1.0, random_state=i)  # rows in any order
        if i == 0:  # one run split over a CSV file and a Parquet file
            paths += [write(run.iloc[::2], tmp_path / "r0a.csv"), write(run.iloc[1::2], tmp_path / "r0b.parquet")]
        else:
            paths.append(write(run, tmp_path / f"r{i}.parquet"))
    # the fast path is taken: the run keys of a one-run file come from its statistics
    import pyarrow.parquet as pq

    assert set(constant_columns(pq.ParquetFile(paths[-1]).metadata, {"task": str, "algo": str, "seed": int})) == {
        "task", "algo", "seed"}

    summary = summarise(paths[::-1])
    iterates, runs, histograms = reference(df)

    keys = RUN_PHASE + ["iteration"]
    ours = by_key(summary.iterates, keys)
    theirs = by_key(iterates, keys)
    exact = RUN_PHASE + ["iteration", "n_episodes", "R", "C", "V", "Dnorm"]
    pd.testing.assert_frame_equal(ours[exact], theirs[exact], check_exact=True)
    np.testing.assert_allclose(ours["Dnorm_plus"], theirs["Dnorm_plus"], rtol=1e-13, atol=0)

    ours, theirs = by_key(summary.runs, RUN_PHASE), by_key(runs, RUN_PHASE)
    exact = RUN_PHASE + ["n_iterates", "n_episodes", "R", "C", "V", "Dnorm"]
    pd.testing.assert_frame_equal(ours[exact], theirs[exact], check_exact=True)
    np.testing.assert_allclose(ours["Dnorm_plus"], theirs["Dnorm_plus"], rtol=1e-13, atol=0)

    dense = summary.histograms.pivot_table(index=RUN_PHASE, columns="bin", values="count", fill_value=0)
    dense = dense.reindex(columns=range(KAPPA.size + 1), fill_value=0)
    np.testing.assert_array_equal(dense.to_numpy(), histograms.to_numpy())
    assert dense.index.tolist() == histograms.index.tolist()

    final = by_key(df[df["phase"] != "train"], RUN_PHASE + ["episode"])
    ours = by_key(summary.final_episodes, RUN_PHASE + ["episode"])
    pd.testing.assert_frame_equal(ours[list(df.columns)], final[list(df.columns)], check_exact=True, check_dtype=False)


def test_nan_bound_that_parquet_statistics_leave_out_is_reported(tmp_path):
    df = pd.DataFrame({"task": "goal", "bound": [10.0, np.nan, 10.0], "algo": "ppo", "seed": 0, "phase": "train",
                       "iteration": 0, "episode": [0, 1, 2], "return": 1.0, "cost": 2.0})
    path = write(df, tmp_path / "nan_bound.parquet")
    from metrics import EpisodeTableError

    with pytest.raises(EpisodeTableError, match=r"nan_bound.parquet: column bound must be finite and > 0 \(found nan\) \(row 1;"):
        summarise(path)


@pytest.mark.parametrize("suffix", ["parquet", "csv"])
def test_episodes_are_ordered_by_key_at_the_integer_extremes(tmp_path, suffix):
    """The sort key combines integer columns in wrapping int32/int64 arithmetic: seeds near
    +-2**63, iterations just past and episodes just below 2**31 still order as a plain sort does."""
    rng = np.random.default_rng(4)
    n = 400
    df = pd.DataFrame({
        "task": rng.choice(["goal", "push"], n), "bound": 10.0, "algo": "ppo",
        "seed": rng.choice([-(2**63), -(2**63) + 1, 0, 2**63 - 1], n),
        "phase": "train", "iteration": rng.integers(2**31 - 2, 2**31 + 2, n),  # compact, past int32
        "episode": rng.integers(2**31 - 100, 2**31, n),  # compact, at the top of int32
        "return": 0.0, "cost": 1.0,
    }).drop_duplicates(["task", "seed", "iteration", "episode"])
    out = read_episodes(write(df, tmp_path / f"extreme.{suffix}"))
    expected = df.sort_values(["task", "seed", "iteration", "episode"])
    for key in ("task", "seed", "iteration", "episode"):
        assert out[key].tolist() == expected[key].tolist()
