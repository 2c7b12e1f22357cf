"""Read and validate episode tables (docs/metrics.md) from Parquet or CSV files.

The tables can be large (a paper-size run holds ~250k episodes), so columns are kept as
numpy arrays and string columns as dictionary codes; pandas is used only for the small
user-facing :func:`read_episodes` result. Every error names the file and the offending rows
(0-based data rows: row 0 is the first row after a CSV header, i.e. CSV line 2).

A folder given in place of a file is a recorder's folder (``recorders.writer``: one run's
``train-*.parquet`` parts and ``final.parquet``), a run folder of this project's trainer
(``runs.train --out``: one ``episodes.parquet``), or a folder with such folders below it (a
sweep's ``runs/``); :func:`expand_episode_paths` turns it into the episode files it holds.
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

from .buffers import empty
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
# the episode table of a trainer's run folder (runs.run_layout.EPISODES; this package does not
# import the trainer, which a base install lacks)
TRAINER_EPISODES = "episodes.parquet"
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
    return RECORDER_MARKER in names or FINAL_FILE in names or TRAINER_EPISODES in names or any(
        TRAIN_PART.match(n) or TRAIN_SEGMENT_V1.match(n) for n in names)


def recorder_files(folder) -> list:
    """The episode files of one recorder folder, training iterates in order, then final.parquet;
    of a trainer's run folder, its one episodes.parquet."""
    folder = os.fspath(folder)
    names = os.listdir(folder)
    if TRAINER_EPISODES in names and RECORDER_MARKER not in names:
        return [os.path.join(folder, TRAINER_EPISODES)]
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
                f"train-*.parquet, {FINAL_FILE}) or of a trainer's run folder ({TRAINER_EPISODES}) in it or "
                f"below; give such a folder or episode files (.parquet, .csv, .tsv)")
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
    is an index into PHASES; integer columns keep the file's integer type. A column that is
    constant in a file may be a read-only broadcast view (stride 0) of its one value. Where each
    episode came from (for error messages) is its position in the files as read: ``origin``
    (None while rows are in that order) into ``starts``, the first position of each of
    ``sources``.
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
    sources: tuple
    starts: np.ndarray
    origin: np.ndarray | None = None

    def __len__(self):
        return self.cost.size

    def take(self, order):
        """The same episodes reordered (or subset) by an index array."""
        fields = {
            name: getattr(self, name)[order]
            for name in ("task", "algo", "phase", "bound", "seed", "iteration", "episode", "ret", "cost")
        }
        origin = order if self.origin is None else self.origin[order]
        return EpisodeArrays(tasks=self.tasks, algos=self.algos, sources=self.sources, starts=self.starts,
                             origin=origin, **fields)

    def positions(self) -> np.ndarray:
        """Each episode's position in the files as read."""
        return np.arange(len(self)) if self.origin is None else self.origin

    def file_and_row(self, positions):
        """(index into sources, 0-based data row) of positions in the files as read."""
        file = np.searchsorted(self.starts, positions, side="right") - 1
        return file, positions - self.starts[file]

    def where(self, i) -> str:
        """'FILE row N' of episode i, for error messages."""
        file, row = self.file_and_row(self.positions()[i])
        return f"{self.sources[file]} row {row}"

    def source_ids(self, first, stop) -> np.ndarray:
        """Sorted indices into sources of the files episodes first..stop-1 came from."""
        if self.origin is None:  # rows in file order: the files the range spans
            return np.arange(self.file_and_row(first)[0], self.file_and_row(stop - 1)[0] + 1)
        return np.unique(self.file_and_row(self.origin[first:stop])[0])


def _constant_value(stats, kind):
    """The one value a row group's statistics show for a column, or None when they cannot say."""
    if stats is None or not stats.has_min_max or stats.null_count != 0 or stats.min != stats.max:
        return None
    if not (getattr(stats, "is_min_value_exact", True) and getattr(stats, "is_max_value_exact", True)):
        return None  # truncated statistics
    return stats.min if isinstance(stats.min, kind) and not isinstance(stats.min, bool) else None


