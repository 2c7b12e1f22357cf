"""Stage 1: validation of episode tables and the per-policy metrics on hand-worked cases."""

import numpy as np
import pandas as pd
import pytest

from metrics import EpisodeTableError, read_episodes, summarise

COLUMNS = ["task", "bound", "algo", "seed", "phase", "iteration", "episode", "return", "cost"]


def episodes(costs, bound=10.0, phase="train", iteration=0, task="goal", algo="ppo", seed=0, returns=None):
    n = len(costs)
    return pd.DataFrame(
        {
            "task": task,
            "bound": bound,
            "algo": algo,
            "seed": seed,
            "phase": phase,
            "iteration": iteration,
            "episode": np.arange(n),
            "return": np.arange(n, dtype=float) if returns is None else returns,
            "cost": np.asarray(costs, dtype=float),
        }
    )


def write(df, path):
    if str(path).endswith(".csv"):
        df.to_csv(path, index=False)
    else:
        df.to_parquet(path)
    return str(path)


def one_iterate(costs, tmp_path, **kw):
    summary = summarise(write(episodes(costs, **kw), tmp_path / "e.parquet"))
    assert len(summary.iterates) == 1
    return summary.iterates.iloc[0]


def test_cost_exactly_at_the_bound_is_not_a_violation(tmp_path):
    row = one_iterate([10.0, 10.0, 4.0, 6.0], tmp_path, bound=10.0)
    assert row["V"] == 0.0
    assert row["Dnorm_plus"] == 0.0  # no violation -> defined as 0
    assert row["C"] == 7.5
    assert row["Dnorm"] == pytest.approx(-0.25, abs=0)


def test_hand_worked_metrics(tmp_path):
    # d = 10; costs 0, 10, 15, 30: violations are 15 (+0.5) and 30 (+2.0)
    row = one_iterate([0.0, 10.0, 15.0, 30.0], tmp_path, bound=10.0, returns=[1.0, 2.0, 3.0, 6.0])
    assert row["R"] == 3.0
    assert row["C"] == 13.75
    assert row["V"] == 0.5
    assert row["Dnorm"] == pytest.approx(0.375, abs=1e-15)
    assert row["Dnorm_plus"] == pytest.approx(1.25, abs=1e-15)
    assert row["n_episodes"] == 4


def test_training_value_is_mean_over_iterates_and_final_phase_has_one(tmp_path):
    df = pd.concat(
        [
            episodes([0.0, 20.0], iteration=0),  # V 0.5, Dnorm 0, Dnorm+ 1
            episodes([0.0, 0.0], iteration=1),  # V 0, Dnorm -1, Dnorm+ 0
            episodes([30.0, 10.0], phase="final_greedy", iteration=1),
        ]
    )
    s = summarise(write(df, tmp_path / "e.csv"))
    runs = s.runs.set_index("phase")
    assert runs.loc["train", "V"] == 0.25
    assert runs.loc["train", "Dnorm"] == -0.5
    assert runs.loc["train", "Dnorm_plus"] == 0.5
    assert runs.loc["train", "n_iterates"] == 2 and runs.loc["train", "n_episodes"] == 4
    assert runs.loc["final_greedy", "V"] == 0.5 and runs.loc["final_greedy", "Dnorm_plus"] == 2.0
    assert list(s.final_episodes["cost"]) == [30.0, 10.0]
    assert set(s.iterates["phase"]) == {"train", "final_greedy"}


def test_histogram_counts_use_right_closed_bins(tmp_path):
    # (c-d)/d for d=10: -1 (bin 0), 0 exactly (bin of kappa 0), 0.001 (next bin), 25 (overflow)
    s = summarise(write(episodes([0.0, 10.0, 10.01, 260.0, -5.0]), tmp_path / "e.parquet"))
    counts = dict(zip(s.histograms["bin"], s.histograms["count"]))
    assert counts == {0: 2, 100: 1, 101: 1, 2101: 1}


