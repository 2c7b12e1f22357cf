"""The folder a recorder writes: one run's rows of the episode table, crash-safe.

Layout of a run's folder (``python -m metrics evaluate FOLDER`` reads it; so does
``metrics.read_episodes(FOLDER)``):

- ``train-FIRST-LAST.parquet``: training iterates FIRST to LAST (``train-000000-000000.parquet``
  holds iterate 0);
- ``final.parquet``: both final phases, written once by the final evaluation;
- ``recorder.json``: the run's identity (task, bound, algo, seed), which ``resume=True`` checks;
- ``writer.lock``: held (``flock``) by the writer that has the folder open; it names the holder.

Why part files: Parquet cannot be appended to, so a flush writes its new iterates as a new
small file (to a temporary file renamed into place: ``metrics.atomic.atomic_path``): its cost
is that of the rows added, not of the rows so far. Every file on disk is always complete and
readable; a crash loses only what was not yet flushed (by default: the iterate in progress).
To keep the number of files small, parts are merged as they accumulate: each time the newest
``MERGE_FANOUT`` parts are of one size class (size classes are powers of ``MERGE_FANOUT`` rows)
they are written as one file covering their iterates, and once the parts since the last closed
file hold ``rows_per_file`` rows they become one closed file, never rewritten. Each row is
rewritten a few times in all (once per size class), so the total cost stays proportional to
the rows written; a folder holds a few dozen files at most besides the closed ones. A merged
file is written before the parts it covers are deleted; if a crash comes in between, readers
skip the covered parts (``metrics.episodes.train_parts``) and a resumed writer deletes them.
"""
from __future__ import annotations

import datetime
import json
import math
import os
import socket

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq

from . import engine
from .engine import FINAL_PHASES, PHASES, atomic_path, write_text

try:
    import fcntl
except ImportError:  # not on Windows: the folder is not locked there
    fcntl = None

TRAIN_PHASE = PHASES[0]
FINAL_FILE = "final.parquet"
MARKER_FILE = "recorder.json"
LOCK_FILE = "writer.lock"
DEFAULT_ROWS_PER_FILE = 65_536
MERGE_FANOUT = 8
MAX_OPEN_PARTS = 4 * MERGE_FANOUT  # more open parts than this (uneven flush sizes): merge them all
FOLDER_FORMAT = 2  # 1: the first writer's rewritten train-NNNNN.parquet segments (still read and resumed)
IDENTITY = ("task", "bound", "algo", "seed")

# The episode table's columns as every writer of it types them (metrics.episode_table), plus the
# trainer's own label of each iterate; the engine reads the columns it needs and ignores the others.
EPISODE_SCHEMA = engine.module("episode_table").EPISODE_SCHEMA.append(pa.field("trainer_step", pa.int64()))


class RecorderError(ValueError):
    """Bad input to a recorder or a misuse of one (wrong step output, non-finite reward or cost,
    bad run identity, a wrapper in the wrong place, a folder another writer holds)."""


class RecorderWarning(UserWarning):
    """A recorder sees something that is allowed but usually a mistake (episodes cut off by reset())."""


def _check_identity(task, bound, algo, seed):
    if not isinstance(task, str) or not task.strip():  # the engine refuses a blank name too
        raise RecorderError(f"task must be a non-empty string, got {task!r}")
    if not isinstance(algo, str) or not algo.strip():  # the engine refuses a blank name too
        raise RecorderError(f"algo must be a non-empty string, got {algo!r}")
    if isinstance(bound, bool) or not isinstance(bound, (int, float, np.integer, np.floating)) \
            or not (math.isfinite(bound) and bound > 0):
        raise RecorderError(f"bound must be a finite number > 0, got {bound!r}")
    if isinstance(seed, bool) or not isinstance(seed, (int, np.integer)):
        raise RecorderError(f"seed must be an integer, got {seed!r}")


def _check_step(value, name="trainer_step"):
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, (int, np.integer)) or value < 0:
        raise RecorderError(f"{name} must be an integer >= 0 (the trainer's epoch or step count) or None, "
                            f"got {value!r}")
    return int(value)


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


def _size_class(rows: int) -> int:
    return int(math.log(max(rows, 1), MERGE_FANOUT) + 1e-9)


class _Part:
    """A training file of the open (not yet closed) group: iterates first..last, its rows in memory."""

    __slots__ = ("first", "last", "table")

    def __init__(self, first, last, table):
        self.first, self.last, self.table = first, last, table

    @property
    def rows(self) -> int:
        return self.table.num_rows


