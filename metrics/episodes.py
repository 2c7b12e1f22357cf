"""Read and validate episode tables (docs/metrics.md) from Parquet or CSV files.

The tables can be large (a paper-size run holds ~250k episodes), so columns are kept as
numpy arrays and string columns as dictionary codes; pandas is used only for the small
user-facing :func:`read_episodes` result. Every error names the file and the offending rows
(0-based data rows: row 0 is the first row after a CSV header, i.e. CSV line 2).

A folder given in place of a file is a recorder's folder (``recorders.writer``: one run's
``train-*.parquet`` parts and ``final.parquet``), or a folder with recorder folders below it;
:func:`expand_episode_paths` turns it into the episode files it holds.
"""

from __future__ import annotations

import os
import re
from dataclasses import dataclass

import numpy as np
import pandas as pd
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.csv as pacsv
import pyarrow.parquet as pq

from .schema import (
    EPISODE_KEYS,
    FLOAT_COLUMNS,
    INTEGER_COLUMNS,
    PHASES,
    REQUIRED_COLUMNS,
    STRING_COLUMNS,
    EpisodeTableError,
)

_MAX_ROWS_SHOWN = 10

# ---- recorder folders (recorders.writer writes them; the engine reads them) ----------------
RECORDER_MARKER = "recorder.json"  # the run identity of a recorder folder
FINAL_FILE = "final.parquet"
TRAIN_PART = re.compile(r"^train-(\d+)-(\d+)\.parquet$")  # training iterates FIRST..LAST
TRAIN_SEGMENT_V1 = re.compile(r"^train-(\d+)\.parquet$")  # the first writer's numbered segments


def train_parts(names) -> tuple[list, list]:
    """(current, covered) ``(first, last, name)`` of a folder's ``train-FIRST-LAST.parquet`` files.

    A file whose iterate range lies inside another's is covered: the writer merged it into
    that one and was stopped before it deleted it. Readers skip covered files (they would
    duplicate rows); the writer deletes them when it resumes.
    """
    parts = sorted(((int(m.group(1)), int(m.group(2)), n) for n in names for m in [TRAIN_PART.match(n)] if m),
                   key=lambda p: (p[0], -p[1]))
    current, covered, end = [], [], -1
    for part in parts:
        if part[1] <= end:
            covered.append(part)
        else:
            current.append(part)
            end = max(end, part[1])
    return current, covered


def is_recorder_folder(folder) -> bool:
    names = os.listdir(folder)
    return RECORDER_MARKER in names or FINAL_FILE in names or any(
        TRAIN_PART.match(n) or TRAIN_SEGMENT_V1.match(n) for n in names)


def recorder_files(folder) -> list:
    """The episode files of one recorder folder, training iterates in order, then final.parquet."""
    folder = os.fspath(folder)
    names = os.listdir(folder)
    old = sorted(n for n in names if TRAIN_SEGMENT_V1.match(n))
    current, _ = train_parts(names)
    files = old + [name for _, _, name in current] + ([FINAL_FILE] if FINAL_FILE in names else [])
    return [os.path.join(folder, n) for n in files]


def expand_episode_paths(paths) -> list:
    """Episode files as given; each folder replaced by the files of the recorder folder it is,
    or of every recorder folder below it (in sorted order)."""
    out = []
    for path in paths:
        path = os.fspath(path)
        if not os.path.isdir(path):
            out.append(path)
            continue
        if is_recorder_folder(path):
            found = [path]
        else:
            found = []
            for root, dirs, _ in os.walk(path):
                dirs[:] = sorted(d for d in dirs if not d.startswith("."))
                found += [os.path.join(root, d) for d in dirs if is_recorder_folder(os.path.join(root, d))]
        files = [f for folder in found for f in recorder_files(folder)]
        if not files:
            raise EpisodeTableError(
                f"{path}: a folder with no episode files of a recorder (recorders.EpisodeWriter: {RECORDER_MARKER}, "
                f"train-*.parquet, {FINAL_FILE}) in it or below; give a recorder's folder or episode files "
                f"(.parquet, .csv, .tsv)")
        out += files
    return out


def describe_rows(rows) -> str:
    """'rows 3, 8, 9' (at most ten listed, then how many more)."""
    rows = np.asarray(rows)
    shown = ", ".join(str(int(r)) for r in rows[:_MAX_ROWS_SHOWN])
    more = f" and {rows.size - _MAX_ROWS_SHOWN} more" if rows.size > _MAX_ROWS_SHOWN else ""
    return f"row{'s' if rows.size != 1 else ''} {shown}{more}"


