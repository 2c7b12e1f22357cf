"""The trainer's side of the run folder: its writers and the completeness check of what it wrote.

The folder's layout (paths, file names, markers, bound labels) is `runs.run_layout`, which
the workflow reads too. Here: the run spec (written by the workflow, read by the trainer), the
code version a run was trained with, the atomic writers of the tables and JSON files, and
`incomplete_reason`: a folder is complete when run.json (written last) says so and each table
it vouches for has the size, row count and sha256 it recorded. The trainer, the sweep's job
wrapper and the status report use these; this module imports nothing from `workflow`.
"""
from __future__ import annotations

import hashlib
import json
import math
import os
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq

from runs import run_layout as layout
from metrics.atomic import atomic_write as _atomic

# ---- the run spec ------------------------------------------------------------------------
def spec_of(preset: str, config) -> dict:
    return {"preset": preset, "config": config.to_dict()}


def write_spec(folder: str | os.PathLike, spec: dict) -> bool:
    """Write spec.json unless it already holds `spec` (so its mtime moves only on a change)."""
    path = Path(folder) / layout.SPEC
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
    execution fields, algos.config.NOT_IDENTITY, and the scalars of other algorithms than the
    run's are not part of a run's identity, algos.config.foreign_fields). A field the
    recorded config lacks (added to TrainConfig since) counts at its default."""
    from algos.config import NOT_IDENTITY, recorded_with_defaults
    from algos.config import foreign_fields

    a, b = (json.loads(json.dumps(c)) for c in (recorded or {}, wanted))
    a = recorded_with_defaults(a, b)
    ignored = set(NOT_IDENTITY) | foreign_fields(b.get("algo", a.get("algo")))
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
    return read_json(Path(folder) / layout.RUN_JSON)


def file_record(path: str | os.PathLike, rows: int) -> dict:
    """What run.json records of a table it vouches for: rows, size, sha256 of the bytes, and
    the mtime (ns) they were hashed at, so a later check rehashes only a file that changed."""
    st = os.stat(path)
    return {"rows": int(rows), "bytes": st.st_size, "sha256": _sha256(path), "mtime_ns": st.st_mtime_ns}


def _sha256(path) -> str:
    with open(path, "rb") as f:
        return hashlib.file_digest(f, "sha256").hexdigest()


def _unchanged(record: dict, seen: dict | None, st: os.stat_result) -> bool:
    """Whether a table's stat shows it as it was when last hashed: at run.json's mtime, or at
    the mtime verified.json noted when the same bytes last hashed (after Snakemake's touch)."""
    if st.st_mtime_ns == record.get("mtime_ns"):
        return True
    return seen == {"sha256": record.get("sha256"), "bytes": st.st_size, "mtime_ns": st.st_mtime_ns}


def _remember(folder: Path, name: str, st: os.stat_result, sha256: str) -> None:
    """Note in verified.json that `name` hashed to `sha256` at this size and mtime. Only a
    saving: a folder that cannot be written (read-only results) is hashed again next time."""
    path = folder / layout.VERIFIED
    seen = read_json(path) or {}
    note = {"sha256": sha256, "bytes": st.st_size, "mtime_ns": st.st_mtime_ns}
    if seen.get(name) == note:  # `--verify` again: nothing new to note
        return
    seen[name] = note
    try:
        write_json(str(path), seen)
    except OSError:
        pass


IDENTITY_COLUMNS = ("task", "algo", "seed", "bound")  # an episode table's rows all name their run


def _identity_problem(metadata, config: dict) -> str | None:
    """Whether the footer's column statistics (min and max per row group, read with the row
    count) show rows of another run than run.json's config: an episode table swapped with
    another run's of the same size keeps its own mtime, size and row count, and is found here
    without hashing it. Statistics a writer left out prove nothing and are passed over."""
    names = metadata.schema.names
    values = dict(config)
    level = config.get("level", 1)
    if "task" in config and isinstance(level, int) and level >= 1:
        values["task"] = layout.task_id(config["task"], level)  # the rows name the task id (NAME@lL above level 1)
    wanted = [(column, values[column], names.index(column)) for column in IDENTITY_COLUMNS
              if column in values and column in names]
    for group in range(metadata.num_row_groups):
        row_group = metadata.row_group(group)
        for column, want, index in wanted:
            stats = row_group.column(index).statistics
            if stats is None or not stats.has_min_max:
                continue
            exact = (getattr(stats, "is_min_value_exact", True), getattr(stats, "is_max_value_exact", True))
            for found, is_exact in zip((stats.min, stats.max), exact):
                if is_exact and found != want:
                    return f"{layout.EPISODES} holds rows of another run ({column} {found!r}, not {want!r})"
    return None


def _table_problem(path: Path, record: dict | None, rows: int | None, verify: bool,
                   seen: dict | None = None, config: dict | None = None) -> str | None:
    """What is wrong with one table against run.json's record of it (and, for the episode
    table, of the run it belongs to: `config`), or None."""
    name = path.name
    if not path.exists():
        return f"{name} missing"
    st = path.stat()
    if record is not None and st.st_size != record.get("bytes"):
        return f"{name} is {st.st_size} bytes, {layout.RUN_JSON} recorded {record.get('bytes')}"
    try:
        metadata = pq.read_metadata(path)
    except (OSError, pa.ArrowException) as err:
        return f"{name} unreadable ({type(err).__name__})"
    n = metadata.num_rows
    want = record.get("rows") if record is not None else rows
    if want is not None and want != n:
        return f"{name} has {n} rows, {layout.RUN_JSON} recorded {want}"
    if config and (problem := _identity_problem(metadata, config)):
        return problem
    if record is not None and (verify or not _unchanged(record, seen, st)):
        if _sha256(path) != record.get("sha256"):
            return f"{name} is damaged (its sha256 differs from the one {layout.RUN_JSON} recorded)"
        _remember(path.parent, name, st, record["sha256"])
    return None


def _mapping(value) -> dict:
    """A run.json field that should be a mapping; anything else (a hand-edited file) as empty."""
    return value if isinstance(value, dict) else {}


def incomplete_reason(folder: str | os.PathLike, verify: bool = False) -> str | None:
    """None when the run folder is complete, else what is wrong with it.

    Complete: run.json says `complete`, and each table it vouches for is present, readable,
    and has the size, row count and sha256 that run.json recorded. The hash is checked when
    the file's mtime is neither the one run.json recorded nor one at which the same bytes
    hashed before (verified.json: Snakemake touches outputs after a job, and the summarise
    step's hash notes the touched mtime), or always with `verify` (the summarise step,
    `workflow.status --verify`). Any rewrite, bit flip or truncation moves the mtime, so
    planning a sweep reads only the footers of unchanged files; the episode table's footer
    also says whose rows it holds (_identity_problem: a swap that keeps size and mtime). run.json of older versions records row
    counts only: then the tables need to be readable with those counts.
    """
    folder = Path(folder)
    if not (folder / layout.RUN_JSON).exists():
        return f"{layout.RUN_JSON} missing"
    meta = read_run_json(folder)
    if meta is None or meta.get("complete") is not True:
        return f"{layout.RUN_JSON} unreadable or not marked complete"
    files, rows = _mapping(meta.get("files")), _mapping(meta.get("rows"))
    seen = read_json(folder / layout.VERIFIED) or {}
    for name in (layout.EPISODES, layout.TRACE):
        record = files.get(name)
        if record is not None and not isinstance(record, dict):
            return f"{layout.RUN_JSON} field 'files.{name}' is not a record ({type(record).__name__})"
        config = _mapping(meta.get("config")) if name == layout.EPISODES else None
        problem = _table_problem(folder / name, record, rows.get(name), verify, seen.get(name), config)
        if problem is not None:
            return problem
    return None


def duration_text(seconds) -> str:
    """HH:MM:SS (hours past 24 kept) of a time left, '?' unless a finite number (progress.json's
    eta_s is null before a rate is known): the trainer's progress line and workflow.status."""
    if not isinstance(seconds, (int, float)) or not math.isfinite(seconds):
        return "?"
    minutes, secs = divmod(int(round(seconds)), 60)
    return f"{minutes // 60:02d}:{minutes % 60:02d}:{secs:02d}"


# ---- writers ---------------------------------------------------------------------------------
def write_parquet(path: str, table: pa.Table) -> None:
    _atomic(path, lambda tmp: pq.write_table(table, tmp))


def write_json(path: str, obj: dict) -> None:
    def write(tmp):
        with open(tmp, "w") as f:
            json.dump(obj, f, indent=1, sort_keys=True, allow_nan=True)
            f.write("\n")
    _atomic(path, write)


def trace_table(trace: dict, state_columns=()) -> pa.Table:
    """algos.trace_schema.TRACE_COLUMNS, then the algorithm's own state columns (its registry entry's
    `state_columns`)."""
    import pandas as pd  # here: the job wrappers import this module, and pandas costs them ~0.5 s

    from algos.trace_schema import TRACE_COLUMNS

    frame = pd.DataFrame({name: trace[name] for name in (*TRACE_COLUMNS, *state_columns)})
    return pa.Table.from_pandas(frame, preserve_index=False)