def constant_columns(metadata, kinds) -> dict:
    """{name: value} of the columns named in ``kinds`` (name -> the value's Python type or types) that every
    row group's Parquet statistics show as one value and no nulls; reads no data pages.

    Float statistics leave NaN out, so a float column's constancy says nothing about NaNs."""
    names = [metadata.schema.column(i).name for i in range(metadata.num_columns)]
    out = {}
    if metadata.num_rows == 0 or metadata.num_row_groups == 0:
        return out
    for name, kind in kinds.items():
        if names.count(name) != 1:
            continue
        column = names.index(name)
        values = {_constant_value(metadata.row_group(g).column(column).statistics, kind)
                  for g in range(metadata.num_row_groups)}
        if len(values) == 1 and None not in values:
            out[name] = values.pop()
    return out


def _statistics_kinds(schema: pa.Schema) -> dict:
    """The key columns whose one value Parquet statistics can give exactly: strings and 64-bit-safe integers."""
    kinds = {}
    for name in STRING_COLUMNS:
        typ = schema.field(name).type
        typ = typ.value_type if pa.types.is_dictionary(typ) else typ
        if pa.types.is_string(typ) or pa.types.is_large_string(typ):
            kinds[name] = str
    for name in INTEGER_COLUMNS:
        typ = schema.field(name).type
        if pa.types.is_integer(typ) and not pa.types.is_uint64(typ):
            kinds[name] = int
    return kinds


def _read_arrow(path, use_threads=True):
    """(table, constants): the file's episode columns, except those that Parquet statistics show
    constant, which are not read and come as {name: value}. ``use_threads``: decode columns in
    Arrow's threads (callers that read several files at once turn it off)."""
    if not os.path.exists(path):
        raise EpisodeTableError(f"{path}: no such file")
    if os.path.isdir(path):
        raise EpisodeTableError(f"{path}: a folder; read it with read_episodes or saferl-eval, "
                                f"which take a recorder's or a trainer's run folder (or give its episode files)")
    lower = str(path).lower()
    try:
        if lower.endswith((".parquet", ".pq")):
            parquet = pq.ParquetFile(path, pre_buffer=use_threads)
            schema = parquet.schema_arrow
            missing = [c for c in REQUIRED_COLUMNS if c not in schema.names]
            if missing:
                _fail(path, f"missing column(s) {', '.join(missing)} (has: {', '.join(schema.names)})")
            constants = constant_columns(parquet.metadata, _statistics_kinds(schema))
            columns = [c for c in REQUIRED_COLUMNS if c not in constants]
            return parquet.read(columns=columns, use_threads=use_threads), constants
        if lower.endswith((".csv", ".csv.gz", ".tsv")):
            header = pacsv.read_csv(
                path,
                parse_options=pacsv.ParseOptions(delimiter="\t" if lower.endswith(".tsv") else ","),
                convert_options=pacsv.ConvertOptions(column_types={c: pa.string() for c in STRING_COLUMNS}),
            )
            missing = [c for c in REQUIRED_COLUMNS if c not in header.column_names]
            if missing:
                _fail(path, f"missing column(s) {', '.join(missing)} (has: {', '.join(header.column_names)})")
            return header.select(list(REQUIRED_COLUMNS)), {}
    except (pa.ArrowInvalid, OSError) as err:
        raise EpisodeTableError(f"{path}: cannot be read as an episode table: {err}") from err
    raise EpisodeTableError(f"{path}: unknown file type (expected .parquet, .csv or .tsv)")


def _dictionary(col: pa.ChunkedArray, name, path):
    """(distinct values in the column's dictionary order, codes into them) of a string column."""
    if col.null_count:
        _fail(path, f"column {name} has missing values", np.flatnonzero(col.is_null().to_numpy(zero_copy_only=False)))
    if not pa.types.is_dictionary(col.type):
        col = pc.dictionary_encode(col.cast(pa.string()))
    if col.num_chunks > 1:
        col = pa.table({"c": col}).unify_dictionaries()["c"]
    if col.num_chunks == 0:
        return np.array([], dtype=object), np.zeros(0, dtype=np.int32)
    values = np.asarray(col.chunks[0].dictionary.cast(pa.string()).to_pylist(), dtype=object)
    indices = [chunk.indices.to_numpy(zero_copy_only=False) for chunk in col.chunks]
    return values, indices[0] if len(indices) == 1 else np.concatenate(indices)


def _strings(col: pa.ChunkedArray, name, path):
    """(sorted unique values, codes into them) of a string column."""
    values, codes = _dictionary(col, name, path)
    # Dictionary order is first-occurrence order; map it to sorted order so codes are canonical.
    unique, inverse = np.unique(values.astype(str), return_inverse=True)
    return unique.astype(object), inverse.astype(np.int32)[codes]


