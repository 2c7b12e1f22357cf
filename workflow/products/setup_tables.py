"""Tables of what the sweep was set up with, generated from what was actually used:
Table 1 (the safety tiers) from the thresholds the tiers step read, and Table A.1 (the
hyperparameters) from the configs the runs recorded in their run.json.
"""
from __future__ import annotations

import json

import pandas as pd

from metrics.schema import RUN_KEYS
from metrics.thresholds import TIER_NAMES
from runs.run_layout import task_id

from .style import METRIC_LABELS, TIER_LABELS, algo_label, ordered_algos
from .tablefmt import Table

# ---- Table 1 -------------------------------------------------------------------------------


def _limit(value: float) -> str:
    return f"{value:g}"


def table1(thresholds: dict) -> Table:
    """One row per tier 0..4: its own conditions (on top of the tier below it) and, spelt out,
    every condition it needs. `thresholds`: as `metrics.load_thresholds` returns them."""
    rows, cells, records = [["0"]], [[TIER_LABELS[0], "none", "none"]], [{"tier": 0, "name": TIER_LABELS[0]}]
    needed: dict[str, float] = {}
    for k, name in enumerate(TIER_NAMES, start=1):
        own = thresholds[name]
        for metric, limit in own.items():
            needed[metric] = min(limit, needed.get(metric, limit))
        own_text = " and ".join(f"IQM({METRIC_LABELS[m]}) \u2264 {_limit(v)}" for m, v in own.items())
        if k > 1:
            own_text = f"tier {k - 1} and {own_text}" if own_text else f"as tier {k - 1}"
        every = " and ".join(f"IQM({METRIC_LABELS[m]}) \u2264 {_limit(v)}" for m, v in needed.items()) or "none"
        rows.append([str(k)])
        cells.append([TIER_LABELS[k], own_text or "none", every])
        records.append({"tier": k, "name": TIER_LABELS[k], **{f"{m}_max": v for m, v in needed.items()}})
    data = pd.DataFrame(records)
    data.insert(2, "condition", [c[1] for c in cells])
    notes = ["Tiers are assigned on IQM values (per phase) and are nested: tier k needs every condition of "
             "tiers 1 to k; each test is value \u2264 limit on unrounded values. Generated from the configured "
             "thresholds (config `thresholds`)."]
    return Table(title="Table 1: safety tiers", row_header=["Tier"], rows=rows,
                 columns=[("", "Name"), ("", "Condition"), ("", "All conditions")], cells=cells,
                 bold=[[False] * 3 for _ in rows], data=data, notes=notes, numeric=False)


# ---- Table A.1 -----------------------------------------------------------------------------

# Recorded fields that are not hyperparameters: they say which run it is (the run keys) or
# how it was executed (checkpointing and chunking; the trainer's results do not depend on them).
NOT_HYPERPARAMETERS = frozenset(RUN_KEYS) | {"level", "chunk_updates", "checkpoint_every_s", "log_capacity"}  # level: part of the task id
TASK_OPTIONS = "env_kwargs"  # task options: may differ between tasks, never between algorithms


def read_run_configs(paths) -> pd.DataFrame:
    """One row per run: path, algo, task, preset and its recorded config (a dict)."""
    rows = []
    for path in paths:
        try:
            with open(path, encoding="utf-8") as fh:
                meta = json.load(fh)
            config = meta["config"]
            task = task_id(config["task"], config.get("level", 1))  # level 2+ runs apart (NAME@lL)
            rows.append({"path": str(path), "algo": config["algo"], "task": task,
                         "preset": meta.get("preset"), "config": config})
        except (OSError, ValueError, KeyError, TypeError) as err:
            raise ValueError(f"{path}: cannot read the run's recorded config (run.json field 'config' with "
                             f"'algo' and 'task'): {err!r}") from None
    if not rows:
        raise ValueError("Table A.1: no run.json given")
    return pd.DataFrame(rows)


def grid_note(runs: pd.DataFrame) -> str:
    """The conditions an IQM runs over, for a table's caption: tasks, bounds d, episode length
    T and the per-step budget d / T (how a bound compares across episode lengths)."""
    bounds = sorted({float(c["bound"]) for c in runs["config"]})
    lengths = sorted({int(c["episode_length"]) for c in runs["config"]})
    tasks = sorted(runs["task"].unique())
    budgets = ", ".join(f"{d / lengths[0]:g}" for d in bounds) if len(lengths) == 1 else "varies"
    return (f"Conditions: {len(tasks)} task(s) ({', '.join(tasks)}) x {len(bounds)} bound(s) "
            f"d = {', '.join(f'{d:g}' for d in bounds)} on episodes of T = {', '.join(map(str, lengths))} steps "
            f"(per-step budget d / T = {budgets}).")


