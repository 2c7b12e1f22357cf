"""A finished sweep's outcome against the default preset's calibration goals: per algorithm and
phase the tier and its bootstrap confidence, each task's returns against a uniform random
policy's, and the largest violation rate of each (task, bound) condition.

    python benchmarks/sweep_outcome.py [SWEEP_DIR] [--preset NAME] [--random-episodes 128]

SWEEP_DIR is the folder the sweep ran in (default .): its results/metrics/ is read for the
default preset, results-NAME/metrics/ with --preset NAME (without it, the one results*/
folder there); a results folder itself may be given. The
random policy runs on the built-in tasks with the trainer preset's T and task options.
"""
from __future__ import annotations

import argparse
import json
import os
import sys

import pandas as pd

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))


def random_returns(preset: str, episodes: int) -> dict:
    """Mean and std of a uniform random policy's episode return and cost, per task."""
    import jax

    import envs
    from algos.config import make_config

    out = {}
    for task in envs.TASKS:
        cfg = make_config(preset, dict(task=task))
        env = envs.make(task, episode_length=cfg.episode_length, **dict(cfg.env_kwargs))
        states = jax.vmap(env.reset)(jax.random.split(jax.random.PRNGKey(0), episodes))

        def body(s, k):
            s = jax.vmap(env.step)(s, jax.random.uniform(k, (episodes, 2), minval=-1, maxval=1))
            return s, None

        run = jax.jit(lambda s, k: jax.lax.scan(body, s, jax.random.split(k, cfg.episode_length))[0])
        last = run(states, jax.random.PRNGKey(1))  # every episode ends at step T
        ret, cost = last.finished_return, last.finished_cost
        out[task] = {"return": float(ret.mean()), "return_std": float(ret.std()), "cost": float(cost.mean())}
    return out


def main(argv=None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("sweep", nargs="?", default=".")
    parser.add_argument("--preset", help="the sweep's preset: reads results-NAME/ (default: results/)")
    parser.add_argument("--random-episodes", type=int, default=128)
    args = parser.parse_args(argv)
    from metrics.safe_text import read_csv
    from workflow.sweep import folder_in

    folder = folder_in(args.sweep, args.preset)
    print(f"sweep outcome of {folder}")
    m = os.path.join(folder, "metrics")
    tiers = read_csv(os.path.join(m, "tiers.csv"))  # algorithm names as text (an algorithm named NA stays one)
    tiers["P(tier)"] = [row[f"p_tier{int(row.tier)}"] for _, row in tiers.iterrows()]
    print("tiers (P(tier): share of bootstrap replicates in the shown tier)")
    print(tiers[["algo", "phase", "tier", "P(tier)"]].to_string(index=False))
    runs = pd.read_parquet(os.path.join(m, "run_metrics.parquet"))
    preset = json.load(open(next(os.path.join(d, "run.json") for d, _, f in os.walk(
        os.path.join(folder, "runs")) if "run.json" in f))).get("preset", "cpu")
    rnd = random_returns(preset, args.random_episodes)
    print(f"\nmean return per task, algorithm and phase (seed and bound means); random policy: {args.random_episodes} episodes")
    per_task = runs.groupby(["task", "algo", "phase"])["R"].mean().unstack("phase").round(2)
    for task, frame in per_task.groupby(level=0):
        print(f"{task} (random {rnd[task]['return']:.2f} +- {rnd[task]['return_std']:.2f}, cost {rnd[task]['cost']:.1f})")
        print(frame.droplevel(0).to_string())
    cond = pd.read_parquet(os.path.join(m, "condition_stats.parquet"))
    print("\nlargest seed-mean V per (task, bound) over algorithms and phases (0: no one violates it)")
    print(cond.groupby(["task", "bound"])["V_mean"].max().unstack("bound").round(2).to_string())


if __name__ == "__main__":
    main()
