"""One trainer per run folder: the job marker `job.json` is also the folder's lock.

The trainer (runs.train) takes the lock of every folder it trains; the sweep's job wrapper
(workflow.train_job) takes it first, for the whole job, and the trainer it starts accepts
its parent's lock as its own. The marker names the job (host, pid and the process's start
time, SLURM job id, log). The lock is held while that process lives or until it marks the
marker ended (`release`); the marker itself stays (workflow.status reads it to tell a
failed run from a missing one), so a marker whose job has ended is a stale lock, and the
next job takes it over. A marker whose job still runs (a controller killed hard and
relaunched while its old jobs go on, a second trainer started by hand) makes the new job
wait a while and then refuse, naming the owner, instead of training the folder twice at once.
"""
from __future__ import annotations

import json
import os
import shutil
import socket
import subprocess
import tempfile
import time
from pathlib import Path

from runs.run_layout import JOB_MARKER

LOG_ENV = "SAFERL_TRAIN_LOG"  # the job's log, recorded in the marker for workflow.status
SLURM_ACTIVE_STATES = {"PENDING", "RUNNING", "CONFIGURING", "COMPLETING", "SUSPENDED", "REQUEUED", "RESIZING"}


class RunFolderLocked(RuntimeError):
    """Another job that still runs (or cannot be checked) owns the run folder."""


def _proc_start(pid: int) -> str | None:
    """The process's start time in clock ticks since boot (Linux), to tell a reused pid apart."""
    try:
        return Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[19]
    except (OSError, IndexError):
        return None


def this_job() -> dict:
    """The marker of the calling process: the job wrapper, which lives as long as its trainer;
    `log` is the job's log (its pack's), from $SAFERL_TRAIN_LOG."""
    return {"host": socket.gethostname(), "pid": os.getpid(), "proc_start": _proc_start(os.getpid()),
            "slurm_job_id": os.environ.get("SLURM_JOB_ID"), "started": time.time(),
            "log": os.environ.get(LOG_ENV)}


def describe(marker: dict) -> str:
    if marker.get("slurm_job_id"):
        return f"SLURM job {marker['slurm_job_id']}"
    return f"pid {marker.get('pid')} on {marker.get('host')}"


def slurm_job_active(job_id: str) -> bool | None:
    """Whether a SLURM job is pending or running; None when squeue cannot tell."""
    if shutil.which("squeue") is None:
        return None
    try:
        out = subprocess.run(["squeue", "-h", "-j", str(job_id), "-o", "%T"], capture_output=True, text=True,
                             timeout=30)
    except (subprocess.SubprocessError, OSError):
        return None
    if out.returncode != 0:  # squeue fails for a job id it no longer knows
        return False if "Invalid job id" in out.stderr else None
    return any(line.strip() in SLURM_ACTIVE_STATES for line in out.stdout.splitlines())


def _process_alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


def owner_alive(marker: dict, host: str | None = None, slurm_jobs: set[str] | None = None) -> bool | None:
    """Whether the job a marker names still runs: True, False, or None (cannot be checked
    here: another host without SLURM). `slurm_jobs`: active job ids, when already known."""
    host = host or socket.gethostname()
    if marker.get("ended"):
        return False
    job_id = marker.get("slurm_job_id")
    if job_id:
        if slurm_jobs is not None:
            return str(job_id) in slurm_jobs
        active = slurm_job_active(str(job_id))
        if active is not None:
            return active
    if marker.get("host") == host and isinstance(marker.get("pid"), int):
        if not _process_alive(marker["pid"]):
            return False
        recorded = marker.get("proc_start")
        return recorded is None or recorded == _proc_start(marker["pid"])  # else the pid was reused
    return None


def read_marker_file(path: str | os.PathLike) -> dict | None:
    try:
        marker = json.loads(Path(path).read_text())
    except (OSError, ValueError):
        return None
    return marker if isinstance(marker, dict) else None


def read_marker(out_dir: str | os.PathLike) -> dict | None:
    return read_marker_file(Path(out_dir) / JOB_MARKER)


def _create(path: Path, marker: dict) -> bool:
    """Write the marker only if none exists (atomic: link of a complete temporary file)."""
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.", suffix=".tmp")
    try:
        with os.fdopen(fd, "w") as f:
            f.write(json.dumps(marker) + "\n")
        os.chmod(tmp, 0o644)
        os.link(tmp, path)
    except FileExistsError:
        return False
    except OSError as err:  # a full disk: name the lock file, not the temporary one
        from metrics.atomic import write_error

        raise write_error(err, str(path), tmp) from err
    finally:
        os.remove(tmp)
    return True


def held_by_parent(marker: dict | None) -> bool:
    """Whether the marker is the lock of the process that started this one (the job wrapper)."""
    return (marker is not None and not marker.get("ended") and marker.get("host") == socket.gethostname()
            and marker.get("pid") == os.getppid() and marker.get("proc_start") == _proc_start(os.getppid()))


def acquire(out_dir: str | os.PathLike, wait_s: float = 120.0, poll_s: float = 5.0) -> str:
    """Take the run folder's lock for this process; returns a line for the log.

    Raises RunFolderLocked when another live job holds it after `wait_s` seconds (a job
    COMPLETING after its time limit may still be writing its checkpoint, hence the wait).
    The lock of the parent process (the job wrapper that started this trainer) counts as held.
    """
    path = Path(out_dir) / JOB_MARKER
    mine = this_job()
    deadline = time.monotonic() + wait_s
    while True:
        if _create(path, mine):
            return f"run folder lock taken ({describe(mine)})"
        owner = read_marker(out_dir)
        if held_by_parent(owner):
            return f"run folder lock held by the job that started this trainer ({describe(owner)})"
        same_job = owner is not None and (
            (owner.get("slurm_job_id") and owner.get("slurm_job_id") == mine["slurm_job_id"])
            or (owner.get("host") == mine["host"] and owner.get("pid") == mine["pid"]))
        alive = None if owner is None else (True if same_job else owner_alive(owner, mine["host"]))
        if owner is None or same_job or alive is False:
            stale = path.with_name(f"{JOB_MARKER}.stale-{mine['host']}-{mine['pid']}")
            try:
                os.replace(path, stale)  # only one of two jobs taking over the same stale lock wins
            except FileNotFoundError:
                continue
            if owner is not None and read_marker_file(stale) != owner:  # another job was quicker
                os.replace(stale, path)
                continue
            os.remove(stale)
            if _create(path, mine):
                what = "its own earlier marker" if same_job else \
                    ("an unreadable marker" if owner is None else f"a stale lock of {describe(owner)} (ended)")
                return f"run folder lock taken over from {what}"
            continue
        if time.monotonic() >= deadline:
            why = "still runs" if alive else "cannot be checked from this host"
            raise RunFolderLocked(
                f"{out_dir} is owned by {describe(owner)}, which {why}; not starting a second trainer in it. "
                f"If that job is gone, delete {path} and rerun")
        time.sleep(poll_s)


def release(out_dir: str | os.PathLike) -> None:
    """Mark this process's lock of the folder as ended (the marker stays for workflow.status);
    a marker of another process is left alone."""
    marker = read_marker(out_dir)
    if marker is not None and marker.get("pid") == os.getpid() and marker.get("host") == socket.gethostname():
        from metrics.atomic import write_text

        try:
            write_text(Path(out_dir) / JOB_MARKER, json.dumps(dict(marker, ended=time.time())) + "\n")
        except OSError:  # a full disk: the marker's pid ends with this process, which frees the lock
            pass         # just as well, and the error that stopped the job is the one to report
