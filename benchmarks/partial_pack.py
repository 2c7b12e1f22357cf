"""A run retrained alone (its folder deleted) in its full pack's cached program against a program
of its own size: what compiling costs a partial pack.

    python benchmarks/partial_pack.py SWEEP_DIR RUN [--pack-runs N]

SWEEP_DIR: a finished sweep's working folder, RUN: one run's folder under it (e.g.
results-tiny/runs/circle/d15/ppo/seed0), N: its pack's size (default: the runs beside it with
the same task and algorithm). On an empty compiled-program cache of its own, it trains the run
afresh from its spec.json three times, each in a new process: with `--pack-runs N` (what the
sweep's job passes: the full pack's program, compiled, as the sweep's first pack does), again
(the program now loads from the cache: a deleted run retrained) and with `--pack-runs 1` (a
program of the run's own size, compiled: what a partial pack cost before programs.pack_slots
gave sequential packs their planned size). It prints each one's compile, train and
final-evaluation seconds, where the programs came from and whether the episodes equal the sweep's.
"""
from __future__ import annotations

import argparse
import glob
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time

REPO = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..")


def retrain(sweep: str, run: str, pack_runs: int, cache: str, scratch: str) -> dict:
    """run.json of the run trained afresh into `scratch` on the cache `cache`, with the process's wall time."""
    folder = os.path.join(scratch, f"run{pack_runs}-{len(os.listdir(scratch))}")
    os.makedirs(folder)
    shutil.copy(os.path.join(sweep, run, "spec.json"), folder)
    env = dict(os.environ, PYTHONPATH=REPO, JAX_COMPILATION_CACHE_DIR=cache)
    start = time.perf_counter()
    subprocess.run([sys.executable, "-m", "runs.train", "--spec", os.path.join(folder, "spec.json"), "--threads", "1",
                    "--pack-runs", str(pack_runs)], env=env, check=True, capture_output=True)
    record = json.load(open(os.path.join(folder, "run.json")))
    record["wall_s"] = time.perf_counter() - start
    record["same_episodes"] = open(os.path.join(folder, "episodes.parquet"), "rb").read() == \
        open(os.path.join(sweep, run, "episodes.parquet"), "rb").read()
    return record


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("sweep")
    parser.add_argument("run")
    parser.add_argument("--pack-runs", type=int, default=None)
    args = parser.parse_args()
    run = args.run.rstrip("/")
    task_dir, algo = os.path.dirname(os.path.dirname(os.path.dirname(run))), os.path.basename(os.path.dirname(run))
    pack = args.pack_runs or len(glob.glob(os.path.join(args.sweep, task_dir, "*", algo, "seed*")))
    print(f"{run}: retrained alone; its pack holds {pack} runs")
    print(f"{'program':<28} {'source':<9} {'compile s':>9} {'train s':>8} {'eval s':>7} {'process s':>9}  same episodes")
    with tempfile.TemporaryDirectory() as scratch:
        cache = os.path.join(scratch, "cache")
        for label, size in ((f"full pack ({pack} slots), cold", pack), (f"full pack ({pack} slots), again", pack),
                            ("its own size (1 slot)", 1)):
            r = retrain(args.sweep, run, size, cache, scratch)
            print(f"{label:<28} {r['program_source']:<9} {r['compile_s']:>9.1f} {r['train_wall_s']:>8.1f} "
                  f"{r['eval_wall_s']:>7.1f} {r['wall_s']:>9.1f}  {r['same_episodes']}", flush=True)


if __name__ == "__main__":
    main()
