"""The shard folder a recorder writes: one run's rows of the episode table, crash-safe.

Layout of a run's folder (all files are episode tables the engine reads as they are:
``python -m metrics evaluate FOLDER/*.parquet``):

- ``train-00000.parquet``, ``train-00001.parquet``, ...: training iterates, in order;
- ``final.parquet``: both final phases, written once by the final evaluation.

Why segments that are rewritten: Parquet cannot be appended to, so each flush rewrites the
current segment (its rows so far plus the new iterates) to a temporary file and renames it over
the old one (``metrics.atomic.atomic_path``). Every file on disk is therefore always complete
and readable; a crash loses only what was not yet flushed (by default: the iterate in
progress). A segment is closed once it holds ``rows_per_file`` rows and the next flush starts a
new one, which bounds the cost of a flush and the rows kept in memory; a paper-size run (2048
envs x 122 iterates = 250k episodes) fills four files with the default 65,536 rows.
"""
from __future__ import annotations

import math
import os
import re

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq

from algos.runfolder import EPISODE_SCHEMA, episode_rows
from metrics.atomic import atomic_path
from metrics.schema import FINAL_PHASES, PHASES

TRAIN_PHASE = PHASES[0]
SEGMENT_PATTERN = re.compile(rf"^{TRAIN_PHASE}-(\d+)\.parquet$")
FINAL_FILE = "final.parquet"
DEFAULT_ROWS_PER_FILE = 65_536


class RecorderError(ValueError):
    """Bad input to a recorder (wrong step output, non-finite reward or cost, bad run identity)."""


def _check_identity(task, bound, algo, seed):
    if not isinstance(task, str) or not task:
        raise RecorderError(f"task must be a non-empty string, got {task!r}")
    if not isinstance(algo, str) or not algo:
        raise RecorderError(f"algo must be a non-empty string, got {algo!r}")
    if isinstance(bound, bool) or not isinstance(bound, (int, float, np.integer, np.floating)) \
            or not (math.isfinite(bound) and bound > 0):
        raise RecorderError(f"bound must be a finite number > 0, got {bound!r}")
    if isinstance(seed, bool) or not isinstance(seed, (int, np.integer)):
        raise RecorderError(f"seed must be an integer, got {seed!r}")


def as_block(name, values, shape=None, dtype=np.float64) -> np.ndarray:
    """A [iterates, episodes] array; raises naming the field if it is not finite or not 2-D."""
    array = np.asarray(values)
    if array.ndim != 2 or (shape is not None and array.shape != shape):
        want = f"shape {shape}" if shape is not None else "a 2-D [iterates, episodes] array"
        raise RecorderError(f"{name}: expected {want}, got shape {array.shape}")
    if array.dtype.kind not in "iuf":
        raise RecorderError(f"{name}: expected numbers, got dtype {array.dtype}")
    bad = ~np.isfinite(array)
    if bad.any():
        j, i = np.argwhere(bad)[0]
        raise RecorderError(f"{name}: non-finite value {array[j, i].item()!r} (iterate {j} of this block, episode {i}); "
                            f"the episode table needs finite returns and costs")
    return array.astype(dtype, copy=False)


