"""Ctrl-C, SIGINT and SIGTERM to the sweep's controller: the training jobs checkpoint, the
controller ends with one line.

Snakemake alone does not stop its jobs: SIGINT makes it wait for the local jobs (threads that
run each job's process to its end) and SIGTERM lets every running job finish, and either way it
ends with a WorkflowError. `install` (the Snakefile's onstart) replaces both signals' handlers
(SIGINT alone in a controller that is itself a SLURM job, see stop_signals):
the first signal passes SIGTERM to every job process the controller started (the training job
wrappers, workflow.train_job, pass it on to their trainers, which checkpoint and exit 75), keeps
Snakemake's own messages about the stopped jobs off the console (its log file keeps them) and
stops the scheduling; SLURM jobs are cancelled by Snakemake (scancel: SIGTERM, the same
checkpoint). `report` (the Snakefile's onerror) then waits for the sweep's training jobs to let
go of their run folders, prints one line (how many runs hold a checkpoint; rerunning resumes
them) and exits 130 (SIGINT) or 143 (SIGTERM) without a traceback.
"""
from __future__ import annotations

import logging
import os
import signal
import sys
import threading
import time

from runs import checkpoint, runlock
from runs.run_layout import CHECKPOINT_DIR, RUN_JSON

STOP_SIGNALS = (signal.SIGINT, signal.SIGTERM)
TRAINER = "runs.train"  # its wrapper passes the signal on; a second one could end it before its checkpoint
WAIT_FOR_JOBS_S = 45.0  # how long the controller waits for (cluster) jobs to let go of their run folders


class _State:
    signal: int | None = None
    waiting: bool = False  # report() waits for the jobs: a second signal stops the wait


_state = _State()


def stopped_by() -> int | None:
    """The signal that stopped this controller, or None."""
    return _state.signal


def stop_signals(environ=None) -> tuple:
    """The signals that stop the sweep. SIGTERM to a controller that runs as a SLURM job
    (workflow.launch) is its own job ending (time limit, preemption): Snakemake's handling
    stays, its cluster jobs go on and the relaunched controller takes them over (docs/faults.md)."""
    environ = os.environ if environ is None else environ
    return (signal.SIGINT,) if environ.get("SLURM_JOB_ID") else STOP_SIGNALS


def install() -> None:
    """Take over the stop_signals() in the controller (call from the main thread, once the
    scheduler exists: Snakemake sets its own SIGTERM handler when it builds the scheduler)."""
    for s in stop_signals():
        signal.signal(s, _stop)


def _stop(signum, frame) -> None:
    if _state.signal is not None:  # already stopping: the jobs have their signal
        if _state.waiting:
            raise KeyboardInterrupt  # report() stops waiting and says what it knows
        return
    _state.signal = signum
    _quiet_console()
    signalled = stop_job_processes(os.getpid())
    # a job already handed to a thread may start its process only now: it is stopped as it appears
    threading.Thread(target=_keep_stopping, args=(os.getpid(), signalled), daemon=True).start()
    raise KeyboardInterrupt  # Snakemake's scheduler stops scheduling and cancels or awaits its jobs


def _keep_stopping(pid: int, signalled: set, every_s: float = 1.0) -> None:
    while True:
        time.sleep(every_s)
        signalled |= stop_job_processes(pid, skip=signalled)


SHELLS = ("bash", "sh", "dash", "zsh")  # a job's shell ends with its command
SLURM_CLIENTS = ("sbatch", "squeue", "sacct", "scancel", "scontrol", "sinfo")  # the executor's own calls


def job_processes(pid: int) -> list:
    """The processes under `pid` to signal: every one but shells, the SLURM executor's client
    calls (it goes on to cancel its jobs) and trainers (their wrapper passes the signal on)."""
    import psutil

    chosen = []
    for proc in psutil.Process(pid).children(recursive=True):
        try:
            cmd = proc.cmdline()
        except psutil.Error:
            continue
        program = os.path.basename(cmd[0]) if cmd else ""
        if program in SHELLS or program in SLURM_CLIENTS or TRAINER in cmd:
            continue
        chosen.append(proc)
    return chosen


def stop_job_processes(pid: int, skip: set = frozenset()) -> set:
    """SIGTERM to job_processes(pid) but those in `skip` (psutil.Process: pid and start time);
    returns those signalled."""
    import psutil

    signalled = set()
    for proc in job_processes(pid):
        if proc in skip:
            continue
        try:
            proc.send_signal(signal.SIGTERM)
            signalled.add(proc)
        except psutil.Error:
            pass
    return signalled


def _drop(record: logging.LogRecord) -> bool:
    return False


def _quiet_console() -> None:
    """Snakemake's console lines about the jobs it is stopping (errors, logs, its final error)
    would bury the one line that matters; its log file under .snakemake/log keeps them."""
    for handler in logging.getLogger("snakemake.logging").handlers:
        if not isinstance(handler, logging.FileHandler) and (
                handler.name == "DefaultStreamHandler" or getattr(handler, "stream", None) in (sys.stderr, sys.stdout)):
            handler.addFilter(_drop)


def held(folders) -> list[str]:
    """The folders whose lock (runs.runlock) a live job still holds; each SLURM job asked once."""
    markers = {f: runlock.read_marker(f) for f in folders}
    markers = {f: m for f, m in markers.items() if m is not None and not m.get("ended")}
    job_ids = {str(m["slurm_job_id"]) for m in markers.values() if m.get("slurm_job_id")}
    active = {j for j in job_ids if runlock.slurm_job_active(j) is not False}
    return [f for f, m in markers.items() if runlock.owner_alive(m, slurm_jobs=active if m.get("slurm_job_id") else None)
            is not False]


def checkpointed(folders) -> list[str]:
    """The run folders that hold a checkpoint and no finished run: what a rerun resumes."""
    return [f for f in folders if checkpoint.exists(os.path.join(f, CHECKPOINT_DIR))
            and not os.path.exists(os.path.join(f, RUN_JSON))]


def summary(signum: int, resumable: int, still_held: int) -> str:
    name = signal.Signals(signum).name
    runs = f"{resumable} run{'s' if resumable != 1 else ''}"
    line = f"Stopped by {name}: {runs} checkpointed; run the same command again to resume {'them' if resumable != 1 else 'it'}."
    if resumable == 0:
        line = f"Stopped by {name}: no run was checkpointed; run the same command again to go on."
    if still_held:
        line += f" ({still_held} run folder{'s' if still_held != 1 else ''} still locked by jobs that are ending.)"
    return line


def report(folders, wait_s: float = WAIT_FOR_JOBS_S) -> None:
    """After a stop (stopped_by()): wait up to `wait_s` for the jobs to let go of `folders`
    (the sweep's pending run folders; a second signal ends the wait), print the one line and
    exit 128 + signal. Does nothing when the sweep failed for another reason."""
    signum = stopped_by()
    if signum is None:
        return
    folders = list(folders)
    deadline = time.monotonic() + wait_s
    busy = held(folders)
    _state.waiting = True
    try:
        while busy and time.monotonic() < deadline:
            time.sleep(1.0)
            busy = held(busy)
    except KeyboardInterrupt:  # a second Ctrl-C
        pass
    finally:
        _state.waiting = False
    print(summary(signum, len(checkpointed(folders)), len(busy)), file=sys.stderr, flush=True)
    raise SystemExit(128 + signum)