class _FolderLock:
    """An exclusive ``flock`` on FOLDER/writer.lock; the file says who holds it."""

    def __init__(self, folder: str, run: dict):
        self.path, self.run, self.fd = os.path.join(folder, LOCK_FILE), run, None

    def acquire(self) -> None:
        if self.fd is not None or fcntl is None:
            return
        fd = os.open(self.path, os.O_RDWR | os.O_CREAT, 0o666)
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except OSError:
            holder = _read_json(self.path)
            os.close(fd)
            raise RecorderError(f"{os.path.dirname(self.path)}: another EpisodeWriter has this folder open "
                                f"({_describe_holder(holder)}); two writers on one folder would overwrite each "
                                f"other's files. Give each run its own folder, or close the other writer first "
                                f"(lock: {self.path})") from None
        holder = {"pid": os.getpid(), "host": socket.gethostname(),
                  "since": datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="seconds"), **self.run}
        os.ftruncate(fd, 0)
        os.write(fd, (json.dumps(holder) + "\n").encode())
        self.fd = fd

    def release(self) -> None:
        if self.fd is not None:
            os.close(self.fd)  # closing the descriptor releases the flock
            self.fd = None


def _read_json(path):
    try:
        with open(path, encoding="utf-8") as f:
            return json.load(f)
    except (OSError, ValueError):
        return None


def _describe_holder(holder) -> str:
    if not isinstance(holder, dict):
        return "holder unknown"
    who = "this process" if holder.get("pid") == os.getpid() and holder.get("host") == socket.gethostname() \
        else f"pid {holder.get('pid')} on host {holder.get('host')}"
    run = ", ".join(f"{k}={holder[k]!r}" for k in IDENTITY if k in holder)
    return f"held by {who} since {holder.get('since')}, writing {run}"


