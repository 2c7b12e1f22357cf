"""A small synthetic sweep (episode table and traces) for the product tests and demos.

Shapes follow the episode table (docs/metrics.md) and the run folder (docs/algos.md): one row per episode with task, bound,
algo, seed, phase, iteration, episode, return, cost, length; one trace row per iterate with
iteration, env_steps, multiplier (NaN for PPO). Algorithms differ on purpose: PPO ignores the
bound, PPO-Lag sits near it, P3O stays under it, FOCOPS is safe with noise but not greedy.
"""
from __future__ import annotations

import numpy as np
import pandas as pd

# Mean episode cost as a multiple of the bound, per algorithm: (training end, final noise, final greedy)
_COST_LEVEL = {"ppo": (2.0, 2.0, 2.2), "ppo_lag": (0.95, 0.9, 1.05), "p3o": (0.6, 0.55, 0.5),
               "focops": (0.8, 0.7, 1.3)}
_RETURN_LEVEL = {"ppo": 30.0, "ppo_lag": 22.0, "p3o": 15.0, "focops": 20.0}
STEPS_PER_ITERATE = 4096


def synthetic_sweep(tasks=("goal", "circle"), bounds=(15.0, 25.0), algos=("ppo", "ppo_lag", "p3o", "focops"),
                    seeds=(0, 1, 2), iterations: int = 8, train_episodes: int = 8, final_episodes: int = 20,
                    rng_seed: int = 0) -> tuple[pd.DataFrame, pd.DataFrame]:
    """Return (episodes, traces) for a grid of tasks x bounds x algos x seeds."""
    rng = np.random.default_rng(rng_seed)
    episode_rows, trace_rows = [], []
    for t_i, task in enumerate(tasks):
        for bound in bounds:
            for algo in algos:
                end, noise, greedy = _COST_LEVEL.get(algo, (1.0, 1.0, 1.0))
                for seed in seeds:
                    offset = rng.normal(0, 0.08)
                    for j in range(iterations):
                        progress = j / max(iterations - 1, 1)
                        level = (1.6 * (1 - progress) + end * progress + offset) * bound
                        ret = _RETURN_LEVEL.get(algo, 10.0) * (0.3 + 0.7 * progress) * (1 + 0.2 * t_i)
                        costs = np.maximum(0.0, rng.normal(level, 0.25 * bound, train_episodes))
                        returns = rng.normal(ret, 2.0, train_episodes)
                        episode_rows.append(_block(task, bound, algo, seed, "train", j, returns, costs))
                        mult = np.nan if algo == "ppo" else max(0.0, (1.6 - 1.0) * 2 * progress + rng.normal(0, 0.05))
                        trace_rows.append({"task": task, "bound": bound, "algo": algo, "seed": seed, "iteration": j,
                                           "env_steps": (j + 1) * STEPS_PER_ITERATE, "multiplier": mult})
                    for phase, lvl in (("final_explore", noise), ("final_greedy", greedy)):
                        costs = np.maximum(0.0, rng.normal((lvl + offset) * bound, 0.2 * bound, final_episodes))
                        returns = rng.normal(_RETURN_LEVEL.get(algo, 10.0), 2.0, final_episodes)
                        episode_rows.append(_block(task, bound, algo, seed, phase, iterations - 1, returns, costs))
    return pd.concat(episode_rows, ignore_index=True), pd.DataFrame(trace_rows)


def _block(task, bound, algo, seed, phase, iteration, returns, costs) -> pd.DataFrame:
    n = len(costs)
    return pd.DataFrame({"task": task, "bound": float(bound), "algo": algo, "seed": int(seed), "phase": phase,
                         "iteration": int(iteration), "episode": np.arange(n), "return": returns, "cost": costs,
                         "length": 100})


def write_sweep(root, episodes: pd.DataFrame, traces: pd.DataFrame) -> list[dict]:
    """Lay the sweep out as run folders (docs/algos.md) under `root`: per run
    episodes.parquet, trace.parquet and the metrics engine's stage-1 summary.parquet.
    Returns the runs (task, bound, algo, seed, dir)."""
    import os

    from metrics.summary import summarise, write_summary
    from runs.run_layout import run_id

    runs = []
    for (task, bound, algo, seed), group in episodes.groupby(["task", "bound", "algo", "seed"], sort=True):
        folder = os.path.join(str(root), run_id(task, float(bound), algo, seed))  # the run folders' one label rule
        os.makedirs(folder, exist_ok=True)
        group.to_parquet(os.path.join(folder, "episodes.parquet"), index=False)
        trace = traces[(traces["task"] == task) & (traces["bound"] == bound) & (traces["algo"] == algo)
                       & (traces["seed"] == seed)]
        trace.drop(columns=["task", "bound", "algo", "seed"]).to_parquet(os.path.join(folder, "trace.parquet"),
                                                                           index=False)
        write_summary(summarise(os.path.join(folder, "episodes.parquet")), os.path.join(folder, "summary.parquet"))
        runs.append({"task": task, "bound": float(bound), "algo": algo, "seed": int(seed), "dir": folder})
    return runs
