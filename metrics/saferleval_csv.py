"""Results of the paper's own suite (SafeRLEval) as an episode table.

Its training script writes one `<run>_summary.csv` per seed: one row with the run's `env`,
`algo`, `bound` and `seed`, training averages (`train_*`), and per final phase the mean return
and a JSON list of the episode costs: `test_reward` / `test_episode_costs` with exploration
noise (filled in by its stochastic evaluation) and `det_test_reward` / `det_test_episode_costs`
greedy. Each listed cost becomes an episode of the final phase (iteration 0); its return is the
phase's mean return, so R is exact and nothing else reads returns. Training is only there as
averages over iterates, not episode costs, so it cannot become episodes: the notes say so, and
the engine then reports the final phases alone.
"""

from __future__ import annotations

import json
import math
import os
from pathlib import Path

import pandas as pd

from .safe_text import read_csv
from .schema import EpisodeTableError

SUFFIX = "_summary.csv"
KEYS = {"env": "task", "algo": "algo", "bound": "bound", "seed": "seed"}
PHASES = {"final_explore": ("test_episode_costs", "test_reward"),
          "final_greedy": ("det_test_episode_costs", "det_test_reward")}
TRAINING_NOTE = ("training: SafeRLEval's summary files hold averages over iterates (train_*), not episode costs, "
                 "so no training episodes are read; the results cover the final phases only")


def summary_files(paths) -> list[str]:
    """The files given, with a folder standing for every `*_summary.csv` in it."""
    out = []
    for path in map(os.fspath, paths):
        if os.path.isdir(path):
            found = sorted(str(p) for p in Path(path).glob(f"*{SUFFIX}"))
            if not found:
                raise EpisodeTableError(f"{path}: no SafeRLEval summary files (*{SUFFIX}) in this folder")
            out += found
        else:
            out.append(path)
    return out


def _costs(path, i, column, text) -> list[float]:
    try:
        costs = json.loads(text) if isinstance(text, str) else []
    except json.JSONDecodeError:
        raise EpisodeTableError(f"{path}: row {i}, column {column}: not a JSON list of costs: {text[:40]!r}") from None
    if not isinstance(costs, list) or not all(isinstance(c, (int, float)) and math.isfinite(c) for c in costs):
        raise EpisodeTableError(f"{path}: row {i}, column {column}: expected a JSON list of finite costs")
    return [float(c) for c in costs]


def read_file(path) -> tuple[pd.DataFrame, list[str]]:
    """(episode rows, notes on what the file lacks) of one summary file."""
    try:
        table = read_csv(path)  # env and algo as text: an algorithm named NA stays one
    except (OSError, ValueError) as err:
        raise EpisodeTableError(f"{path}: cannot be read as CSV ({str(err).splitlines()[0]})") from None
    missing = [c for c in KEYS if c not in table.columns]
    if missing:
        raise EpisodeTableError(f"{path}: not a SafeRLEval summary file: missing column(s) {missing}")
    blocks, notes = [], []
    for i, row in table.iterrows():
        run = {ours: row[theirs] for theirs, ours in KEYS.items()}
        for theirs in ("env", "algo"):
            if not run[KEYS[theirs]].strip():
                raise EpisodeTableError(f"{path}: row {i}, column {theirs}: empty name {run[KEYS[theirs]]!r}")
        for phase, (costs_col, reward_col) in PHASES.items():
            costs = _costs(path, i, costs_col, row.get(costs_col))
            if not costs:
                notes.append(f"{path}: row {i} has no {costs_col} (empty or missing): no {phase} episodes")
                continue
            reward = row.get(reward_col)
            if reward is None or not math.isfinite(float(reward)):
                raise EpisodeTableError(f"{path}: row {i}, column {reward_col}: the mean return of the {len(costs)} "
                                        f"{phase} episodes is missing")
            blocks.append(pd.DataFrame({**run, "phase": phase, "iteration": 0, "episode": range(len(costs)),
                                        "return": float(reward), "cost": costs}))
    if not blocks:
        raise EpisodeTableError(f"{path}: no final episode costs ({', '.join(c for c, _ in PHASES.values())} "
                                "empty or missing); SafeRLEval writes them after its evaluations")
    return pd.concat(blocks, ignore_index=True), notes


def read_saferleval(paths) -> tuple[pd.DataFrame, list[str]]:
    """One episode table of every summary file (folders: their *_summary.csv files), and the notes."""
    frames, notes = [], [TRAINING_NOTE]
    for path in summary_files(paths):
        frame, lacks = read_file(path)
        frames.append(frame)
        notes += lacks
    episodes = pd.concat(frames, ignore_index=True)
    episodes["bound"] = episodes["bound"].astype(float)
    episodes["seed"] = episodes["seed"].astype("int64")
    return episodes, notes


__all__ = ["read_saferleval", "summary_files"]