def _fmt(value) -> str:
    if isinstance(value, bool) or value is None:
        return str(value)
    if isinstance(value, float):
        return f"{value:g}"
    if isinstance(value, (list, tuple)):
        return "(" + ", ".join(_fmt(v) for v in value) + ")"
    if isinstance(value, dict):
        return ", ".join(f"{k}={_fmt(v)}" for k, v in value.items()) or "-"
    return str(value)


def _disagreement(runs: pd.DataFrame, what: str) -> str | None:
    """A message naming the first field on which `runs` disagree, or None."""
    first = runs.iloc[0]
    for _, run in runs.iloc[1:].iterrows():
        for key in dict.fromkeys([*first["values"], *run["values"]]):
            a, b = first["values"].get(key, "<absent>"), run["values"].get(key, "<absent>")
            if a != b:
                return (f"Table A.1: runs of {what} disagree on {key!r}: {a!r} in {first['path']}, "
                        f"{b!r} in {run['path']}")
    return None


def algorithm_scalars() -> dict[str, set] | None:
    """Each algorithm's own scalars from the algorithm table in algos/, when it has one
    (so a cell of another algorithm's scalar shows '-'); None to show every recorded value."""
    try:
        from algos.registry import ALGORITHMS
    except ImportError:
        return None
    return {name: set(algo.scalars) for name, algo in ALGORITHMS.items()}


def table_a1(runs: pd.DataFrame, own_scalars: dict[str, set] | None = None) -> Table:
    """Rows: every recorded hyperparameter (then task options per task); columns: algorithms.
    `runs`: `read_run_configs`. Runs of one algorithm must agree on every hyperparameter (and
    on the task options of each task); otherwise a ValueError names two runs that differ."""
    own_scalars = algorithm_scalars() if own_scalars is None else own_scalars
    runs = runs.assign(values=[{"preset": p, **{k: v for k, v in c.items() if k not in NOT_HYPERPARAMETERS
                                               and k != TASK_OPTIONS}}
                               for p, c in zip(runs["preset"], runs["config"])],
                       options=[dict(c.get(TASK_OPTIONS) or {}) for c in runs["config"]])
    algos = ordered_algos(runs["algo"].unique())
    per_algo = {}
    for algo in algos:
        mine = runs[runs["algo"] == algo]
        problem = _disagreement(mine, f"algorithm {algo!r}")
        if problem:
            raise ValueError(problem)
        per_algo[algo] = mine.iloc[0]["values"]
    options = {}
    for (algo, task), mine in runs.groupby(["algo", "task"], sort=True):
        problem = _disagreement(mine.assign(values=mine["options"]), f"algorithm {algo!r} on task {task!r}")
        if problem:
            raise ValueError(problem.replace("disagree on", "disagree on task option"))
        options[(algo, task)] = mine.iloc[0]["options"]

    every_scalar = set().union(*own_scalars.values()) if own_scalars else set()
    keys = list(dict.fromkeys(k for algo in algos for k in per_algo[algo]))
    labels, cells, records = [], [], []
    for key in keys:
        shown = []
        for algo in algos:
            not_its_own = key in every_scalar and key not in own_scalars.get(algo, set())
            shown.append("-" if not_its_own or key not in per_algo[algo] else _fmt(per_algo[algo][key]))
        if all(c == "-" for c in shown):  # a scalar of an algorithm this sweep does not run
            continue
        labels.append([key])
        cells.append(shown)
        records.append({"hyperparameter": key, **dict(zip(algos, shown))})
    for task in sorted({t for _, t in options}):
        for key in sorted({k for (a, t), o in options.items() if t == task for k in o}):
            shown = [_fmt(options[(a, task)][key]) if key in options.get((a, task), {}) else "-" for a in algos]
            labels.append([f"{task}: {key}"])
            cells.append(shown)
            records.append({"hyperparameter": f"{task}: {key}", **dict(zip(algos, shown))})
    notes = [f"As recorded in the run.json of every run ({len(runs)} runs); runs of one algorithm agree on all "
             "of them. '-': not a setting of that algorithm. 'task: option' rows are task options."]
    return Table(title="Table A.1: hyperparameters", row_header=["Hyperparameter"], rows=labels,
                 columns=[("", algo_label(a)) for a in algos], cells=cells,
                 bold=[[False] * len(algos) for _ in labels], data=pd.DataFrame(records), notes=notes,
                 numeric=False)