def _fail(path, problem, rows=None):
    where = f" ({describe_rows(rows)}; row 0 = first data row)" if rows is not None else ""
    raise EpisodeTableError(f"{path}: {problem}{where}")


@dataclass(frozen=True)
class EpisodeArrays:
    """Validated episodes as flat arrays, one entry per episode.

    ``task``/``algo`` are codes into the sorted category arrays ``tasks``/``algos``; ``phase``
    is an index into PHASES. ``source``/``row`` say where each episode came from (an index
    into ``sources`` and the 0-based data row in that file) so that later checks can name them.
    """

    tasks: np.ndarray
    algos: np.ndarray
    task: np.ndarray
    algo: np.ndarray
    phase: np.ndarray
    bound: np.ndarray
    seed: np.ndarray
    iteration: np.ndarray
    episode: np.ndarray
    ret: np.ndarray
    cost: np.ndarray
    source: np.ndarray
    row: np.ndarray
    sources: tuple

    def __len__(self):
        return self.cost.size

    def take(self, order):
        """The same episodes reordered (or subset) by an index array."""
        fields = {
            name: getattr(self, name)[order]
            for name in ("task", "algo", "phase", "bound", "seed", "iteration", "episode", "ret", "cost", "source", "row")
        }
        return EpisodeArrays(tasks=self.tasks, algos=self.algos, sources=self.sources, **fields)

    def where(self, i) -> str:
        """'FILE row N' of episode i, for error messages."""
        return f"{self.sources[self.source[i]]} row {self.row[i]}"


def _read_arrow(path) -> pa.Table:
    if not os.path.exists(path):
        raise EpisodeTableError(f"{path}: no such file")
    if os.path.isdir(path):
        raise EpisodeTableError(f"{path}: a folder; read it with read_episodes or python -m metrics, "
                                f"which take a recorder's folder (or give its episode files)")
    lower = str(path).lower()
    try:
        if lower.endswith((".parquet", ".pq")):
            schema = pq.read_schema(path)
            columns = [c for c in REQUIRED_COLUMNS if c in schema.names]
            missing = [c for c in REQUIRED_COLUMNS if c not in schema.names]
            if missing:
                _fail(path, f"missing column(s) {', '.join(missing)} (has: {', '.join(schema.names)})")
            return pq.read_table(path, columns=columns)
        if lower.endswith((".csv", ".csv.gz", ".tsv")):
            header = pacsv.read_csv(
                path,
                parse_options=pacsv.ParseOptions(delimiter="\t" if lower.endswith(".tsv") else ","),
                convert_options=pacsv.ConvertOptions(column_types={c: pa.string() for c in STRING_COLUMNS}),
            )
            missing = [c for c in REQUIRED_COLUMNS if c not in header.column_names]
            if missing:
                _fail(path, f"missing column(s) {', '.join(missing)} (has: {', '.join(header.column_names)})")
            return header.select(list(REQUIRED_COLUMNS))
    except (pa.ArrowInvalid, OSError) as err:
        raise EpisodeTableError(f"{path}: cannot be read as an episode table: {err}") from err
    raise EpisodeTableError(f"{path}: unknown file type (expected .parquet, .csv or .tsv)")


def _strings(col: pa.ChunkedArray, name, path):
    """(sorted unique values, codes into them) of a string column."""
    if col.null_count:
        _fail(path, f"column {name} has missing values", np.flatnonzero(col.is_null().to_numpy(zero_copy_only=False)))
    if not pa.types.is_dictionary(col.type):
        col = pc.dictionary_encode(col.cast(pa.string()))
    col = pa.table({"c": col}).unify_dictionaries()["c"]
    if col.num_chunks == 0:
        return np.array([], dtype=object), np.zeros(0, dtype=np.int32)
    values = np.asarray(col.chunks[0].dictionary.cast(pa.string()).to_pylist(), dtype=object)
    codes = np.concatenate([chunk.indices.to_numpy(zero_copy_only=False) for chunk in col.chunks]).astype(np.int32)
    # Dictionary order is first-occurrence order; map it to sorted order so codes are canonical.
    unique, inverse = np.unique(values.astype(str), return_inverse=True)
    return unique.astype(object), inverse.astype(np.int32)[codes]


