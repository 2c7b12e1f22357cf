"""A complete run folder without training: tiny episode and trace tables, written by the
run-folder writers, and a run.json recording their row counts (tests of the workflow)."""
from __future__ import annotations

from pathlib import Path

import numpy as np

from algos import programs
from runs import runfolder
from algos.trace_schema import TRACE_COLUMNS
from metrics import episode_table


from runs import run_layout
def tiny_config(task, bound, algo, seed) -> dict:
    """The config the tiny sweep preset's spec gives this run (so the workflow takes it as done)."""
    from workflow import config_validation as cv

    return cv.run_spec(cv.resolve({"preset": "tiny"}), task, bound, algo, seed)["config"]


def complete_run(folder, task="circle", bound=25.0, algo="ppo", seed=0, code_version=None, cost=None,
                 config=None) -> Path:
    folder = Path(folder)
    folder.mkdir(parents=True, exist_ok=True)
    n_iter, n_env = 2, 3
    costs = np.full((n_iter, n_env), 10.0) if cost is None else np.full((n_iter, n_env), float(cost))
    blocks = [episode_table.episode_rows(task, bound, algo, seed, "train", range(n_iter), np.ones((n_iter, n_env)),
                                     costs, np.full((n_iter, n_env), 64))]
    for phase in ("final_explore", "final_greedy"):
        blocks.append(episode_table.episode_rows(task, bound, algo, seed, phase, [n_iter - 1], np.ones((1, n_env)),
                                             costs[:1], np.full((1, n_env), 64)))
    episodes = episode_table.episodes_table(blocks)
    trace = runfolder.trace_table({name: np.arange(n_iter, dtype=np.float64) for name in TRACE_COLUMNS})
    runfolder.write_parquet(folder / run_layout.EPISODES, episodes)
    runfolder.write_parquet(folder / run_layout.TRACE, trace)
    runfolder.write_json(folder / run_layout.RUN_JSON, {
        "complete": True, "config": tiny_config(task, bound, algo, seed) if config is None else config,
        "files": {run_layout.EPISODES: runfolder.file_record(folder / run_layout.EPISODES, episodes.num_rows),
                  run_layout.TRACE: runfolder.file_record(folder / run_layout.TRACE, trace.num_rows)},
        "code_version": programs.code_version() if code_version is None else code_version})
    return folder
