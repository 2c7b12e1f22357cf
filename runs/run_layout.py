"""The run folder's layout: where a sweep's runs live and what their files are called.

A run folder `results/runs/{task}/d{bound}/{algo}/seed{seed}/` ({task}: the task id, task_id;
the default sweep's; every sweep has its own results folder, workflow.sweep: `results-tiny/runs/...` for `tiny`) holds
- `episodes.parquet`, `trace.parquet`: written by the trainer, each atomically;
- `spec.json`: the run spec, what to train (trainer preset name and the resolved config),
  written by the workflow before the run is trained and read by the trainer;
- `run.json`: written last by the trainer; it vouches for the two tables (runs.runfolder
  writes it and says when a folder is complete);
- `summary.parquet`: stage 1 of the metrics (the workflow's summarise rule);
- `verified.json`: the size and mtime at which each table last hashed to run.json's sha256
  (Snakemake touches a job's outputs after it ends, so run.json's mtimes are older);
- `checkpoint/`: while a run is interrupted (runs.checkpoint);
- `progress.json`: while a run trains, its updates done, rate and time left (runs.pack);
- `job.json`: the job marker and lock: who runs (or last ran) this folder (runs.runlock);
- `failure.json`: why the last attempt failed, when it failed for good (not a time limit).

Why here: the workflow owns the runs and the trainer writes them, and each must name the same
paths without importing the other. `metrics` is the bottom layer every part already depends
on (and every install has), and this module is names and paths only (no JAX, no writers), so
Snakemake's process, the job wrappers and the trainer all read it at the cost of a numpy import.
"""
from __future__ import annotations

import math
import os
import re
from pathlib import Path

import numpy as np

RESULTS_DIR = "results"  # the default sweep's folder (workflow.sweep.results_dir names each sweep's)
RUNS_ROOT = RESULTS_DIR + "/runs"
RUN_DIR = RUNS_ROOT + "/{task}/d{bound}/{algo}/seed{seed}"
EPISODES = "episodes.parquet"
TRACE = "trace.parquet"
RUN_JSON = "run.json"
SPEC = "spec.json"
RUN_FILES = (EPISODES, TRACE, RUN_JSON)  # run.json last: the trainer writes it after the others
SUMMARY = "summary.parquet"
CHECKPOINT_DIR = "checkpoint"
PROGRESS = "progress.json"
JOB_MARKER = "job.json"
FAILURE_RECORD = "failure.json"
VERIFIED = "verified.json"
# What the path pieces may look like (Snakemake wildcard constraints use the same patterns).
# A task id is the task's name at level 1 and NAME@lL at level L >= 2 (task_id).
WILDCARD_PATTERNS = {"task": r"[a-z][a-z0-9_]*(@l([2-9]|[1-9][0-9]+))?", "bound": r"[0-9]+(\.[0-9]+)?",
                     "algo": r"[a-z][a-z0-9_]*", "seed": r"[0-9]+"}


LEVEL_MARK = "@l"


def task_id(name: str, level: int = 1) -> str:
    """What names a run's task in its folder, tables and labels: `name` at level 1 (so level-1
    runs keep their names), `name@lL` at level L >= 2, so runs of two levels never mix."""
    if not isinstance(level, int) or isinstance(level, bool) or level < 1:
        raise ValueError(f"task {name!r}: level must be an int >= 1, got {level!r}")
    return name if level == 1 else f"{name}{LEVEL_MARK}{level}"


def parse_task_id(text: str) -> tuple[str, int]:
    """(name, level) of a task id (the inverse of task_id); ValueError if it is not one."""
    text = str(text)
    if not re.fullmatch(WILDCARD_PATTERNS["task"], text):
        raise ValueError(f"{text!r} is not a task id: a task name (lower case, digits, _) optionally followed by "
                         f"{LEVEL_MARK}L for a level L >= 2, e.g. safe_goal_point{LEVEL_MARK}2")
    name, _, level = text.partition(LEVEL_MARK)
    return name, int(level) if level else 1


MAX_BOUND_LABEL = 32  # characters: bounds 1e-30 .. 1e31 fit; a 301-digit folder name does not


def bound_label(bound: float) -> str:
    """Path label of a bound, plain decimal digits: 25 -> '25', 12.5 -> '12.5', 1e-05 -> '0.00001'.

    The one rule for a bound in a file or folder name: the shortest digits that read back as the
    same float, never an exponent, so the label matches WILDCARD_PATTERNS["bound"] and the
    trainer, given the label, gets the same bound; at most MAX_BOUND_LABEL characters (1e+300
    would be 301 digits, past the file system's limit on a name). ValueError otherwise: the
    config check calls this at plan time, so no job meets a bound without a label.
    """
    bound = float(bound)
    if not (math.isfinite(bound) and bound > 0):
        raise ValueError(f"bound {bound} must be a finite number > 0")
    label = np.format_float_positional(bound, trim="-")
    if len(label) > MAX_BOUND_LABEL:
        raise ValueError(f"{bound!r} has no folder label of at most {MAX_BOUND_LABEL} characters (written "
                         f"without an exponent it is {len(label)})")
    if not re.fullmatch(WILDCARD_PATTERNS["bound"], label) or float(label) != bound:
        raise ValueError(f"{bound!r} has no exact folder label (got {label!r})")
    return label


def run_id(task: str, bound: str | float, algo: str, seed: int | str) -> str:
    """`task/d<bound label>/algo/seed<seed>`; a float bound is turned into its label."""
    label = bound if isinstance(bound, str) else bound_label(bound)
    return f"{task}/d{label}/{algo}/seed{seed}"


def config_run_id(config) -> str:
    """The run id of a trainer config (anything with task, level, bound, algo, seed)."""
    return run_id(task_id(config.task, config.level), config.bound, config.algo, config.seed)


def run_dir(root: str | os.PathLike, task: str, bound: str | float, algo: str, seed: int | str,
            results_dir: str = RESULTS_DIR) -> Path:
    """The run folder under a sweep's working directory `root` (its results folder `results_dir`)."""
    return Path(root) / results_dir / "runs" / run_id(task, bound, algo, seed)


def run_of_path(path: str | os.PathLike) -> dict:
    """task, bound, algo and seed of a file in a run folder (the inverse of `run_dir`)."""
    parts = Path(path).as_posix().split("/")
    try:
        task, d, algo, seed = parts[-5], parts[-4], parts[-3], parts[-2]
        if not (d.startswith("d") and seed.startswith("seed")):
            raise ValueError
        return {"task": task, "bound": float(d[1:]), "algo": algo, "seed": int(seed[4:])}
    except (IndexError, ValueError):
        raise ValueError(f"{path}: expected a file of a run folder .../{{task}}/d{{bound}}/{{algo}}/seed{{seed}}/"
                         ) from None
