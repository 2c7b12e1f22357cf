"""Stage 1: per-run summaries of episode tables.

A summary holds four tables whose rows of different runs simply concatenate:

- ``iterates``: metrics of each logged policy (run, phase, iteration): R, C, V, Dnorm, Dnorm_plus;
- ``runs``: per run and phase, the mean over iterates (eq. 6; the final phases have one iterate);
- ``histograms``: per run and phase, counts of (c - d)/d in the bins of :mod:`metrics.grid`;
- ``final_episodes``: every final-phase episode's return and cost.

On disk a summary is ONE Parquet file: the four tables stacked, a ``table`` column saying which
row belongs where and columns a table does not use left null (docs/metrics.md lists them).
"""

from __future__ import annotations

import itertools
import json
import os
from dataclasses import dataclass

import numpy as np
import pandas as pd
import pyarrow as pa
import pyarrow.csv as pacsv
import pyarrow.parquet as pq

from . import grid
from .atomic import atomic_path
from .buffers import empty
from .episodes import EpisodeArrays, constant_columns, load_episode_arrays, sort_and_check
from .schema import METRICS, PHASES, RUN_KEYS, EpisodeTableError

ITERATE_COLUMNS = RUN_KEYS + ("phase", "iteration", "n_episodes") + METRICS
RUN_COLUMNS = RUN_KEYS + ("phase", "n_iterates", "n_episodes") + METRICS + ("source",)
HISTOGRAM_COLUMNS = RUN_KEYS + ("phase", "bin", "count")
FINAL_EPISODE_COLUMNS = RUN_KEYS + ("phase", "iteration", "episode", "return", "cost")
TABLES = {
    "iterates": ITERATE_COLUMNS,
    "runs": RUN_COLUMNS,
    "histograms": HISTOGRAM_COLUMNS,
    "final_episodes": FINAL_EPISODE_COLUMNS,
}
FORMAT = {"format": "saferl-eval summary", "version": 1, "grid": grid.GRID_SPEC}
_META_KEY = b"saferl_eval.summary"
# Threads summarising groups of files at once: each holds one group's episodes in memory.
STAGE1_THREADS = min(os.cpu_count() or 1, 4)


@dataclass
class Summary:
    iterates: pd.DataFrame
    runs: pd.DataFrame
    histograms: pd.DataFrame
    final_episodes: pd.DataFrame


def sort_frame(df: pd.DataFrame, keys) -> pd.DataFrame:
    """Rows in canonical order: by the given keys, with phases in PHASES order."""
    keys = list(keys)
    rank = {p: i for i, p in enumerate(PHASES)}
    return df.sort_values(
        keys, key=lambda col: col.map(rank) if col.name == "phase" else col, kind="stable"
    ).reset_index(drop=True)


def _starts(change: np.ndarray) -> np.ndarray:
    return np.flatnonzero(np.concatenate([[True], change]))


def _changes(ep: EpisodeArrays, names) -> np.ndarray:
    change, differs = (empty(max(len(ep) - 1, 0), bool) for _ in range(2))
    change[...] = False
    for name in names:
        col = getattr(ep, name)
        if col.strides == (0,):  # a column constant in its file (a broadcast view) never changes
            continue
        change |= np.not_equal(col[1:], col[:-1], out=differs)
    return change


def _key_columns(ep: EpisodeArrays, idx) -> dict:
    # names as object arrays of shared str objects: 8 bytes a row (pandas makes the same str columns)
    return {
        "task": ep.tasks[ep.task[idx]],
        "bound": ep.bound[idx].astype(np.float64, copy=False),
        "algo": ep.algos[ep.algo[idx]],
        "seed": ep.seed[idx].astype(np.int64, copy=False),
        "phase": np.asarray(PHASES, dtype=object)[ep.phase[idx]],
    }