class EpisodeWriter:
    """Writes one run's (task, bound, algo, seed) episode rows into ``folder``.

    ``append_iterates`` takes [k, N] blocks of finished episodes (k iterates of N episodes)
    and numbers the iterates 0, 1, ...; ``write_final`` records the two final phases at the
    last training iterate. A folder that already holds episode files is refused unless
    ``resume=True``, which continues the numbering after the iterates on disk (and refuses a
    folder of another run). One writer at a time has a folder open (``writer.lock``); ``close``
    flushes and lets it go, and a later write takes it again.

    ``trainer_step`` labels iterates with the training loop's own epoch or step count: set
    ``writer.trainer_step = n`` as the loop advances (or pass ``trainer_step=`` to
    ``append_iterates``) and each iterate's rows carry the value current when the iterate was
    recorded, in the column ``trainer_step`` (empty where no label was set). The final phases
    carry the value at ``write_final``.
    """

    def __init__(self, folder, *, task: str, bound: float, algo: str, seed: int,
                 flush_every: int = 1, rows_per_file: int = DEFAULT_ROWS_PER_FILE, resume: bool = False,
                 trainer_step: int | None = None):
        _check_identity(task, bound, algo, seed)
        if not isinstance(flush_every, int) or flush_every < 1:
            raise RecorderError(f"flush_every must be an integer >= 1, got {flush_every!r}")
        if not isinstance(rows_per_file, int) or rows_per_file < 1:
            raise RecorderError(f"rows_per_file must be an integer >= 1, got {rows_per_file!r}")
        self.folder = os.fspath(folder)
        self.run = (task, float(bound), algo, int(seed))
        self.identity = dict(zip(IDENTITY, self.run))
        self.flush_every, self.rows_per_file = flush_every, rows_per_file
        self.trainer_step = trainer_step
        self.iterations = 0  # training iterates recorded (flushed or pending)
        self._open: list[_Part] = []  # train files since the last closed one (merged as they accumulate)
        self._pending: list[tuple] = []  # (iterations, ret, cost, length, step) recorded but not yet flushed
        self._pending_iterates = 0
        self.final_written = False
        os.makedirs(self.folder, exist_ok=True)
        self._lock = _FolderLock(self.folder, self.identity)
        self._lock.acquire()
        try:
            self._open_folder(resume)
        except BaseException:
            self._lock.release()
            raise
        self._known = self._train_names()

    @property
    def trainer_step(self) -> int | None:
        return self._trainer_step

    @trainer_step.setter
    def trainer_step(self, value) -> None:
        self._trainer_step = _check_step(value)

    def _open_folder(self, resume: bool) -> None:
        TRAIN_SEGMENT_V1, train_parts = engine.module("episodes").TRAIN_SEGMENT_V1, engine.module("episodes").train_parts

        names = os.listdir(self.folder)
        current, covered = train_parts(names)
        old = sorted(n for n in names if TRAIN_SEGMENT_V1.match(n))
        has_final = FINAL_FILE in names
        episode_files = [n for *_, n in current] + old + ([FINAL_FILE] if has_final else [])
        on_disk = self._identity_on_disk(names, episode_files)
        if episode_files and not resume:
            raise RecorderError(f"{self.folder}: already holds episode files of a run ({_describe(on_disk)}); "
                                f"choose an empty folder or pass resume=True to continue after the iterates "
                                f"recorded there")
        if resume and on_disk is not None:
            differ = [k for k in IDENTITY if on_disk.get(k) != self.identity[k]]
            if differ:
                fields = ", ".join(f"{k} ({on_disk.get(k)!r} there, {self.identity[k]!r} here)" for k in differ)
                raise RecorderError(f"{self.folder}: resume=True, but the folder holds another run: "
                                    f"{'field' if len(differ) == 1 else 'fields'} {fields} differ; resuming would "
                                    f"mix two runs' episodes. Resume with the run's own identity, or use another "
                                    f"folder")
        if has_final and episode_files:
            raise RecorderError(f"{self.folder}: the run's final evaluation is recorded already; nothing to resume")
        for *_, name in covered:  # merged into another file before a crash: duplicates
            os.remove(os.path.join(self.folder, name))
        if current:
            self.iterations = current[-1][1] + 1
        for name in old:
            last = pq.read_table(os.path.join(self.folder, name), columns=["iteration"])["iteration"]
            if len(last):
                self.iterations = max(self.iterations, int(np.max(last.to_numpy())) + 1)
        if on_disk != self.identity:
            write_text(os.path.join(self.folder, MARKER_FILE),
                       json.dumps({"format": FOLDER_FORMAT, **self.identity}, indent=1) + "\n")

    def _identity_on_disk(self, names, episode_files):
        if MARKER_FILE in names:
            marker = _read_json(os.path.join(self.folder, MARKER_FILE))
            if isinstance(marker, dict) and all(k in marker for k in IDENTITY):
                return {k: marker[k] for k in IDENTITY}
        for name in episode_files:  # a folder of the first writer's format: the identity of its rows
            row = pq.read_table(os.path.join(self.folder, name), columns=list(IDENTITY)).slice(0, 1).to_pylist()
            if row:
                return row[0]
        return None

    # ---- training ------------------------------------------------------------------
    def append_iterates(self, ret, cost, length, *, trainer_step: int | None = None) -> None:
        """Record k finished iterates of N episodes each ([k, N] arrays); flush per ``flush_every``.

        ``trainer_step`` labels them (default: ``self.trainer_step``)."""
        if self.final_written:
            raise RecorderError(f"{self.folder}: the final evaluation is recorded; no training iterates may follow")
        step = self.trainer_step if trainer_step is None else _check_step(trainer_step)
        ret = as_block("return", ret)
        cost = as_block("cost", cost, ret.shape)
        length = as_block("length", length, ret.shape, np.int64)
        if ret.shape[0] == 0:
            return
        iterations = np.arange(self.iterations, self.iterations + ret.shape[0])
        self._pending.append((iterations, ret, cost, length, step))
        self.iterations += ret.shape[0]
        self._pending_iterates += ret.shape[0]
        if self._pending_iterates >= self.flush_every:
            self.flush()

    def flush(self) -> None:
        """Write the pending iterates as a new file; merge files as described in the module doc."""
        if not self._pending:
            return
        self._take_lock()
        table = self._table(TRAIN_PHASE, self._pending)
        part = _Part(int(self._pending[0][0][0]), int(self._pending[-1][0][-1]), table)
        _write(self._part_path(part.first, part.last), table)
        self._pending, self._pending_iterates = [], 0
        self._open.append(part)
        if sum(p.rows for p in self._open) >= self.rows_per_file:
            self._merge(len(self._open))
            self._open = []  # closed: never rewritten
        else:
            while len(self._open) >= MERGE_FANOUT and \
                    len({_size_class(p.rows) for p in self._open[-MERGE_FANOUT:]}) == 1:
                self._merge(MERGE_FANOUT)
            if len(self._open) > MAX_OPEN_PARTS:
                self._merge(len(self._open))

    def _merge(self, count: int) -> None:
        """Write the newest ``count`` open parts as one file, then delete them."""
        parts = self._open[-count:]
        if len(parts) < 2:
            return
        merged = _Part(parts[0].first, parts[-1].last, pa.concat_tables([p.table for p in parts]).combine_chunks())
        _write(self._part_path(merged.first, merged.last), merged.table)
        for p in parts:  # covered by the merged file from here on
            os.remove(self._part_path(p.first, p.last))
        self._open[-count:] = [merged]

    # ---- final evaluation ----------------------------------------------------------
    @property
    def final_iteration(self) -> int:
        """The iteration the final phases carry: the last training iterate (0 if none)."""
        return max(self.iterations - 1, 0)

    def write_final(self, explore: dict, greedy: dict) -> str:
        """Record both final phases; each dict holds 1-D ``return``, ``cost``, ``length`` arrays."""
        if self.final_written:
            raise RecorderError(f"{self.folder}: the final evaluation is recorded already")
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
            tables.append(self._table(phase, [([self.final_iteration], ret, cost, length, self.trainer_step)]))
        self.flush()
        self._take_lock()
        self._merge(len(self._open))
        self._open = []
        path = os.path.join(self.folder, FINAL_FILE)
        _write(path, pa.concat_tables(tables))
        self.final_written = True
        self._lock.release()  # the run is complete
        return path

    # ---- helpers -------------------------------------------------------------------
    def files(self) -> list[str]:
        """The episode files written so far, in order (``python -m metrics evaluate`` also takes the folder)."""
        return engine.module("episodes").recorder_files(self.folder)

    def close(self) -> None:
        """Flush what is pending (complete iterates only: an unfinished iterate is never written),
        merge the open files into one and let the folder go (a later write takes it again)."""
        if self.final_written or (self._lock.fd is None and fcntl is not None and not self._pending):
            return  # closed already
        self.flush()
        if len(self._open) > 1:
            self._take_lock()
            self._merge(len(self._open))
        self._known = self._train_names()
        self._lock.release()

    def _take_lock(self) -> None:
        """Hold the folder again after ``close``, if nobody changed it meanwhile."""
        if self._lock.fd is not None or fcntl is None:
            return
        self._lock.acquire()
        if self._train_names() != self._known or os.path.exists(os.path.join(self.folder, FINAL_FILE)):
            self._lock.release()
            raise RecorderError(f"{self.folder}: its episode files changed after this writer was closed (another "
                                f"writer wrote there); this writer's iterate numbers no longer fit. Open the "
                                f"folder again with EpisodeWriter(..., resume=True)")

    def _train_names(self) -> list[str]:
        episodes = engine.module("episodes")
        TRAIN_PART, TRAIN_SEGMENT_V1 = episodes.TRAIN_PART, episodes.TRAIN_SEGMENT_V1
        return sorted(n for n in os.listdir(self.folder) if TRAIN_PART.match(n) or TRAIN_SEGMENT_V1.match(n))

    def _part_path(self, first: int, last: int) -> str:
        return os.path.join(self.folder, f"{TRAIN_PHASE}-{first:06d}-{last:06d}.parquet")

    def _table(self, phase, blocks) -> pa.Table:
        """One table of [k, N] blocks given as (iterations, ret, cost, length, trainer_step)."""
        task, bound, algo, seed = self.run
        columns = {name: [] for name in EPISODE_SCHEMA.names}
        for iterations, ret, cost, length, step in blocks:
            n_iter, n_env = ret.shape
            columns["iteration"].append(np.repeat(np.asarray(iterations, np.int64), n_env))
            columns["episode"].append(np.tile(np.arange(n_env, dtype=np.int64), n_iter))
            columns["return"].append(ret.ravel())
            columns["cost"].append(cost.ravel())
            columns["length"].append(length.ravel())
            columns["trainer_step"].append(np.full(ret.size, -1 if step is None else step, np.int64))
        columns = {k: np.concatenate(v) for k, v in columns.items() if v}
        n = columns["return"].size
        arrays = {"task": pa.array(np.full(n, task, dtype=object), pa.string()),
                  "bound": pa.array(np.full(n, bound)), "algo": pa.array(np.full(n, algo, dtype=object), pa.string()),
                  "seed": pa.array(np.full(n, seed, np.int64)), "phase": pa.array(np.full(n, phase, dtype=object),
                                                                                  pa.string())}
        for name in ("iteration", "episode", "return", "cost", "length"):
            arrays[name] = pa.array(columns[name])
        steps = columns["trainer_step"]
        arrays["trainer_step"] = pa.array(steps, pa.int64(), mask=steps < 0)
        return pa.Table.from_pydict(arrays, schema=EPISODE_SCHEMA)

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()

    def __del__(self):
        lock = getattr(self, "_lock", None)
        if lock is not None:
            lock.release()


def _describe(identity) -> str:
    if identity is None:
        return "run identity unknown"
    return ", ".join(f"{k}={identity.get(k)!r}" for k in IDENTITY)


def _write(path: str, table: pa.Table) -> None:
    with atomic_path(path) as tmp:
        pq.write_table(table, tmp)
