"""When does the paper's deployment finding appear on the built-in tasks? A budget study.

The paper finds the final policy with exploration noise safer than the same policy run greedily
(claim 2 of the report's Findings). The default sweep, at the trainer's `cpu` budget, finds the
reverse. This script trains the same grid at several multiples of that budget and prints, per
budget and algorithm (and per task): the share of (task, bound) conditions where noise V (and
Dnorm) is at most greedy, with its stratified-bootstrap CI and verdict (metrics.findings), the
noise-minus-greedy gap, the final returns with and without noise, the policy's final action std
(trace.parquet's `action_std` at the last iterate) and the budget's wall time.

    python benchmarks/budget_study.py --out DIR [--budgets 1 4 16] [--tasks circle goal]
        [--algos ppo_lag p3o] [--seeds 2] [--cores 2] [--report-only]
        [--preset default] [--base-steps N]

Each budget is a sweep of the `default` preset (its bounds; --preset another) with
`train.total_steps` = budget x --base-steps (default: the cpu preset's), in DIR/x{budget}/ (Snakemake target `metrics`: runs, summaries, aggregation,
tiers; no figures). A rerun reuses finished runs; --report-only only reads what is there.
"""
from __future__ import annotations

import argparse
import os
import subprocess
import sys
import time
from pathlib import Path

import pandas as pd
import yaml

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, ROOT)

from algos.config import make_config  # noqa: E402  (no JAX)
from metrics.findings import noise_claim  # noqa: E402


def sweep_dir(out: str, budget: int) -> str:
    return os.path.join(out, f"x{budget}")


def run_budget(out: str, budget: int, args) -> float:
    """Train and evaluate one budget's sweep; its wall time in seconds."""
    folder = sweep_dir(out, budget)
    os.makedirs(folder, exist_ok=True)
    config = {"preset": args.preset, "tasks": list(args.tasks), "algos": list(args.algos), "seeds": args.seeds,
              "train": {"total_steps": budget * args.base_steps},
              "results_dir": "results"}  # each budget's sweep has its own working folder
    with open(os.path.join(folder, "config.yaml"), "w") as f:
        yaml.safe_dump(config, f, sort_keys=False)
    start = time.monotonic()
    cmd = [sys.executable, "-m", "snakemake", "--snakefile", os.path.join(ROOT, "Snakefile"),
           "--workflow-profile", os.path.join(ROOT, "cluster_profiles", "local"), "--cores", str(args.cores),
           "metrics", "--configfile", "config.yaml"]  # the target first: --configfile takes several
    with open(os.path.join(folder, "snakemake.log"), "w") as log:
        done = subprocess.run(cmd, cwd=folder, stdout=log, stderr=subprocess.STDOUT)
    if done.returncode != 0:
        sys.exit(f"budget x{budget}: snakemake exited {done.returncode}; see {folder}/snakemake.log")
    return time.monotonic() - start


def final_action_std(folder: str) -> pd.DataFrame:
    """Per run: the policy's action_std at the last logged iterate."""
    # results/runs/{task}/d{bound}/{algo}/seed{seed}/trace.parquet
    return pd.DataFrame([{"task": trace.parts[-5], "algo": trace.parts[-3],
                          "action_std": float(pd.read_parquet(trace, columns=["action_std"])["action_std"].iloc[-1])}
                         for trace in sorted(Path(folder, "results", "runs").rglob("trace.parquet"))])


def budget_table(out: str, budget: int, algos) -> tuple[pd.DataFrame, pd.DataFrame]:
    """(per algorithm, per algorithm and task) rows of one budget."""
    folder = sweep_dir(out, budget)
    runs = pd.read_parquet(os.path.join(folder, "results", "metrics", "run_metrics.parquet"))
    shares, gaps = noise_claim(runs, algos)
    returns = runs[runs["phase"].isin(["final_explore", "final_greedy"])].pivot_table(
        index=["algo", "task"], columns="phase", values="R", aggfunc="mean")
    stds = final_action_std(folder)
    per_algo = []
    for algo in algos:
        row = {"budget": f"x{budget}", "algo": algo}
        for metric in ("V", "Dnorm"):
            s = shares[(shares["algo"] == algo) & (shares["metric"] == metric)].iloc[0]
            row[f"{metric} noise<=greedy"] = f"{s['share']:.0%} [{s['ci_low']:.0%}, {s['ci_high']:.0%}] {s['verdict']}"
            row[f"{metric} gap"] = round(gaps[(gaps["algo"] == algo) & (gaps["metric"] == metric)]["gap"].mean(), 3)
        row["R noise"] = round(returns.loc[algo, "final_explore"].mean(), 2)
        row["R greedy"] = round(returns.loc[algo, "final_greedy"].mean(), 2)
        row["action std"] = round(stds[stds["algo"] == algo]["action_std"].mean(), 3)
        per_algo.append(row)
    per_task = gaps.pivot_table(index=["algo", "task"], columns="metric", values="gap").add_suffix(" gap")
    per_task = per_task.join(returns.rename(columns={"final_explore": "R noise", "final_greedy": "R greedy"}))
    per_task = per_task.join(stds.groupby(["algo", "task"])["action_std"].mean().rename("action std"))
    per_task = per_task.round(3).reset_index()
    per_task.insert(0, "budget", f"x{budget}")
    return pd.DataFrame(per_algo), per_task


def main(argv=None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--out", required=True, help="folder for the sweeps (one per budget)")
    parser.add_argument("--budgets", type=int, nargs="+", default=[1, 4, 16])
    parser.add_argument("--tasks", nargs="+", default=["circle", "goal"])
    parser.add_argument("--algos", nargs="+", default=["ppo_lag", "p3o"])
    parser.add_argument("--seeds", type=int, default=2)
    parser.add_argument("--cores", type=int, default=2)
    parser.add_argument("--preset", default="default", help="the sweep preset each budget extends")
    parser.add_argument("--base-steps", type=int, default=make_config("cpu").total_steps,
                        help="steps per run at budget 1 (default: the cpu preset's)")
    parser.add_argument("--report-only", action="store_true", help="only read the sweeps already in --out")
    args = parser.parse_args(argv)
    walls = {}
    if not args.report_only:
        for budget in args.budgets:
            walls[budget] = run_budget(args.out, budget, args)
            print(f"budget x{budget}: trained and evaluated in {walls[budget]:.0f} s", flush=True)
    tables = [budget_table(args.out, b, args.algos) for b in args.budgets]
    per_algo = pd.concat([t[0] for t in tables], ignore_index=True)
    if walls:
        per_algo["sweep wall s"] = per_algo["budget"].map({f"x{b}": round(w) for b, w in walls.items()})
    pd.set_option("display.width", 200)
    print("\nper budget and algorithm (conditions: tasks x bounds; V, Dnorm: share of conditions where the "
          "final policy with noise is at most greedy, 95 % CI, verdict; gap: noise minus greedy)")
    print(per_algo.to_string(index=False))
    print("\nper budget, algorithm and task")
    print(pd.concat([t[1] for t in tables], ignore_index=True).to_string(index=False))


if __name__ == "__main__":
    main()