def summary_columns(ep: EpisodeArrays) -> dict:
    """Summary of validated episodes in canonical key order (see episodes.sort_and_check), as
    {table: {column: array}} (concatenated over groups of files by :func:`summarise`)."""
    n = len(ep)
    run_phase_change = _changes(ep, ("task", "bound", "algo", "seed", "phase"))
    iterate_change = _changes(ep, ("iteration",))
    iterate_change |= run_phase_change

    # Per iterate: sums over consecutive episode blocks (fixed order, so results are exact
    # functions of the set of episodes).
    it = _starts(iterate_change)
    n_ep = np.diff(np.append(it, n))
    bound = ep.bound[it]
    violates = np.greater(ep.cost, ep.bound, out=empty(n, bool))  # strictly: cost exactly d is within the bound
    excess = grid.normalised_excess(ep.cost, ep.bound)
    n_viol = np.add.reduceat(violates, it, dtype=np.int64)
    mean_cost = np.add.reduceat(ep.cost, it) / n_ep
    # the excess of violating episodes, 0 for the others: for d > 0, c > d exactly when the excess
    # is > 0 (or underflows to +0.0, which the maximum leaves the same), and it is never NaN
    violating_excess = np.maximum(excess, 0.0, out=empty(n, np.float64))
    with np.errstate(invalid="ignore", divide="ignore"):
        dnorm_plus = np.where(n_viol > 0, np.add.reduceat(violating_excess, it) / n_viol, 0.0)
    iter_metrics = {
        "R": np.add.reduceat(ep.ret, it) / n_ep,
        "C": mean_cost,
        "V": n_viol / n_ep,
        "Dnorm": (mean_cost - bound) / bound,
        "Dnorm_plus": dnorm_plus,
    }
    iterates = {**_key_columns(ep, it), "iteration": ep.iteration[it].astype(np.int64), "n_episodes": n_ep,
                **iter_metrics}

    # Per run and phase: mean over iterates (eq. 6).
    rp = _starts(run_phase_change)  # first episode of each run-phase
    rp_of_iterate = np.searchsorted(rp, it, side="right") - 1
    first_iterate = _starts(rp_of_iterate[1:] != rp_of_iterate[:-1])
    n_iter = np.diff(np.append(first_iterate, it.size))
    final = ep.phase[rp] != PHASES.index("train")
    multi = final & (n_iter > 1)
    if multi.any():
        i = np.flatnonzero(multi)[0]
        second = it[first_iterate[i] + 1]
        raise EpisodeTableError(
            f"{ep.where(second)}: phase {PHASES[ep.phase[second]]} of run "
            f"task={ep.tasks[ep.task[second]]} bound={ep.bound[second]} algo={ep.algos[ep.algo[second]]} "
            f"seed={ep.seed[second]} has {n_iter[i]} iterations; a final phase must have exactly one"
        )
    runs = {
        **_key_columns(ep, rp),
        "n_iterates": n_iter,
        "n_episodes": np.add.reduceat(n_ep, first_iterate),
        **{m: np.add.reduceat(v, first_iterate) / n_iter for m, v in iter_metrics.items()},
        "source": _sources(ep, rp),
    }

    # Histograms of (c - d)/d per run and phase (right-closed bins of metrics.grid).
    cells = grid.bin_index(excess)
    for i, (first, stop) in enumerate(zip(rp[1:], np.append(rp[2:], n)), start=1):
        cells[first:stop] += i * grid.N_BINS  # run-phase i's bins follow those of the ones before
    counts = np.bincount(cells, minlength=rp.size * grid.N_BINS).reshape(rp.size, grid.N_BINS)
    which, bins = np.nonzero(counts)
    histograms = {**_key_columns(ep, rp[which]), "bin": bins.astype(np.int64), "count": counts[which, bins]}

    fin = np.flatnonzero(np.not_equal(ep.phase, PHASES.index("train"), out=empty(n, bool)))
    final_episodes = {
        **_key_columns(ep, fin),
        "iteration": ep.iteration[fin].astype(np.int64),
        "episode": ep.episode[fin].astype(np.int64),
        "return": ep.ret[fin],
        "cost": ep.cost[fin],
    }
    return {"iterates": iterates, "runs": runs, "histograms": histograms, "final_episodes": final_episodes}


def _sources(ep: EpisodeArrays, rp_starts) -> list:
    """';'-joined files each run-phase came from (names the files in later warnings)."""
    ends = np.append(rp_starts[1:], len(ep))
    return [";".join(ep.sources[i] for i in ep.source_ids(a, b)) for a, b in zip(rp_starts, ends)]


def _single_run_from_statistics(path):
    """The one (task, bound, algo, seed) of a Parquet file whose row-group statistics show a
    single value in each key column (a training shard), or None; reads no data pages."""
    found = constant_columns(pq.ParquetFile(path).metadata, {"task": str, "bound": (int, float), "algo": str, "seed": int})
    if len(found) < len(RUN_KEYS):
        return None
    return {(found["task"], float(found["bound"]), found["algo"], int(found["seed"]))}