def _check_names(values, codes, name, path) -> None:
    """Refuse an empty (or all-blank) task or algorithm name: it would be an empty first cell in
    every output, one that reads as a missing value. Any other name is kept exactly."""
    blank = [i for i, v in enumerate(values) if not str(v).strip()]
    if blank:
        _fail(path, f"column {name} has an empty name {str(values[blank[0]])!r}; name every {name}",
              np.flatnonzero(np.isin(codes, blank)))


def _constant(value, n, dtype):
    """A read-only array of n copies of value that takes no memory."""
    return np.broadcast_to(np.asarray(value, dtype=dtype), (n,))


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


def _floats(col: pa.ChunkedArray, name, path) -> np.ndarray:
    """A float column as float64 (a null is a NaN: pandas writes NaN floats as Parquet nulls).
    Float columns are widened in Arrow, so the result lives in Arrow's pool (metrics.buffers)."""
    if not (pa.types.is_float32(col.type) or pa.types.is_float64(col.type)):
        return _numbers(col, name, path, missing_as_nan=True).astype(np.float64, copy=False)
    col = col.cast(pa.float64())
    if col.null_count:
        col = col.fill_null(np.nan)
    return (col.chunk(0) if col.num_chunks == 1 else pa.concat_arrays(col.chunks)).to_numpy()


def _integers(col, name, path) -> np.ndarray:
    """The column as integers: signed and up to 32-bit unsigned types as they are, others as int64."""
    values = _numbers(col, name, path)
    if values.dtype.kind == "i" or (values.dtype.kind == "u" and values.dtype.itemsize < 8):
        return values
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


def _all_finite(values) -> bool:
    """True when no value is NaN or infinite, in one pass without a temporary in the usual case:
    a NaN or infinity makes the sum NaN or infinite; only a sum that overflows needs a second look."""
    return bool(np.isfinite(np.add.reduce(values))) or bool(np.isfinite(values).all())


def _bounds(values, path) -> np.ndarray:
    """The bound column, checked finite and > 0; one value for all rows comes as a broadcast view."""
    lo, hi = values.min(), values.max()  # NaN propagates into both
    if lo > 0 and hi < np.inf:
        return _constant(lo, values.size, np.float64) if lo == hi else values
    bad = ~(np.isfinite(values) & (values > 0))
    _fail(path, f"column bound must be finite and > 0 (found {float(values[bad][0])!r})", np.flatnonzero(bad))


def _validate_file(path, table: pa.Table, constants: dict) -> dict:
    """Per-file checks and conversion to arrays (duplicates are checked after merging files).

    ``constants`` are key columns not read because the file's statistics show one value."""
    n = table.num_rows
    if n == 0:
        _fail(path, "has no episode rows (a header or schema only)")
    out = {}
    for name in ("task", "algo"):
        if name in constants:
            out[name] = np.array([constants[name]], dtype=object), _constant(0, n, np.int32)
        else:
            out[name] = _strings(table[name], name, path)
        _check_names(*out[name], name, path)
    for name in INTEGER_COLUMNS:
        out[name] = _constant(constants[name], n, np.int64) if name in constants else _integers(table[name], name, path)
    for name in FLOAT_COLUMNS:
        out[name] = _floats(table[name], name, path)

    for name in ("return", "cost"):
        if not _all_finite(out[name]):
            bad = ~np.isfinite(out[name])
            _fail(path, f"column {name} has NaN, missing or infinite values", np.flatnonzero(bad))
    out["bound"] = _bounds(out["bound"], path)
    if "phase" in constants:
        values, codes = np.array([constants["phase"]], dtype=object), _constant(0, n, np.int32)
    else:
        values, codes = _dictionary(table["phase"], "phase", path)
    unknown = [v for v in values if v not in PHASES]
    if unknown:
        rows = np.flatnonzero(np.isin(codes, [i for i, v in enumerate(values) if v not in PHASES]))
        _fail(path, f"unknown phase(s) {', '.join(map(repr, unknown))} (allowed: {', '.join(PHASES)})", rows)
    ranks = [PHASES.index(v) for v in values]
    # a dictionary in PHASES order (as the recorders write it) needs no mapping
    out["phase"] = codes if ranks == list(range(len(ranks))) else np.asarray(ranks, dtype=np.int8)[codes]
    return out


