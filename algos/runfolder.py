"""The run folder: its contract (paths, bound labels, file names, markers) and its writers.

This module is the one place that says what a run folder is. The trainer (algos.train), the
sweep's rule files (workflow/rules/common.smk), the job wrapper (workflow.train_job), the
status report (workflow.status) and the products import these names; it imports nothing from
`workflow`, so the trainer can use it alone.

A run folder `results/runs/{task}/d{bound}/{algo}/seed{seed}/` holds
- `episodes.parquet`, `trace.parquet`: written by the trainer, each atomically;
- `spec.json`: the run spec, what to train (trainer preset name and the resolved config),
  written by the workflow before the run is trained (`write_spec`) and read by the trainer;
- `run.json`: written last; it records the run's config, the rows, size and sha256 of the
  two tables, and every code version that trained the run, so "complete" means every file
  is present *and* agrees with it (`incomplete_reason`);
- `summary.parquet`: stage 1 of the metrics (the workflow's summarise rule);
- `checkpoint/`: while a run is interrupted (algos.checkpoint);
- `job.json`: the job marker and lock: who runs (or last ran) this folder (algos.runlock);
- `failure.json`: why the last attempt failed, when it failed for good (not a time limit).
"""
from __future__ import annotations

import hashlib
import json
import math
import os
from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq

from metrics.atomic import atomic_write as _atomic

# ---- the contract: names and paths ------------------------------------------------------
RUNS_ROOT = "results/runs"
RUN_DIR = RUNS_ROOT + "/{task}/d{bound}/{algo}/seed{seed}"
EPISODES = "episodes.parquet"
TRACE = "trace.parquet"
RUN_JSON = "run.json"
SPEC = "spec.json"
RUN_FILES = (EPISODES, TRACE, RUN_JSON)  # run.json last: the trainer writes it after the others
SUMMARY = "summary.parquet"
CHECKPOINT_DIR = "checkpoint"
JOB_MARKER = "job.json"
FAILURE_RECORD = "failure.json"
# What the path pieces may look like (Snakemake wildcard constraints use the same patterns).
WILDCARD_PATTERNS = {"task": r"[a-z][a-z0-9_]*", "bound": r"[0-9]+(\.[0-9]+)?",
                     "algo": r"[a-z][a-z0-9_]*", "seed": r"[0-9]+"}
# The source folders whose code decides a run's result (see code_version).
CODE_PACKAGES = ("algos", "envs")


def bound_label(bound: float) -> str:
    """Path label of a bound, plain decimal digits: 25 -> '25', 12.5 -> '12.5', 1e-05 -> '0.00001'.

    The shortest digits that read back as the same float, never an exponent, so the label
    matches WILDCARD_PATTERNS["bound"] and the trainer, given the label, gets the same bound.
    """
    bound = float(bound)
    if not (math.isfinite(bound) and bound > 0):
        raise ValueError(f"bound {bound} must be a finite number > 0")
    return np.format_float_positional(bound, trim="-")


def run_id(task: str, bound: str | float, algo: str, seed: int | str) -> str:
    """`task/d<bound label>/algo/seed<seed>`; a float bound is turned into its label."""
    label = bound if isinstance(bound, str) else bound_label(bound)
    return f"{task}/d{label}/{algo}/seed{seed}"


def run_dir(root: str | os.PathLike, task: str, bound: str | float, algo: str, seed: int | str) -> Path:
    """The run folder under a sweep's working directory `root`."""
    return Path(root) / RUNS_ROOT / run_id(task, bound, algo, seed)


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


def code_version(repo: str | os.PathLike | None = None) -> str:
    """sha256 (16 hex digits) of the Python sources of CODE_PACKAGES: changes with any edit to
    the code that trains a run, comments included (a conservative trigger)."""
    repo = Path(repo) if repo is not None else Path(__file__).resolve().parent.parent
    digest = hashlib.sha256()
    for package in CODE_PACKAGES:
        for path in sorted((repo / package).rglob("*.py")):
            digest.update(str(path.relative_to(repo)).encode() + b"\0" + path.read_bytes() + b"\0")
    return digest.hexdigest()[:16]


# ---- the run spec ------------------------------------------------------------------------
def spec_of(preset: str, config) -> dict:
    return {"preset": preset, "config": config.to_dict()}


def write_spec(folder: str | os.PathLike, spec: dict) -> bool:
    """Write spec.json unless it already holds `spec` (so its mtime moves only on a change)."""
    path = Path(folder) / SPEC
    try:
        if json.loads(path.read_text()) == spec:
            return False
    except (OSError, ValueError):
        pass
    os.makedirs(folder, exist_ok=True)
    write_json(str(path), spec)
    return True


