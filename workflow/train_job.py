"""Run one training job of the sweep: a pack of runs, `python -m runs.train --spec ...`.

    python -m workflow.train_job [--attempt N] [--threads N] [CURVE FLAGS] DIR1/spec.json DIR2/spec.json ...

For each run folder it takes the folder's lock, DIR/job.json (host, pid, SLURM job id, log;
runs.runlock), which `python -m workflow.status` also reads: a folder whose earlier job
still runs is left out rather than trained twice at once. A retry (`--attempt` > 1) leaves
out a run whose earlier attempt failed for a reason a retry would meet again (DIR/failure.json,
written by the trainer on an error); retries after a time limit, preemption (exit 75), node
failure or a kill for memory go ahead and resume. Inside a SLURM job it passes the trainer
`--stop-at`, the job's end time minus a margin, so the trainer checkpoints and exits 75 well
before the limit. The trainer runs as a child process; SIGTERM, SIGINT and SIGUSR2 to this
process (SLURM, Snakemake stopping) are passed on, so it writes its checkpoints and exits 75.
The exit status is the trainer's, or 1 when a run was left out.

Test switch, read from the environment inside the job so that it never becomes a
Snakemake param: SAFERL_FAIL_RUNS, a comma-separated list of shell patterns over run ids
"task/d<bound>/algo/seed<seed>"; a matching run fails at once (failure.json written), the
others of its pack train (e.g. SAFERL_FAIL_RUNS='*/seed1').
"""
from __future__ import annotations

import argparse
import fnmatch
import json
import os
import signal
import subprocess
import sys
import time

from runs.run_layout import FAILURE_RECORD
from runs.train import record_failure
from runs import runlock

FAIL_RUNS_ENV = "SAFERL_FAIL_RUNS"
LOCK_WAIT_ENV = "SAFERL_LOCK_WAIT_S"  # how long to wait for a live owner of the run folder (default 120)
STOP_MARGIN_ENV = "SAFERL_STOP_MARGIN_S"  # stop this long before a SLURM job's end (default 600)
DEFAULT_STOP_MARGIN_S = 600.0
FORWARDED_SIGNALS = (signal.SIGTERM, signal.SIGINT, signal.SIGUSR2)
CURVE_OPTIONS = ("--wandb", "--wandb-project", "--wandb-group", "--wandb-entity")  # runs.train's, passed on


def should_fail(run: str, patterns: str | None) -> bool:
    return any(fnmatch.fnmatchcase(run, p.strip()) for p in (patterns or "").split(",") if p.strip())


def run_of_spec(path: str) -> str:
    """The run id of a spec file's folder (`.../<results folder>/runs/<run id>/spec.json`)."""
    folder = os.path.dirname(os.path.abspath(path)).replace(os.sep, "/")
    parts = folder.split("/")
    if len(parts) > 5 and parts[-5] == "runs" and parts[-3].startswith("d") and parts[-1].startswith("seed"):
        return "/".join(parts[-4:])
    return folder


def slurm_end_time(job_id: str) -> float | None:
    """The SLURM job's end time (its time limit) as a time.time() value, or None."""
    if os.environ.get("SLURM_JOB_END_TIME", "").isdigit():
        return float(os.environ["SLURM_JOB_END_TIME"])
    try:
        out = subprocess.run(["squeue", "-h", "-j", job_id, "-o", "%e"], capture_output=True, text=True,
                             timeout=30).stdout.strip()
        return time.mktime(time.strptime(out, "%Y-%m-%dT%H:%M:%S"))
    except (OSError, subprocess.SubprocessError, ValueError):
        return None


def stop_time(end: float | None, now: float, margin_s: float = DEFAULT_STOP_MARGIN_S) -> float | None:
    """When the trainer should checkpoint and stop: `margin_s` before the end, but never more
    than a fifth of the time left (a short test job still trains)."""
    if end is None:
        return None
    return end - min(margin_s, max(end - now, 0.0) / 5)


def previous_failure(out_dir: str) -> str | None:
    """The error of an earlier attempt that a retry would meet again, or None."""
    try:
        with open(os.path.join(out_dir, FAILURE_RECORD)) as f:
            return str(json.load(f).get("error", "unknown error"))
    except (OSError, ValueError, AttributeError):
        return None


def admit(spec: str, attempt: int, say) -> bool:
    """Whether this job trains the run of `spec` (lock taken), else why not is said."""
    out, run = os.path.dirname(os.path.abspath(spec)), run_of_spec(spec)
    failure = os.path.join(out, FAILURE_RECORD)
    if attempt == 1 and os.path.exists(failure):
        os.remove(failure)  # a new invocation tries again (the cause may be fixed)
    elif previous_failure(out) is not None:
        say(f"not retrying {run}: an earlier attempt failed with an error a retry would meet again: "
            f"{previous_failure(out)} ({failure}). Fix the cause, then rerun the sweep.")
        return False
    try:
        say(f"{run}: " + runlock.acquire(out, float(os.environ.get(LOCK_WAIT_ENV, 120))))
    except runlock.RunFolderLocked as err:
        say(str(err))
        return False
    if should_fail(run, os.environ.get(FAIL_RUNS_ENV)):
        message = f"{run} fails on purpose ({FAIL_RUNS_ENV}={os.environ[FAIL_RUNS_ENV]!r})"
        record_failure(out, message)
        say(message)
        return False
    return True


def main(argv: list[str] | None = None) -> None:  # noqa: D103
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("specs", nargs="+", help="run specs (DIR/spec.json) of one pack")
    parser.add_argument("--attempt", type=int, default=1, help="Snakemake's attempt number of this job")
    parser.add_argument("--threads", type=int, default=None, help="passed to the trainer")
    parser.add_argument("--pack-runs", type=int, default=0, help="passed to the trainer: runs in the whole pack")
    curves = parser.add_argument_group("passed to the trainer: what it logs (workflow.sweep.curve_flags)")
    curves.add_argument("--no-tensorboard", action="store_true")
    for flag in CURVE_OPTIONS:
        curves.add_argument(flag, default=None)
    args = parser.parse_args(argv)
    say = lambda text: print(f"train_job: {text}", file=sys.stderr, flush=True)  # noqa: E731
    admitted = [spec for spec in args.specs if admit(spec, args.attempt, say)]
    if not admitted:
        sys.exit(1)
    cmd = [sys.executable, "-m", "runs.train", "--spec", *admitted]
    if args.threads is not None:
        cmd += ["--threads", str(args.threads)]
    if args.pack_runs:
        cmd += ["--pack-runs", str(args.pack_runs)]
    if args.no_tensorboard:
        cmd += ["--no-tensorboard"]
    for flag in CURVE_OPTIONS:
        value = getattr(args, flag[2:].replace("-", "_"))
        if value is not None:
            cmd += [flag, value]
    job_id = os.environ.get("SLURM_JOB_ID")
    stop_at = stop_time(slurm_end_time(job_id), time.time(),
                        float(os.environ.get(STOP_MARGIN_ENV, DEFAULT_STOP_MARGIN_S))) if job_id else None
    if stop_at is not None:
        cmd += ["--stop-at", f"{stop_at:.0f}"]
    say(" ".join(cmd[1:]))
    child = subprocess.Popen(cmd)
    for s in FORWARDED_SIGNALS:  # the trainer checkpoints and answers 75
        signal.signal(s, lambda signum, frame: child.send_signal(signal.SIGTERM))
    status = child.wait()
    sys.exit(status if status != 0 or len(admitted) == len(args.specs) else 1)


if __name__ == "__main__":
    main()