class EpisodeWriter:
    """Writes one run's (task, bound, algo, seed) episode rows into ``folder``.

    ``append_iterates`` takes [k, N] blocks of finished episodes (k iterates of N episodes)
    and numbers the iterates 0, 1, ...; ``write_final`` records the two final phases at the
    last training iterate. A folder that already holds episode files is refused unless
    ``resume=True``, which continues the numbering after the iterates on disk.
    """

    def __init__(self, folder, *, task: str, bound: float, algo: str, seed: int,
                 flush_every: int = 1, rows_per_file: int = DEFAULT_ROWS_PER_FILE, resume: bool = False):
        _check_identity(task, bound, algo, seed)
        if not isinstance(flush_every, int) or flush_every < 1:
            raise RecorderError(f"flush_every must be an integer >= 1, got {flush_every!r}")
        if not isinstance(rows_per_file, int) or rows_per_file < 1:
            raise RecorderError(f"rows_per_file must be an integer >= 1, got {rows_per_file!r}")
        self.folder = os.fspath(folder)
        self.run = (task, float(bound), algo, int(seed))
        self.flush_every, self.rows_per_file = flush_every, rows_per_file
        os.makedirs(self.folder, exist_ok=True)
        segments = sorted(int(m.group(1)) for m in map(SEGMENT_PATTERN.match, os.listdir(self.folder)) if m)
        has_final = os.path.exists(os.path.join(self.folder, FINAL_FILE))
        if (segments or has_final) and not resume:
            raise RecorderError(f"{self.folder}: already holds episode files of a run; choose an empty folder "
                                f"or pass resume=True to continue after the iterates recorded there")
        if has_final:
            raise RecorderError(f"{self.folder}: the run's final evaluation is recorded already; nothing to resume")
        self.iterations = 0  # training iterates recorded (flushed or pending)
        self._segment = segments[-1] + 1 if segments else 0
        if segments:
            last = pq.read_table(self._segment_path(segments[-1]), columns=["iteration"])["iteration"]
            self.iterations = int(np.max(last.to_numpy())) + 1 if len(last) else 0
        self._segment_tables: list[pa.Table] = []  # flushed rows of the open segment
        self._segment_rows = 0
        self._pending: list[tuple] = []  # (iterations, ret, cost, length) recorded but not yet flushed
        self._pending_iterates = 0
        self.final_written = False

    # ---- training ------------------------------------------------------------------
    def append_iterates(self, ret, cost, length) -> None:
        """Record k finished iterates of N episodes each ([k, N] arrays); flush per ``flush_every``."""
        if self.final_written:
            raise RecorderError(f"{self.folder}: the final evaluation is recorded; no training iterates may follow")
        ret = as_block("return", ret)
        cost = as_block("cost", cost, ret.shape)
        length = as_block("length", length, ret.shape, np.int64)
        if ret.shape[0] == 0:
            return
        iterations = np.arange(self.iterations, self.iterations + ret.shape[0])
        self._pending.append((iterations, ret, cost, length))
        self.iterations += ret.shape[0]
        self._pending_iterates += ret.shape[0]
        if self._pending_iterates >= self.flush_every:
            self.flush()

    def flush(self) -> None:
        """Write the pending iterates: rewrite the open segment atomically, close it when full."""
        if not self._pending:
            return
        new = self._table(TRAIN_PHASE, self._pending)
        self._segment_tables.append(new)
        self._segment_rows += new.num_rows
        self._pending, self._pending_iterates = [], 0
        table = pa.concat_tables(self._segment_tables)
        _write(self._segment_path(self._segment), table)
        self._segment_tables = [table]
        if self._segment_rows >= self.rows_per_file:
            self._segment, self._segment_tables, self._segment_rows = self._segment + 1, [], 0

    # ---- final evaluation ----------------------------------------------------------
    @property
    def final_iteration(self) -> int:
        """The iteration the final phases carry: the last training iterate (0 if none)."""
        return max(self.iterations - 1, 0)

    def write_final(self, explore: dict, greedy: dict) -> str:
        """Record both final phases; each dict holds 1-D ``return``, ``cost``, ``length`` arrays."""
        if self.final_written:
            raise RecorderError(f"{self.folder}: the final evaluation is recorded already")
        self.flush()
        tables = []
        for phase, episodes in zip(FINAL_PHASES, (explore, greedy)):
            missing = [k for k in ("return", "cost", "length") if k not in episodes]
            if missing:
                raise RecorderError(f"{phase}: missing field(s) {', '.join(missing)}")
            ret = as_block(f"{phase} return", np.asarray(episodes["return"])[None])
            if ret.size == 0:
                raise RecorderError(f"{phase}: no episodes")
            cost = as_block(f"{phase} cost", np.asarray(episodes["cost"])[None], ret.shape)
            length = as_block(f"{phase} length", np.asarray(episodes["length"])[None], ret.shape, np.int64)
            tables.append(self._table(phase, [([self.final_iteration], ret, cost, length)]))
        path = os.path.join(self.folder, FINAL_FILE)
        _write(path, pa.concat_tables(tables))
        self.final_written = True
        return path

    # ---- helpers -------------------------------------------------------------------
    def files(self) -> list[str]:
        """The episode files written so far, in order (what to pass to ``python -m metrics``)."""
        names = sorted(n for n in os.listdir(self.folder) if SEGMENT_PATTERN.match(n))
        if os.path.exists(os.path.join(self.folder, FINAL_FILE)):
            names.append(FINAL_FILE)
        return [os.path.join(self.folder, n) for n in names]

    def close(self) -> None:
        """Flush what is pending (complete iterates only: an unfinished iterate is never written)."""
        self.flush()

    def _segment_path(self, index: int) -> str:
        return os.path.join(self.folder, f"{TRAIN_PHASE}-{index:05d}.parquet")

    def _table(self, phase, blocks) -> pa.Table:
        """One table of [k, N] blocks given as (iterations, ret, cost, length)."""
        parts = [episode_rows(*self.run, phase, *block) for block in blocks]
        columns = {name: np.concatenate([p[name] for p in parts]) for name in EPISODE_SCHEMA.names}
        return pa.Table.from_pydict(columns, schema=EPISODE_SCHEMA)

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()


def _write(path: str, table: pa.Table) -> None:
    with atomic_path(path) as tmp:
        pq.write_table(table, tmp)
