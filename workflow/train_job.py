"""Run one training job of the sweep: `python -m algos.train` with the given options.

    python -m workflow.train_job --task goal --bound 25 --algo ppo --seed 0 --out DIR [trainer options]

It takes the run folder's lock, DIR/job.json (host, pid, SLURM job id; workflow.runlock),
which `python -m workflow.status` also reads: a folder whose earlier job still runs is refused
rather than trained twice at once. A retry (`--attempt` > 1) after a failure that a retry would
meet again (DIR/failure.json, written by the trainer on an error) stops at once; retries after
a time limit, preemption (exit 75), node failure or a kill for memory go ahead and resume.
Inside a SLURM job it passes the trainer `--stop-at`, the job's end time minus a margin, so
the trainer checkpoints and exits 75 well before the limit. Then the trainer runs: inside a
SLURM job the process is replaced by it (exec), so SLURM's SIGTERM / SIGUSR2 reach it
directly and it can write its checkpoint and exit 75; on one machine it runs in a warm worker
(workflow.warm: JAX imported and earlier runs' programs loaded), which passes those signals
on. Outside SLURM, when JAX_COMPILATION_CACHE_DIR is set, the first run of a program compiles
it while later runs of the same program wait, for the compilation only (algos.train's
compile lock).

Test switch, read from the environment inside the job so that it never becomes a
Snakemake param (a changed param would rerun every job): SAFERL_FAIL_RUNS, a
comma-separated list of shell patterns over run ids "task/d<bound>/algo/seed<seed>";
a matching run fails at once with exit status 1 (e.g. SAFERL_FAIL_RUNS='*/seed1').
"""
from __future__ import annotations

import argparse
import fnmatch
import json
import os
import shlex
import subprocess
import sys
import time

from algos.runfolder import FAILURE_RECORD, run_id
from algos.train import COMPILE_LOCK_ENV, record_failure
from workflow import runlock, warm

FAIL_RUNS_ENV = "SAFERL_FAIL_RUNS"
LOCK_WAIT_ENV = "SAFERL_LOCK_WAIT_S"  # how long to wait for a live owner of the run folder (default 120)
STOP_MARGIN_ENV = "SAFERL_STOP_MARGIN_S"  # stop this long before a SLURM job's end (default 600)
DEFAULT_STOP_MARGIN_S = 600.0


def should_fail(run: str, patterns: str | None) -> bool:
    return any(fnmatch.fnmatchcase(run, p.strip()) for p in (patterns or "").split(",") if p.strip())


def trainer_options(cfg: dict) -> str:
    """Trainer options that follow from a validated config: exactly what changes a run's
    result (not `threads`), in a stable order, so Snakemake's params trigger is exact."""
    train = cfg["train"]
    opts = ["--preset", train["preset"], "--backend", cfg["backend"]]
    for key in ["total_steps", "num_envs", "episode_length", "eval_episodes"]:
        if train.get(key) is not None:
            opts += ["--" + key.replace("_", "-"), str(train[key])]
    for key, value in sorted(train.get("set", {}).items()):
        opts += ["--set", shlex.quote(f"{key}={value}")]
    return " ".join(opts)


def trainer_args(args: argparse.Namespace, extra: list[str]) -> list[str]:
    return ["--task", args.task, "--bound", args.bound, "--algo", args.algo, "--seed", str(args.seed),
            "--out", args.out, *extra]


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




def main(argv: list[str] | None = None) -> None:  # noqa: D103
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    for name in ["task", "bound", "algo", "out"]:
        parser.add_argument("--" + name, required=True)
    parser.add_argument("--seed", type=int, required=True)
    parser.add_argument("--attempt", type=int, default=1, help="Snakemake's attempt number of this job")
    args, extra = parser.parse_known_args(argv)
    run = run_id(args.task, args.bound, args.algo, args.seed)
    os.makedirs(args.out, exist_ok=True)
    failure = os.path.join(args.out, FAILURE_RECORD)
    if args.attempt == 1 and os.path.exists(failure):
        os.remove(failure)  # a new invocation tries again (the cause may be fixed)
    elif previous_failure(args.out) is not None:
        print(f"train_job: not retrying {run}: an earlier attempt failed with an error a retry would meet "
              f"again: {previous_failure(args.out)} ({failure}). Fix the cause, then rerun the sweep.",
              file=sys.stderr, flush=True)
        sys.exit(1)
    try:
        print("train_job: " + runlock.acquire(args.out, float(os.environ.get(LOCK_WAIT_ENV, 120))),
              file=sys.stderr, flush=True)
    except runlock.RunFolderLocked as err:
        print(f"train_job: {err}", file=sys.stderr, flush=True)
        sys.exit(1)
    if should_fail(run, os.environ.get(FAIL_RUNS_ENV)):
        message = f"{run} fails on purpose ({FAIL_RUNS_ENV}={os.environ[FAIL_RUNS_ENV]!r})"
        record_failure(args.out, message)
        print(f"train_job: {message}", file=sys.stderr, flush=True)
        sys.exit(1)
    cmd = trainer_args(args, extra)
    job_id = os.environ.get("SLURM_JOB_ID")
    stop_at = stop_time(slurm_end_time(job_id), time.time(),
                        float(os.environ.get(STOP_MARGIN_ENV, DEFAULT_STOP_MARGIN_S))) if job_id else None
    if stop_at is not None:
        cmd += ["--stop-at", f"{stop_at:.0f}"]
    cache_dir = os.environ.get("JAX_COMPILATION_CACHE_DIR")
    if cache_dir and not job_id:  # one machine: runs share its cache, so one compiles while the next waits
        os.environ.setdefault(COMPILE_LOCK_ENV, os.path.join(cache_dir, ".saferl-locks"))
    how = "in a warm worker" if warm.use_warm(os.environ) else "exec"
    print(f"train_job: python -m algos.train {' '.join(cmd)} ({how})", file=sys.stderr, flush=True)
    sys.exit(warm.run("algos.train", cmd))


if __name__ == "__main__":
    main()