def _run_keys_of_file(path):
    """Distinct (task, bound, algo, seed) of a file, or None when it cannot be read cheaply."""
    try:
        if str(path).lower().endswith((".parquet", ".pq")):
            single = _single_run_from_statistics(path)
            if single is not None:
                return single
            table = pq.read_table(path, columns=list(RUN_KEYS))
        else:
            delimiter = "\t" if str(path).lower().endswith(".tsv") else ","
            table = pacsv.read_csv(
                path,
                parse_options=pacsv.ParseOptions(delimiter=delimiter),
                # names as text (pyarrow would read a column of NA as nulls), as the full loader reads them
                convert_options=pacsv.ConvertOptions(include_columns=list(RUN_KEYS),
                                                     column_types={"task": pa.string(), "algo": pa.string()}),
            )
        unique = table.group_by(list(RUN_KEYS)).aggregate([]).to_pydict()
        return {
            (str(t), float(b), str(a), int(s))
            for t, b, a, s in zip(unique["task"], unique["bound"], unique["algo"], unique["seed"])
        }
    except Exception:  # malformed files are reported by the full loader
        return None


def group_files_by_run(paths) -> list:
    """Split files into groups that share no run, so each group can be summarised alone.

    Files holding rows of the same run must be read together (duplicate checks, exact sums).
    If a file's run keys cannot be read, all files form one group and the loader reports why.
    """
    paths = [os.fspath(p) for p in paths]
    if len(paths) <= 1:
        return [paths]
    parent = list(range(len(paths)))

    def find(i):
        while parent[i] != i:
            parent[i] = parent[parent[i]]
            i = parent[i]
        return i

    owner = {}
    for i, path in enumerate(paths):
        keys = _run_keys_of_file(path)
        if keys is None:
            return [paths]
        for key in keys:
            if key in owner:
                parent[find(i)] = find(owner[key])
            else:
                owner[key] = i
    groups = {}
    for i in range(len(paths)):
        groups.setdefault(find(i), []).append(paths[i])
    return list(groups.values())


def _first_last_run(runs) -> tuple:
    """(first, last) (task, bound, algo, seed) of a runs table (DataFrame or {column: array})."""
    columns = [np.asarray(runs[k]) for k in RUN_KEYS]
    return tuple(c[0] for c in columns), tuple(c[-1] for c in columns)


def _concat_in_run_order(parts, concat) -> Summary:
    """One summary of parts ({table: rows}, each in canonical order, each with runs), rows in
    canonical order; ``concat(tables, columns)`` joins one table's parts into a DataFrame.

    When the parts hold disjoint, non-interleaving ranges of runs (one part per run, the usual
    case) ordering the parts is enough; otherwise every table is sorted.
    """
    bounds = [_first_last_run(p["runs"]) for p in parts]
    order = sorted(range(len(parts)), key=lambda i: bounds[i][0])
    ordered = all(bounds[a][1] < bounds[b][0] for a, b in zip(order, order[1:]))
    out = {}
    for name, columns in TABLES.items():
        df = concat([parts[i][name] for i in order], columns)
        if not ordered:
            keys = [c for c in ("task", "bound", "algo", "seed", "phase", "iteration", "bin", "episode") if c in columns]
            df = sort_frame(df, keys)
        out[name] = df
    return Summary(**out)


def concat_summaries(summaries) -> Summary:
    """One summary of many (each in canonical order), rows in canonical order."""
    summaries = [s for s in summaries if len(s.runs)] or list(summaries)[:1]
    if len(summaries) == 1:
        return summaries[0]
    return _concat_in_run_order(
        [{name: getattr(s, name) for name in TABLES} for s in summaries],
        lambda frames, columns: pd.concat([f for f in frames if len(f)] or frames[:1], ignore_index=True),
    )


def _concat_columns(tables, columns) -> pd.DataFrame:
    """One DataFrame of {column: array or list} parts."""
    joined = {}
    for c in columns:
        values = [t[c] for t in tables]
        joined[c] = list(itertools.chain.from_iterable(values)) if isinstance(values[0], list) else np.concatenate(values)
    return pd.DataFrame(joined)


def _summarise_group(group, use_threads=True) -> dict:
    ep = sort_and_check(load_episode_arrays(group, use_threads))
    if len(ep) == 0:
        raise EpisodeTableError(f"{', '.join(group)}: no episodes")
    return summary_columns(ep)


