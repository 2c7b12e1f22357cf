"""Each algorithm's characteristic behaviour in a finished sweep, from its run folders.

    python benchmarks/algo_behaviour.py [SWEEP_DIR] [--preset NAME]

Reads the sweep's runs/*/d*/*/seed*/ (episodes.parquet, trace.parquet) in SWEEP_DIR (default
.): results/ for the default preset, results-NAME/ with --preset NAME (without it, the one
results*/ folder there), or SWEEP_DIR itself when it is a results folder, and
prints, per algorithm over all its runs, then as paired comparisons on the same
(task, bound, seed):

* peak multiplier: the largest value of the trace's `multiplier` column of a run;
* cost overshoot: after the iterate cost first fell to d or below, the largest relative excess
  max((C_i - d) / d) of a later iterate (0 when it never rose above d again);
* crossings: how often the iterate cost crossed d;
* greedy within budget: the share of the final greedy episodes with cost <= d.

PPO-PID's multiplier is compared with PPO-Lag's (the PID controller is meant to overshoot
less), PPO-Saute's greedy episodes with PPO's (Saute is meant to keep the episode cost within
the budget more often), CRPO's cost-step share is its `multiplier` column's mean.
"""
from __future__ import annotations

import argparse
import glob
import os
import sys

import numpy as np
import pandas as pd

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))


def run_rows(sweep_dir: str, preset: str | None = None) -> pd.DataFrame:
    """One row per run folder with both tables: its keys and the behaviour figures above."""
    from workflow.sweep import folder_in

    rows = []
    runs = os.path.join(folder_in(sweep_dir, preset), "runs")
    pattern = os.path.join(glob.escape(runs), "*", "d*", "*", "seed*", "trace.parquet")
    for trace_path in sorted(glob.glob(pattern)):
        folder = os.path.dirname(trace_path)
        episodes_path = os.path.join(folder, "episodes.parquet")
        if not os.path.exists(episodes_path):
            continue
        episodes = pd.read_parquet(episodes_path)
        trace = pd.read_parquet(trace_path)
        task, bound, algo, seed = (episodes[k].iloc[0] for k in ("task", "bound", "algo", "seed"))
        train = episodes[episodes.phase == "train"].groupby("iteration").cost.mean().to_numpy()
        greedy = episodes[episodes.phase == "final_greedy"].cost.to_numpy()
        above = train > bound
        first_ok = int(np.argmax(~above)) if (~above).any() else len(train)
        later = train[first_ok + 1:]
        multiplier = trace["multiplier"].to_numpy(dtype=float)
        rows.append({
            "task": task, "bound": float(bound), "algo": algo, "seed": int(seed),
            "train_C": float(train.mean()), "greedy_C": float(greedy.mean()),
            "peak_multiplier": float(np.nanmax(multiplier)) if np.isfinite(multiplier).any() else np.nan,
            "mean_multiplier": float(np.nanmean(multiplier)) if np.isfinite(multiplier).any() else np.nan,
            "overshoot": float(max(0.0, ((later - bound) / bound).max())) if later.size else 0.0,
            "crossings": int(np.count_nonzero(above[1:] != above[:-1])),
            "greedy_within": float(np.mean(greedy <= bound)),
        })
    if not rows:
        raise SystemExit(f"{runs}: no run folders with episodes.parquet and trace.parquet")
    return pd.DataFrame(rows)


def paired(runs: pd.DataFrame, a: str, b: str, column: str) -> pd.DataFrame:
    """`column` of algorithms a and b side by side on their common (task, bound, seed)."""
    keys = ["task", "bound", "seed"]
    left = runs[runs.algo == a].set_index(keys)[column].rename(a)
    right = runs[runs.algo == b].set_index(keys)[column].rename(b)
    return pd.concat([left, right], axis=1, join="inner")


def describe_pair(runs: pd.DataFrame, a: str, b: str, column: str, lower_is: str) -> str:
    both = paired(runs, a, b, column)
    if both.empty:
        return f"{column}: no common (task, bound, seed) of {a} and {b}"
    wins = int((both[a] < both[b]).sum()) if lower_is == a else int((both[a] > both[b]).sum())
    ties = int((both[a] == both[b]).sum())
    by_task = both.groupby(level="task").mean().round(3)
    return (f"{column}, {a} vs {b} on {len(both)} paired runs: median {both[a].median():.3g} vs "
            f"{both[b].median():.3g}; {a} {'lower' if lower_is == a else 'higher'} in {wins}, equal in {ties}\n"
            f"  per task (means):\n" + by_task.to_string().replace("\n", "\n  "))


def main(argv=None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("sweep_dir", nargs="?", default=".")
    parser.add_argument("--preset", help="the sweep's preset: reads results-NAME/ (default: results/)")
    args = parser.parse_args(argv)
    runs = run_rows(args.sweep_dir, args.preset)
    columns = ["train_C", "greedy_C", "greedy_within", "peak_multiplier", "mean_multiplier", "overshoot", "crossings"]
    print(f"{len(runs)} runs in {args.sweep_dir}; per algorithm, mean over its runs:")
    print(runs.groupby("algo")[columns].mean().round(3).to_string())
    print()
    print(describe_pair(runs, "ppo_pid", "ppo_lag", "peak_multiplier", lower_is="ppo_pid"))
    print(describe_pair(runs, "ppo_pid", "ppo_lag", "overshoot", lower_is="ppo_pid"))
    print(describe_pair(runs, "ppo_pid", "ppo_lag", "crossings", lower_is="ppo_pid"))
    print(describe_pair(runs, "ppo_saute", "ppo", "greedy_within", lower_is="ppo"))
    print(describe_pair(runs, "crpo", "ppo", "train_C", lower_is="crpo"))
    print(describe_pair(runs, "cpo", "ppo", "train_C", lower_is="cpo"))


if __name__ == "__main__":
    main()