def _numbers(col: pa.ChunkedArray, name, path, missing_as_nan=False) -> np.ndarray:
    if col.null_count and not missing_as_nan:
        _fail(path, f"column {name} has missing values", np.flatnonzero(col.is_null().to_numpy(zero_copy_only=False)))
    if pa.types.is_string(col.type) or pa.types.is_large_string(col.type):
        text = col.to_numpy(zero_copy_only=False)
        values = pd.to_numeric(pd.Series(text), errors="coerce").to_numpy(dtype=np.float64)
        bad = np.isnan(values) & ~np.isin(np.char.lower(text.astype(str)), ["nan", "-nan", "+nan"])
        if bad.any():
            _fail(path, f"column {name} has non-numeric values such as {text[bad][0]!r}", np.flatnonzero(bad))
        return values
    if pa.types.is_boolean(col.type) or not (pa.types.is_integer(col.type) or pa.types.is_floating(col.type)):
        _fail(path, f"column {name} must be numeric, not {col.type}")
    # pandas writes NaN floats as Parquet nulls: for float columns a null is a NaN
    return col.to_numpy(zero_copy_only=False).astype(np.float64) if col.null_count else col.to_numpy()


def _integers(col, name, path) -> np.ndarray:
    values = _numbers(col, name, path)
    if values.dtype.kind == "i":
        return values.astype(np.int64, copy=False)
    if values.dtype.kind == "u":
        bad = values > np.iinfo(np.int64).max
    else:
        bad = ~np.isfinite(values) | (values != np.round(values))
        if bad.any():
            _fail(path, f"column {name} must hold integers, not {float(values[bad][0])!r}", np.flatnonzero(bad))
        # float64 holds 2**63 exactly; int64's range ends just below it
        bad = (values < -2.0**63) | (values >= 2.0**63)
    if bad.any():
        _fail(path, f"column {name} must hold 64-bit integers; {values[bad][0].item()!r} is outside -2**63 .. 2**63-1",
              np.flatnonzero(bad))
    return values.astype(np.int64)


def _validate_file(path, table: pa.Table) -> dict:
    """Per-file checks and conversion to arrays (duplicates are checked after merging files)."""
    if table.num_rows == 0:
        _fail(path, "has no episode rows (a header or schema only)")
    out = {}
    for name in STRING_COLUMNS:
        out[name] = _strings(table[name], name, path)
    for name in INTEGER_COLUMNS:
        out[name] = _integers(table[name], name, path)
    for name in FLOAT_COLUMNS:
        out[name] = _numbers(table[name], name, path, missing_as_nan=True).astype(np.float64, copy=False)

    for name in ("return", "cost"):
        bad = ~np.isfinite(out[name])
        if bad.any():
            _fail(path, f"column {name} has NaN, missing or infinite values", np.flatnonzero(bad))
    bound = out["bound"]
    bad = ~(np.isfinite(bound) & (bound > 0))
    if bad.any():
        _fail(path, f"column bound must be finite and > 0 (found {float(bound[bad][0])!r})", np.flatnonzero(bad))
    values, codes = out["phase"]
    unknown = [v for v in values if v not in PHASES]
    if unknown:
        rows = np.flatnonzero(np.isin(codes, [i for i, v in enumerate(values) if v not in PHASES]))
        _fail(path, f"unknown phase(s) {', '.join(map(repr, unknown))} (allowed: {', '.join(PHASES)})", rows)
    out["phase"] = np.asarray([PHASES.index(v) for v in values], dtype=np.int8)[codes] if len(values) else codes.astype(np.int8)
    return out


def _merge_strings(parts):
    """Concatenate (values, codes) pairs from several files into codes over their sorted union."""
    union = np.unique(np.concatenate([np.asarray(v, dtype=str) for v, _ in parts])) if parts else np.array([], str)
    codes = [np.searchsorted(union, np.asarray(v, dtype=str)).astype(np.int32)[c] if len(v) else c for v, c in parts]
    return union.astype(object), np.concatenate(codes) if codes else np.zeros(0, np.int32)


def load_episode_arrays(paths) -> EpisodeArrays:
    """Read and validate one or more episode files (or recorder folders) into one unsorted :class:`EpisodeArrays`."""
    paths = expand_episode_paths(paths)
    if not paths:
        raise EpisodeTableError("no episode files given")
    files = [_validate_file(path, _read_arrow(path)) for path in paths]
    tasks, task = _merge_strings([f["task"] for f in files])
    algos, algo = _merge_strings([f["algo"] for f in files])
    cat = lambda name: files[0][name] if len(files) == 1 else np.concatenate([f[name] for f in files])  # noqa: E731
    sizes = [f["cost"].size for f in files]
    return EpisodeArrays(
        tasks=tasks,
        algos=algos,
        task=task,
        algo=algo,
        phase=cat("phase"),
        bound=cat("bound"),
        seed=cat("seed"),
        iteration=cat("iteration"),
        episode=cat("episode"),
        ret=cat("return"),
        cost=cat("cost"),
        source=np.repeat(np.arange(len(paths), dtype=np.int32), sizes),
        row=np.concatenate([np.arange(n, dtype=np.int64) for n in sizes]),
        sources=tuple(paths),
    )