def summarise(paths, jobs: int = 1) -> Summary:
    """Validate episode files (Parquet/CSV, one or many) and summarise every run in them.

    Groups of files that share no run are read and summarised in parallel threads (their
    reading and array work runs outside Python's lock); ``jobs`` > 1 uses that many processes
    instead. The result is the same either way."""
    if isinstance(paths, (str, os.PathLike)):
        paths = [paths]
    groups = group_files_by_run(paths)
    if jobs > 1 and len(groups) > 1:
        from concurrent.futures import ProcessPoolExecutor

        with ProcessPoolExecutor(max_workers=jobs) as pool:
            parts = list(pool.map(_summarise_group, groups, chunksize=max(1, len(groups) // (8 * jobs))))
    elif len(groups) > 1:
        from concurrent.futures import ThreadPoolExecutor

        with ThreadPoolExecutor(max_workers=STAGE1_THREADS) as pool:
            parts = list(pool.map(_summarise_group, groups, itertools.repeat(False)))
    else:
        parts = [_summarise_group(groups[0])]
    summary = _concat_in_run_order(parts, _concat_columns)
    _check_no_overlap(summary)
    check_finite(summary.runs)
    return summary


def check_finite(runs: pd.DataFrame) -> None:
    """Raise EpisodeTableError naming the first run and phase whose metrics are not finite
    (costs near the float64 limit, or a bound so small that (c - d) / d overflows)."""
    values = runs[list(METRICS)].to_numpy(np.float64)
    bad = ~np.isfinite(values)
    if bad.any():
        i = int(np.flatnonzero(bad.any(axis=1))[0])
        row = runs.iloc[i]
        which = ", ".join(f"{m}={values[i, j]}" for j, m in enumerate(METRICS) if bad[i, j])
        raise EpisodeTableError(
            f"non-finite metric values for task={row['task']}, bound={float(row['bound']):g}, algo={row['algo']}, "
            f"seed={row['seed']}, phase={row['phase']}: {which} (from {row.get('source', '?')}; "
            f"{int(bad.any(axis=1).sum())} run-phase(s) affected). Episode costs or the bound are outside the "
            f"range where the metrics can be computed in float64")


def _check_no_overlap(summary: Summary):
    dup = summary.runs.duplicated(list(RUN_KEYS) + ["phase"], keep=False)
    if dup.any():
        rows = summary.runs[dup]
        raise EpisodeTableError(f"the same run and phase appears in separate inputs: {rows.iloc[:2].to_dict('records')}")


def summary_table(summary: Summary) -> pa.Table:
    """The four tables stacked into one Arrow table with a ``table`` column."""
    parts = []
    for name, columns in TABLES.items():
        df = getattr(summary, name)
        t = pa.Table.from_pandas(df[list(columns)], preserve_index=False)
        parts.append(t.append_column("table", pa.array([name] * t.num_rows, pa.string())))
    table = pa.concat_tables(parts, promote_options="default")
    return table.replace_schema_metadata({_META_KEY: json.dumps(FORMAT).encode()})


def write_summary(summary: Summary, path) -> None:
    """Write a summary as one Parquet file, atomically."""
    with atomic_path(path) as tmp:
        pq.write_table(summary_table(summary), tmp)


def read_summary(path) -> Summary:
    path = os.fspath(path)
    try:
        table = pq.read_table(path)
    except (OSError, pa.ArrowInvalid) as err:
        raise EpisodeTableError(f"{path}: cannot be read as a summary: {err}") from err
    meta = (table.schema.metadata or {}).get(_META_KEY)
    if meta is None:
        raise EpisodeTableError(f"{path}: not a saferl-eval summary (written by `saferl-eval summarise`)")
    found = json.loads(meta)
    if found.get("version") != FORMAT["version"] or found.get("grid") != FORMAT["grid"]:
        raise EpisodeTableError(f"{path}: summary format {found} differs from this version's {FORMAT}")
    df = table.to_pandas()
    out = {}
    for name, columns in TABLES.items():
        part = df.loc[df["table"] == name, list(columns)].reset_index(drop=True)
        out[name] = part.astype(_dtypes(name))
    return Summary(**out)


def _dtypes(name):
    ints = {"seed", "iteration", "episode", "n_episodes", "n_iterates", "bin", "count"}
    return {c: ("int64" if c in ints else str if c in ("task", "algo", "phase", "source") else "float64") for c in TABLES[name]}


def read_summaries(paths) -> Summary:
    """Concatenate summary files (of different runs) into one summary."""
    if isinstance(paths, (str, os.PathLike)):
        paths = [paths]
    if not paths:
        raise EpisodeTableError("no summary files given")
    summary = concat_summaries([read_summary(p) for p in paths])
    _check_no_overlap(summary)
    return summary


__all__ = [
    "Summary",
    "summarise",
    "summary_columns",
    "write_summary",
    "read_summary",
    "read_summaries",
    "concat_summaries",
    "group_files_by_run",
]
