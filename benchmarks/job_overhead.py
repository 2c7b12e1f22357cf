"""Where the seconds of one sweep job go: one `cpu` run started as workflow/rules/train.smk starts
it, then its per-run summary as the summarise rule runs it.

    python benchmarks/job_overhead.py [--code DIR ...] [--task goal] [--algo ppo_lag] [--repeat 2]

Each --code folder is a checkout of this repository (default: this one); give two (e.g. an old
checkout made with `git worktree add /tmp/old main`) to compare them in one run: their timed
runs alternate, so both see the same machine load. Every checkout gets its own compilation
cache in a temporary folder, warmed by one untimed run, so the timed runs load their programs
from the cache as every run after a program's first does in a sweep.

Phases of a train job (wall seconds; "cpu" is the job's user + system CPU time):
  start-up    process start to the trainer's run() (interpreters, imports, JAX's backend),
              from the job marker's and run.json's times;
  programs    lowering the three programs and loading them from the cache (run.json compile_s);
  train, eval run.json's train_wall_s and eval_wall_s;
  write       the rest of run(): initial state, host copies, the parquet and JSON outputs;
  exit        run.json written to process exit;
and the summarise job's own wall time (`python -m metrics summarise`, through
`python -m workflow.warm` where the checkout has it, as its rule runs it).
With warm workers (workflow.warm) the timed runs are served by the workers the warm-up run
started, as every job after a program's first is in a sweep; "cpu" then counts the job's
client process only (the worker is not its child), so compare the wall figures.
"""
from __future__ import annotations

import argparse
import json
import os
import resource
import subprocess
import sys
import tempfile
import time

PHASES = ("start-up", "programs", "train", "eval", "write", "exit", "summarise", "total", "cpu")


def job(code: str, out: str, cache: str, task: str, algo: str, seed: int, threads: int) -> dict:
    """One train job as train.smk runs it, then the summarise step; returns its phases."""
    # warm workers wait out the other checkout's job (a sweep's jobs follow each other at once)
    env = dict(os.environ, JAX_COMPILATION_CACHE_DIR=cache, PYTHONPATH=code, SAFERL_WARM_IDLE_S="300")
    env.pop("XLA_FLAGS", None)
    cmd = [sys.executable, "-m", "workflow.train_job", "--task", task, "--bound", "25", "--algo", algo,
           "--seed", str(seed), "--out", out, "--preset", "cpu", "--backend", "builtin"]
    threads_passed = "--threads" in open(os.path.join(code, "workflow", "rules", "train.smk")).read()
    if threads_passed:
        cmd += ["--threads", str(threads)]
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    start = time.time()
    proc = subprocess.run(cmd, cwd=code, env=env, capture_output=True, text=True)
    end = time.time()
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    if proc.returncode != 0:
        raise SystemExit(f"{code}: train job failed ({proc.returncode}):\n{proc.stderr[-3000:]}")
    run = json.load(open(os.path.join(out, "run.json")))
    marker = json.load(open(os.path.join(out, "job.json")))
    run_end = os.path.getmtime(os.path.join(out, "run.json"))
    run_start = run_end - run["process_wall_s"]
    phases = {
        "start-up": run_start - start,
        "programs": run["compile_s"],
        "train": run["train_wall_s"],
        "eval": run["eval_wall_s"],
        "write": run["process_wall_s"] - run["compile_s"] - run["train_wall_s"] - run["eval_wall_s"],
        "exit": end - run_end,
        "cpu": (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime),
        "marker_s": marker["started"] - start,
    }
    summary = os.path.join(out, "summary.parquet")
    if os.path.exists(summary):  # written by the train job itself
        phases["summarise"] = 0.0
    else:
        start_s = time.time()
        warm = os.path.exists(os.path.join(code, "workflow", "warm.py"))  # as that checkout's rule runs it
        subprocess.run([sys.executable, "-m", *(["workflow.warm"] if warm else []), "metrics", "summarise",
                        os.path.join(out, "episodes.parquet"), "--out", summary], cwd=code, env=env, check=True,
                       capture_output=True)
        phases["summarise"] = time.time() - start_s
    phases["total"] = end - start + phases["summarise"]
    return phases


def main(argv=None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--code", action="append", help="checkout(s) to time (default: this one)")
    parser.add_argument("--task", default="goal")
    parser.add_argument("--algo", default="ppo_lag")
    parser.add_argument("--repeat", type=int, default=2, help="timed runs per checkout")
    parser.add_argument("--threads", type=int, default=1, help="train.threads (the default preset's 1)")
    args = parser.parse_args(argv)
    codes = [os.path.abspath(c) for c in (args.code or [os.path.join(os.path.dirname(__file__), "..")])]
    tmp = tempfile.mkdtemp(prefix="job-overhead-")
    print(f"{args.task} / {args.algo}, cpu preset, threads {args.threads}; load average {os.getloadavg()[0]:.1f}; "
          f"scratch {tmp}")
    for i, code in enumerate(codes):  # warm each checkout's cache (untimed)
        start = time.time()
        job(code, os.path.join(tmp, f"c{i}", "warm"), os.path.join(tmp, f"c{i}", "cache"), args.task, args.algo,
            100, args.threads)
        print(f"warm-up (compiles) {code}: {time.time() - start:.0f} s")
    results = {i: [] for i in range(len(codes))}
    for r in range(args.repeat):
        for i, code in enumerate(codes):
            results[i].append(job(code, os.path.join(tmp, f"c{i}", f"run{r}"), os.path.join(tmp, f"c{i}", "cache"),
                                  args.task, args.algo, r, args.threads))
    print(f"load average after: {os.getloadavg()[0]:.1f}")
    for i, code in enumerate(codes):  # end the warm workers this run started
        if os.path.exists(os.path.join(code, "workflow", "warm.py")):
            subprocess.run([sys.executable, "-m", "workflow.warm", "--stop"], cwd=code, capture_output=True,
                           env=dict(os.environ, JAX_COMPILATION_CACHE_DIR=os.path.join(tmp, f"c{i}", "cache"),
                                    PYTHONPATH=code))
    print("\nmedian seconds per job (wall; cpu = user + system of the train job)")
    print("| phase | " + " | ".join(os.path.basename(c.rstrip("/")) or c for c in codes) + " |")
    print("|---|" + "---|" * len(codes))
    for phase in PHASES:
        cells = []
        for i in range(len(codes)):
            values = sorted(p[phase] for p in results[i])
            cells.append(f"{values[len(values) // 2]:.2f}")
        print(f"| {phase} | " + " | ".join(cells) + " |")


if __name__ == "__main__":
    main()
