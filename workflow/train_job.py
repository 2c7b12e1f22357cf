"""Run one training job of the sweep: `python -m algos.train` with the given options.

    python -m workflow.train_job --task goal --bound 25 --algo ppo --seed 0 --out DIR [trainer options]

The process is replaced by the trainer (exec), so SLURM's SIGTERM / SIGUSR2 reach it
directly and it can write its checkpoint and exit 75.

Test switch, read from the environment inside the job so that it never becomes a
Snakemake param (a changed param would rerun every job): SAFERL_FAIL_RUNS, a
comma-separated list of shell patterns over run ids "task/d<bound>/algo/seed<seed>";
a matching run fails at once with exit status 1 (e.g. SAFERL_FAIL_RUNS='*/seed1').
"""
from __future__ import annotations

import argparse
import fnmatch
import os
import sys

FAIL_RUNS_ENV = "SAFERL_FAIL_RUNS"


def run_id(task: str, bound: str, algo: str, seed: str | int) -> str:
    return f"{task}/d{bound}/{algo}/seed{seed}"


def should_fail(run: str, patterns: str | None) -> bool:
    return any(fnmatch.fnmatchcase(run, p.strip()) for p in (patterns or "").split(",") if p.strip())


def trainer_argv(args: argparse.Namespace, extra: list[str]) -> list[str]:
    return [sys.executable, "-m", "algos.train", "--task", args.task, "--bound", args.bound,
            "--algo", args.algo, "--seed", str(args.seed), "--out", args.out, *extra]


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    for name in ["task", "bound", "algo", "out"]:
        parser.add_argument("--" + name, required=True)
    parser.add_argument("--seed", type=int, required=True)
    args, extra = parser.parse_known_args(argv)
    run = run_id(args.task, args.bound, args.algo, args.seed)
    if should_fail(run, os.environ.get(FAIL_RUNS_ENV)):
        print(f"train_job: {run} fails on purpose ({FAIL_RUNS_ENV}={os.environ[FAIL_RUNS_ENV]!r})",
              file=sys.stderr, flush=True)
        sys.exit(1)
    cmd = trainer_argv(args, extra)
    print("train_job: exec " + " ".join(cmd), file=sys.stderr, flush=True)
    os.execv(cmd[0], cmd)


if __name__ == "__main__":
    main()
