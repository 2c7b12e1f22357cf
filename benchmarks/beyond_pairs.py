"""Each algorithm against a reference (PPO-Lag) on the same (task, bound, seed), from a sweep's
results-beyond/metrics/run_metrics.parquet (the beyond preset's folder; any sweep's file may be given).

    python benchmarks/beyond_pairs.py [METRICS_FILE] [--reference ppo_lag]

Per algorithm, over the pairs both trained: the medians of training V, final-greedy V and
Dnorm+, training violations (episodes with C > d) and training and final-greedy return, for it
and the reference, and in how many pairs it is better (lower V, Dnorm+, violations; higher return) and worse.
"""
from __future__ import annotations

import argparse
import sys

import pandas as pd

KEYS = ["task", "bound", "seed"]
# (column, phase, the better direction): lower is better but for return
FIGURES = [("V", "train", -1), ("violations", "train", -1), ("R", "train", 1),
           ("V", "final_greedy", -1), ("Dnorm_plus", "final_greedy", -1), ("R", "final_greedy", 1)]


def paired(metrics: pd.DataFrame, reference: str) -> pd.DataFrame:
    """One row per (algorithm, figure): the two medians over the pairs and the better-pair count."""
    metrics = metrics.assign(violations=metrics["V"] * metrics["n_episodes"])
    rows = []
    for algo in [a for a in metrics["algo"].unique() if a != reference]:
        for column, phase, sign in FIGURES:
            def figure(name):
                part = metrics[(metrics["algo"] == name) & (metrics["phase"] == phase)]
                return part.set_index(KEYS)[column]
            both = pd.concat({"algo": figure(algo), "ref": figure(reference)}, axis=1).dropna()
            gain = (both["algo"] - both["ref"]) * sign
            rows.append({"algo": algo, "figure": f"{phase} {column}", "pairs": len(both),
                         "median": both["algo"].median(), "reference median": both["ref"].median(),
                         "better in": int((gain > 0).sum()), "worse in": int((gain < 0).sum())})
    return pd.DataFrame(rows)


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("metrics", nargs="?", default="results-beyond/metrics/run_metrics.parquet")
    parser.add_argument("--reference", default="ppo_lag")
    args = parser.parse_args(argv)
    try:
        metrics = pd.read_parquet(args.metrics)
    except (OSError, ValueError) as exc:
        print(f"beyond_pairs: cannot read {args.metrics}: {exc}", file=sys.stderr)
        return 2
    if args.reference not in set(metrics["algo"]):
        print(f"beyond_pairs: {args.metrics}: no runs of the reference algo {args.reference!r}", file=sys.stderr)
        return 2
    print(paired(metrics, args.reference).to_string(index=False, float_format=lambda v: f"{v:.3g}"))
    return 0


if __name__ == "__main__":
    sys.exit(main())
