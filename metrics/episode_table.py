"""The episode table as its writers produce it: typed columns and the rows of a block of episodes.

`metrics/schema.py` names the columns every reader checks; this module gives the Arrow types
a writer uses and builds the rows of J iterates of N episodes. The trainer writes a run's
`episodes.parquet` with it (runs.pack), and a recorder folder's files hold the same columns
plus the recorder's `trainer_step` label (recorders.writer), so both read back alike.
"""
from __future__ import annotations

import numpy as np
import pyarrow as pa

EPISODE_SCHEMA = pa.schema([
    ("task", pa.string()), ("bound", pa.float64()), ("algo", pa.string()), ("seed", pa.int64()),
    ("phase", pa.string()), ("iteration", pa.int64()), ("episode", pa.int64()),
    ("return", pa.float64()), ("cost", pa.float64()), ("length", pa.int64()),
])


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
    """One table of `episode_rows` blocks; refuses non-finite returns or costs."""
    columns = {name: np.concatenate([b[name] for b in blocks]) for name in EPISODE_SCHEMA.names}
    table = pa.Table.from_pydict(columns, schema=EPISODE_SCHEMA)
    if not np.all(np.isfinite(columns["return"])) or not np.all(np.isfinite(columns["cost"])):
        raise ValueError("episodes: non-finite return or cost produced by training; refusing to write")
    return table