def _merge_strings(parts):
    """Concatenate (values, codes) pairs from several files into codes over their sorted union."""
    if len(parts) == 1:  # one file's values are already its sorted unique values
        return parts[0]
    union = np.unique(np.concatenate([np.asarray(v, dtype=str) for v, _ in parts])) if parts else np.array([], str)
    codes = [np.searchsorted(union, np.asarray(v, dtype=str)).astype(np.int32)[c] if len(v) else c for v, c in parts]
    return union.astype(object), np.concatenate(codes) if codes else np.zeros(0, np.int32)


def load_episode_arrays(paths, use_threads=True) -> EpisodeArrays:
    """Read and validate one or more episode files (or recorder folders) into one unsorted
    :class:`EpisodeArrays` (``use_threads``: see _read_arrow)."""
    paths = expand_episode_paths(paths)
    if not paths:
        raise EpisodeTableError("no episode files given")
    files = [_validate_file(path, *_read_arrow(path, use_threads)) for path in paths]
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
        sources=tuple(paths),
        starts=np.concatenate([[0], np.cumsum(sizes)[:-1]]).astype(np.int64),
    )


def _dense_rank(values):
    """(codes, count, offset): order-preserving integer codes are ``codes - offset``, in 0..count-1;
    codes and offset lie in the int32 range.

    Constant columns and integer columns with a compact range (iterations, episode indices)
    avoid sorting, and integer codes are the values themselves (the offset is subtracted
    where the codes are combined, without a temporary)."""
    if values.size == 0:
        return np.zeros(0, np.int64), 1, 0
    if values.strides == (0,):  # a broadcast view of a file's one value (_constant)
        return np.zeros(1, np.int64), 1, 0
    lo, hi = values.min(), values.max()
    if lo == hi:
        return np.zeros(1, np.int64), 1, 0  # broadcasts; constant columns are dropped from the key
    # the range in Python ints: int64 extremes (seeds near +-2**63) would overflow in numpy
    if values.dtype.kind in "iu" and int(hi) - int(lo) < 4 * values.size + 1024:
        if -(2**31) <= lo and hi < 2**31:  # the values themselves, combined with modular int32/int64 arithmetic
            return values, int(hi) - int(lo) + 1, int(lo)
        return values.astype(np.int64) - lo, int(hi) - int(lo) + 1, 0
    unique, inverse = np.unique(values, return_inverse=True)
    return inverse.astype(np.int64), unique.size, 0


def _sort_key(columns, n, radix) -> np.ndarray:
    """One integer below radix per episode ordering it as the (codes, count, offset) columns do,
    most significant first (int32 when it fits: half the memory traffic). Intermediate sums may
    wrap around; the arithmetic is modular and the final key is below radix, so it is exact."""
    key = empty(n, np.int32 if radix < 2**31 else np.int64)
    key[...] = 0
    for codes, size, offset in columns:
        key *= size
        key += codes
        key -= offset
    return key


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
    columns = [c for c in columns if c[1] > 1] or [columns[-1]]  # constants order nothing
    radix = 1
    for _, size, _ in columns:
        radix *= max(size, 1)
    if radix < 2**62:
        key = _sort_key(columns, len(ep), radix)
        if np.greater(key[1:], key[:-1], out=empty(len(ep) - 1, bool)).all():  # sorted and unique: usual for shards
            return ep
        order = np.argsort(key, kind="stable")
        sorted_key = key[order]
        same = sorted_key[1:] == sorted_key[:-1]
    else:
        order = np.lexsort([codes for codes, _, _ in reversed(columns)])
        same = np.ones(len(ep) - 1, bool)
        for codes, _, _ in columns:
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
    file, row = ep.file_and_row(ep.positions())
    return pd.DataFrame(
        {
            "task": ep.tasks[ep.task].astype(str) if len(ep) else np.array([], str),
            "bound": np.array(ep.bound, np.float64),
            "algo": ep.algos[ep.algo].astype(str) if len(ep) else np.array([], str),
            "seed": np.array(ep.seed, np.int64),
            "phase": np.asarray(PHASES)[ep.phase],
            "iteration": np.array(ep.iteration, np.int64),
            "episode": np.array(ep.episode, np.int64),
            "return": ep.ret,
            "cost": ep.cost,
            "source": np.asarray(ep.sources, dtype=object)[file] if len(ep) else np.array([], str),
            "row": row,
        }
    )
