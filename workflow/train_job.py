"""Run one training job of the sweep: `python -m algos.train` with the given options.

    python -m workflow.train_job --task goal --bound 25 --algo ppo --seed 0 --out DIR [trainer options]

It records the job (host, pid, SLURM job id) in DIR/job.json for `python -m workflow.status`;
outside SLURM, when JAX_COMPILATION_CACHE_DIR is set, the first run of each compiled program
compiles it while later runs of the same program wait for it (claim_first_compile); then
the process is replaced by the trainer (exec), so SLURM's SIGTERM / SIGUSR2 reach it
directly and it can write its checkpoint and exit 75.

Test switch, read from the environment inside the job so that it never becomes a
Snakemake param (a changed param would rerun every job): SAFERL_FAIL_RUNS, a
comma-separated list of shell patterns over run ids "task/d<bound>/algo/seed<seed>";
a matching run fails at once with exit status 1 (e.g. SAFERL_FAIL_RUNS='*/seed1').
"""
from __future__ import annotations

import argparse
import fcntl
import fnmatch
import hashlib
import json
import os
import shlex
import socket
import sys
import time

from metrics.atomic import write_text

FAIL_RUNS_ENV = "SAFERL_FAIL_RUNS"
JOB_MARKER = "job.json"  # read by workflow.status to tell a running job from a dead one


def run_id(task: str, bound: str, algo: str, seed: str | int) -> str:
    return f"{task}/d{bound}/{algo}/seed{seed}"


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


def trainer_argv(args: argparse.Namespace, extra: list[str]) -> list[str]:
    return [sys.executable, "-m", "algos.train", "--task", args.task, "--bound", args.bound,
            "--algo", args.algo, "--seed", str(args.seed), "--out", args.out, *extra]


def program_key(task: str, algo: str, extra: list[str]) -> str:
    """Runs that differ only in bound and seed share one compiled program (both are runtime
    values), so one key per task, algorithm and trainer options."""
    text = json.dumps([task, algo, sorted(extra)])
    return f"{task}-{algo}-{hashlib.sha256(text.encode()).hexdigest()[:16]}"


def claim_first_compile(cache_dir: str, key: str):
    """Let one run per program compile it while the others of the same program wait.

    Without this, two runs of the same task and algorithm started side by side both spend
    the (30-150 s) compilation; with it the second waits and then loads the program from the
    persistent cache. The first run keeps an exclusive lock on `<cache>/.saferl-locks/KEY`
    until its process ends (the descriptor survives the exec into the trainer); later runs
    find the warm marker and go on at once. Returns the descriptor to keep open, or None.
    """
    lock_dir = os.path.join(cache_dir, ".saferl-locks")
    os.makedirs(lock_dir, exist_ok=True)
    fd = os.open(os.path.join(lock_dir, key + ".lock"), os.O_RDWR | os.O_CREAT, 0o644)
    fcntl.flock(fd, fcntl.LOCK_EX)  # waits while the first run of this program is alive
    warm = os.path.join(lock_dir, key + ".warm")
    if os.path.exists(warm):
        os.close(fd)
        return None
    write_text(warm, "")
    os.set_inheritable(fd, True)
    return fd


def write_job_marker(out_dir: str) -> None:
    """Who runs this run: the pid survives the exec below, so it is the trainer's."""
    marker = {"host": socket.gethostname(), "pid": os.getpid(),
              "slurm_job_id": os.environ.get("SLURM_JOB_ID"), "started": time.time()}
    write_text(os.path.join(out_dir, JOB_MARKER), json.dumps(marker) + "\n")


def main(argv: list[str] | None = None) -> None:  # noqa: D103
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    for name in ["task", "bound", "algo", "out"]:
        parser.add_argument("--" + name, required=True)
    parser.add_argument("--seed", type=int, required=True)
    args, extra = parser.parse_known_args(argv)
    run = run_id(args.task, args.bound, args.algo, args.seed)
    os.makedirs(args.out, exist_ok=True)
    write_job_marker(args.out)
    if should_fail(run, os.environ.get(FAIL_RUNS_ENV)):
        print(f"train_job: {run} fails on purpose ({FAIL_RUNS_ENV}={os.environ[FAIL_RUNS_ENV]!r})",
              file=sys.stderr, flush=True)
        sys.exit(1)
    cmd = trainer_argv(args, extra)
    cache_dir = os.environ.get("JAX_COMPILATION_CACHE_DIR")
    if cache_dir and not os.environ.get("SLURM_JOB_ID"):  # one machine: runs share its cache
        claim_first_compile(cache_dir, program_key(args.task, args.algo, extra))
    print("train_job: exec " + " ".join(cmd), file=sys.stderr, flush=True)
    os.execv(cmd[0], cmd)


if __name__ == "__main__":
    main()