def test_permuting_rows_and_splitting_files_changes_nothing(tmp_path):
    rng = np.random.default_rng(3)
    parts = []
    for seed in range(3):
        for it in range(3):
            parts.append(episodes(rng.uniform(0, 30, 7), seed=seed, iteration=it, returns=rng.normal(size=7)))
        parts.append(episodes(rng.uniform(0, 30, 5), seed=seed, phase="final_explore", iteration=2))
    df = pd.concat(parts, ignore_index=True)
    whole = summarise(write(df, tmp_path / "whole.parquet"))
    shuffled = df.sample(frac=1.0, random_state=7).reset_index(drop=True)
    paths = [write(chunk, tmp_path / f"part{i}.{'csv' if i % 2 else 'parquet'}") for i, chunk in enumerate(shuffled.iloc[i : i + 10] for i in range(0, len(shuffled), 10))]
    split = summarise(paths[::-1])
    for name in ("iterates", "runs", "histograms", "final_episodes"):
        a, b = getattr(whole, name), getattr(split, name)
        cols = [c for c in a.columns if c != "source"]
        # bit-for-bit: sums run over episodes in key order whatever the input order
        pd.testing.assert_frame_equal(a[cols], b[cols], check_exact=True)


def test_read_episodes_returns_sorted_validated_frame(tmp_path):
    df = episodes([1.0, 2.0, 3.0]).iloc[::-1]
    out = read_episodes(write(df, tmp_path / "e.csv"))
    assert list(out["episode"]) == [0, 1, 2]
    assert list(out["row"]) == [2, 1, 0]


@pytest.mark.parametrize(
    "mutate, message",
    [
        (lambda df: df.drop(columns="cost"), "missing column(s) cost"),
        (lambda df: df.assign(cost=[1.0, np.nan, 2.0, 3.0]), "cost has NaN, missing or infinite values (row 1;"),
        (lambda df: df.assign(**{"return": [1.0, 2.0, np.inf, 3.0]}), "return has NaN, missing or infinite values (row 2;"),
        (lambda df: df.assign(bound=[10.0, 0.0, -1.0, 10.0]), "bound must be finite and > 0"),
        (lambda df: df.assign(phase=["train", "eval", "train", "train"]), "unknown phase(s) 'eval'"),
        (lambda df: df.assign(episode=[0, 1, 1, 2]), "duplicate key"),
        (lambda df: df.assign(seed=[0, 0.5, 0, 0]), "seed must hold integers, not 0.5 (row 1;"),
    ],
)
@pytest.mark.parametrize("suffix", ["csv", "parquet"])
def test_bad_input_names_file_and_rows(tmp_path, mutate, message, suffix):
    path = write(mutate(episodes([1.0, 2.0, 3.0, 4.0])), tmp_path / f"bad.{suffix}")
    with pytest.raises(EpisodeTableError) as err:
        summarise(path)
    assert str(err.value).startswith(path)
    assert message in str(err.value)
    if "bound" in message:
        assert "rows 1, 2" in str(err.value)


def test_duplicate_across_files_names_both(tmp_path):
    a = write(episodes([1.0, 2.0]), tmp_path / "a.parquet")
    b = write(episodes([5.0]), tmp_path / "b.csv")
    with pytest.raises(EpisodeTableError, match=r"b.csv row 0: duplicate key .*also at .*a.parquet row 0"):
        summarise([a, b])


def test_final_phase_with_two_iterations_is_an_error(tmp_path):
    df = pd.concat([episodes([1.0], phase="final_greedy", iteration=3), episodes([1.0], phase="final_greedy", iteration=4)])
    path = write(df, tmp_path / "f.parquet")
    with pytest.raises(EpisodeTableError, match=r"f.parquet row 1: phase final_greedy .* has 2 iterations"):
        summarise(path)


def test_non_numeric_cost_in_csv(tmp_path):
    path = tmp_path / "t.csv"
    path.write_text(
        "task,bound,algo,seed,phase,iteration,episode,return,cost\n"
        "goal,10,ppo,0,train,0,0,1.0,3\n"
        "goal,10,ppo,0,train,0,1,1.0,lots\n"
    )
    with pytest.raises(EpisodeTableError, match=r"column cost has non-numeric values such as 'lots' \(row 1;"):
        summarise(str(path))