def read_spec(path: str | os.PathLike):
    """(preset, TrainConfig) of a spec.json; ValueError naming the file and field otherwise."""
    from algos.config import config_from_dict

    try:
        with open(path) as f:
            spec = json.load(f)
        return str(spec.get("preset", "")), config_from_dict(spec["config"])
    except (OSError, ValueError, KeyError, TypeError, AttributeError) as err:
        field = getattr(err, "field", None)
        where = f" field {field!r}" if field else ""
        raise ValueError(f"{path}:{where} not a usable run spec: {type(err).__name__}: {err}") from None


def config_difference(recorded: dict, wanted: dict) -> list[str]:
    """Config fields in which two to_dict() configs differ (after a JSON round trip; the
    checkpoint interval and the scalars of other algorithms than the run's are not part of a
    run's identity, algos.registry.foreign_scalars)."""
    from algos.registry import foreign_scalars

    a, b = (json.loads(json.dumps(c)) for c in (recorded or {}, wanted))
    ignored = {"checkpoint_every_s"} | foreign_scalars(b.get("algo", a.get("algo")))
    return sorted(k for k in set(a) | set(b) if k not in ignored and a.get(k) != b.get(k))


# ---- completeness --------------------------------------------------------------------------
def read_json(path: str | os.PathLike) -> dict | None:
    """A JSON object file as a dict, or None when it is absent or unreadable."""
    try:
        with open(path) as f:
            data = json.load(f)
    except (OSError, ValueError):
        return None
    return data if isinstance(data, dict) else None


def read_run_json(folder: str | os.PathLike) -> dict | None:
    """run.json as a dict, or None when it is absent or unreadable."""
    return read_json(Path(folder) / RUN_JSON)


def file_record(path: str | os.PathLike, rows: int) -> dict:
    """What run.json records of a table it vouches for: rows, size, sha256 of the bytes, and
    the mtime (ns) they were hashed at, so a later check rehashes only a file that changed."""
    st = os.stat(path)
    return {"rows": int(rows), "bytes": st.st_size, "sha256": _sha256(path), "mtime_ns": st.st_mtime_ns}


def _sha256(path) -> str:
    with open(path, "rb") as f:
        return hashlib.file_digest(f, "sha256").hexdigest()


def _table_problem(path: Path, record: dict | None, rows: int | None, verify: bool) -> str | None:
    """What is wrong with one table against run.json's record of it, or None."""
    name = path.name
    if not path.exists():
        return f"{name} missing"
    st = path.stat()
    if record is not None and st.st_size != record.get("bytes"):
        return f"{name} is {st.st_size} bytes, {RUN_JSON} recorded {record.get('bytes')}"
    try:
        n = pq.read_metadata(path).num_rows
    except (OSError, pa.ArrowException) as err:
        return f"{name} unreadable ({type(err).__name__})"
    want = record.get("rows") if record is not None else rows
    if want is not None and want != n:
        return f"{name} has {n} rows, {RUN_JSON} recorded {want}"
    if record is not None and (verify or st.st_mtime_ns != record.get("mtime_ns")):
        if _sha256(path) != record.get("sha256"):
            return f"{name} is damaged (its sha256 differs from the one {RUN_JSON} recorded)"
    return None


def incomplete_reason(folder: str | os.PathLike, verify: bool = False) -> str | None:
    """None when the run folder is complete, else what is wrong with it.

    Complete: run.json says `complete`, and each table it vouches for is present, readable,
    and has the size, row count and sha256 that run.json recorded. The hash is checked when
    the file's mtime is not the one recorded (any rewrite, bit flip or truncation moves it),
    or always with `verify` (the summarise step, `workflow.status --verify`); so planning a
    sweep reads only the footers of unchanged files. run.json of older versions records row
    counts only: then the tables need to be readable with those counts.
    """
    folder = Path(folder)
    if not (folder / RUN_JSON).exists():
        return f"{RUN_JSON} missing"
    meta = read_run_json(folder)
    if meta is None or meta.get("complete") is not True:
        return f"{RUN_JSON} unreadable or not marked complete"
    files, rows = meta.get("files") or {}, meta.get("rows") or {}
    for name in (EPISODES, TRACE):
        problem = _table_problem(folder / name, files.get(name), rows.get(name), verify)
        if problem is not None:
            return problem
    return None


# ---- writers ---------------------------------------------------------------------------------
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


def trace_table(trace: dict, state_columns=()) -> pa.Table:
    """TRACE_COLUMNS, then the algorithm's own state columns (its registry entry's `state_columns`)."""
    import pandas as pd  # here: the job wrappers import this module, and pandas costs them ~0.5 s

    frame = pd.DataFrame({name: trace[name] for name in (*TRACE_COLUMNS, *state_columns)})
    return pa.Table.from_pandas(frame, preserve_index=False)
