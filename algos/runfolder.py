"""Writing a run's folder: episodes.parquet, trace.parquet, run.json.

Each file is written to a temporary name in the run folder and renamed into place; run.json
goes last, so its presence marks a complete run.
"""
from __future__ import annotations

import json

import numpy as np
import pandas as pd
import pyarrow as pa
import pyarrow.parquet as pq

from metrics.atomic import atomic_write as _atomic

EPISODE_SCHEMA = pa.schema([
    ("task", pa.string()), ("bound", pa.float64()), ("algo", pa.string()), ("seed", pa.int64()),
    ("phase", pa.string()), ("iteration", pa.int64()), ("episode", pa.int64()),
    ("return", pa.float64()), ("cost", pa.float64()), ("length", pa.int64()),
])
TRACE_COLUMNS = ("iteration", "update", "env_steps", "wall_time", "multiplier", "policy_loss", "value_loss",
                 "cost_value_loss", "entropy", "approx_kl", "mean_return", "mean_cost")


def write_parquet(path: str, table: pa.Table) -> None:
    _atomic(path, lambda tmp: pq.write_table(table, tmp))


def write_json(path: str, obj: dict) -> None:
    def write(tmp):
        with open(tmp, "w") as f:
            json.dump(obj, f, indent=1, sort_keys=True, allow_nan=True)
            f.write("\n")
    _atomic(path, write)


def episode_rows(task: str, bound: float, algo: str, seed: int, phase: str, iterations, ret, cost, length) -> dict:
    """Columns for a [J, N] block of episodes (iterations has length J)."""
    ret, cost, length = (np.asarray(x) for x in (ret, cost, length))
    n_iter, n_env = ret.shape
    iterations = np.repeat(np.asarray(iterations, np.int64), n_env)
    return {
        "task": np.full(ret.size, task, dtype=object), "bound": np.full(ret.size, float(bound)),
        "algo": np.full(ret.size, algo, dtype=object), "seed": np.full(ret.size, int(seed), np.int64),
        "phase": np.full(ret.size, phase, dtype=object), "iteration": iterations,
        "episode": np.tile(np.arange(n_env, dtype=np.int64), n_iter),
        "return": ret.astype(np.float64).ravel(), "cost": cost.astype(np.float64).ravel(),
        "length": length.astype(np.int64).ravel(),
    }


def episodes_table(blocks: list[dict]) -> pa.Table:
    columns = {name: np.concatenate([b[name] for b in blocks]) for name in EPISODE_SCHEMA.names}
    table = pa.Table.from_pydict(columns, schema=EPISODE_SCHEMA)
    if not np.all(np.isfinite(columns["return"])) or not np.all(np.isfinite(columns["cost"])):
        raise ValueError("episodes: non-finite return or cost produced by training; refusing to write")
    return table


def trace_table(trace: dict) -> pa.Table:
    frame = pd.DataFrame({name: trace[name] for name in TRACE_COLUMNS})
    return pa.Table.from_pandas(frame, preserve_index=False)