def _dense_rank(values):
    """Order-preserving integer codes and their count; constant columns and integer columns
    with a compact range (iterations, episode indices) avoid sorting."""
    if values.size == 0:
        return np.zeros(0, np.int64), 1
    lo, hi = values.min(), values.max()
    if lo == hi:
        return np.zeros(1, np.int64), 1  # broadcasts; constant columns are dropped from the key
    # the range in Python ints: int64 extremes (seeds near +-2**63) would overflow in numpy
    if values.dtype.kind in "iu" and int(hi) - int(lo) < 4 * values.size + 1024:
        return (values.astype(np.int64, copy=False) - lo), int(hi - lo) + 1
    unique, inverse = np.unique(values, return_inverse=True)
    return inverse.astype(np.int64), unique.size


def sort_and_check(ep: EpisodeArrays) -> EpisodeArrays:
    """Episodes in canonical key order; raises on duplicate keys.

    Sorting by the full key makes every later float sum independent of the input's row order
    and of how the rows were split over files.
    """
    if len(ep) == 0:
        return ep
    columns = [
        _dense_rank(ep.task),
        _dense_rank(ep.bound),
        _dense_rank(ep.algo),
        _dense_rank(ep.seed),
        _dense_rank(ep.phase),
        _dense_rank(ep.iteration),
        _dense_rank(ep.episode),
    ]
    columns = [(codes, size) for codes, size in columns if size > 1] or [columns[-1]]  # constants order nothing
    radix = 1
    for _, size in columns:
        radix *= max(size, 1)
    if radix < 2**62:
        key = np.zeros(len(ep), np.int64)
        for codes, size in columns:
            key = key * size + codes
        if np.all(key[1:] > key[:-1]):  # already sorted and unique: the common case for shards
            return ep
        order = np.argsort(key, kind="stable")
        sorted_key = key[order]
        same = sorted_key[1:] == sorted_key[:-1]
    else:
        order = np.lexsort([codes for codes, _ in reversed(columns)])
        same = np.ones(len(ep) - 1, bool)
        for codes, _ in columns:
            c = codes[order]
            same &= c[1:] == c[:-1]
    ep = ep.take(order)
    if same.any():
        first = np.flatnonzero(same)[0]
        dup = [ep.where(first), ep.where(first + 1)]
        n = int(same.sum())
        key = {
            "task": ep.tasks[ep.task[first]],
            "bound": float(ep.bound[first]),
            "algo": ep.algos[ep.algo[first]],
            "seed": int(ep.seed[first]),
            "phase": PHASES[ep.phase[first]],
            "iteration": int(ep.iteration[first]),
            "episode": int(ep.episode[first]),
        }
        raise EpisodeTableError(
            f"{dup[1]}: duplicate key {key}, also at {dup[0]} ({n} duplicate row(s) in all; "
            f"rows must be unique on {', '.join(EPISODE_KEYS)})"
        )
    return ep


def read_episodes(paths) -> pd.DataFrame:
    """Validated episode table of one or more files (or recorder folders) as a DataFrame in canonical key order.

    Columns: task, bound, algo, seed, phase, iteration, episode, return, cost, source, row.
    Raises EpisodeTableError naming the file and rows on bad input.
    """
    if isinstance(paths, (str, os.PathLike)):
        paths = [paths]
    ep = sort_and_check(load_episode_arrays(paths))
    return pd.DataFrame(
        {
            "task": ep.tasks[ep.task].astype(str) if len(ep) else np.array([], str),
            "bound": ep.bound,
            "algo": ep.algos[ep.algo].astype(str) if len(ep) else np.array([], str),
            "seed": ep.seed,
            "phase": np.asarray(PHASES)[ep.phase],
            "iteration": ep.iteration,
            "episode": ep.episode,
            "return": ep.ret,
            "cost": ep.cost,
            "source": np.asarray(ep.sources, dtype=object)[ep.source] if len(ep) else np.array([], str),
            "row": ep.row,
        }
    )
