"""Benchmark of the metrics engine at the paper's size (issue 2).

Generates a synthetic sweep as one episode shard per run (default: 4 tasks x 3 bounds x 4
algorithms x 30 seeds = 1440 runs, each 122 iterates x 2048 training episodes plus 100
final_explore and 100 final_greedy episodes: 360 million episodes), then runs the full
evaluation (`metrics.evaluate`: summarise, aggregate with B = 2000 and every CDF band, tiers)
in a fresh child process and prints its wall time, CPU time, peak memory (the child's max RSS)
and episodes/s. It also times the IQM-with-CI step against rliable's `get_interval_estimates` on
the same per-run values when a Python with rliable is given (rliable needs pandas < 3, so it
runs in its own virtualenv: --rliable-python PATH, or the environment variable RLIABLE_PYTHON;
e.g. `python -m venv ~/venvs/rliable && ~/venvs/rliable/bin/pip install "pandas<3" rliable pyarrow`).

--compare DIR evaluates the same shards with another checkout's metrics package too (e.g. the
old code from `git worktree add /tmp/old main`), alternating the two for --rounds rounds so
both see the same machine load, and checks that every output file of the two is identical.

    python benchmarks/metrics_scale.py                 # paper size (needs ~4.5 GB of disk, minutes to generate)
    python benchmarks/metrics_scale.py --small         # 144 runs x 10 iterates x 256 episodes, seconds
    python benchmarks/metrics_scale.py --seeds 5 --iterates 20 --shards /tmp/shards --keep
    python benchmarks/metrics_scale.py --shards /tmp/shards --keep --compare /tmp/old
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import shutil
import subprocess
import sys
import tempfile
import time

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, ROOT)
from interpreters import comparison_python  # noqa: E402  (benchmarks/, the script's folder)

TASKS = ["goal", "circle", "push", "button"]
BOUNDS = [15.0, 25.0, 50.0]
ALGOS = ["ppo", "ppo_lag", "p3o", "focops"]
PHASES = ["train", "final_explore", "final_greedy"]


def _constant_dictionary(value, n):
    return pa.DictionaryArray.from_arrays(pa.array(np.zeros(n, np.int32)), pa.array([value]))


def write_shard(path, task, bound, algo, seed, iterates, train_episodes, final_episodes, rng):
    """One run's episode table: costs ~ gamma around a run-specific level, float32 like a logger writes."""
    level = bound * rng.uniform(0.5, 1.6) * (0.6 if algo != "ppo" else 1.4)
    n_train = iterates * train_episodes
    n = n_train + 2 * final_episodes
    phase = np.concatenate([np.zeros(n_train, np.int32), np.ones(final_episodes, np.int32), np.full(final_episodes, 2, np.int32)])
    iteration = np.concatenate([np.repeat(np.arange(iterates, dtype=np.int32), train_episodes), np.full(2 * final_episodes, iterates - 1, np.int32)])
    episode = np.concatenate([np.tile(np.arange(train_episodes, dtype=np.int32), iterates), np.tile(np.arange(final_episodes, dtype=np.int32), 2)])
    cost = rng.gamma(2.0, level / 2.0, n).astype(np.float32)
    ret = rng.normal(20.0, 5.0, n).astype(np.float32)
    table = pa.table(
        {
            "task": _constant_dictionary(task, n),
            "bound": pa.array(np.full(n, bound)),
            "algo": _constant_dictionary(algo, n),
            "seed": pa.array(np.full(n, seed, np.int64)),
            "phase": pa.DictionaryArray.from_arrays(pa.array(phase), pa.array(PHASES)),
            "iteration": pa.array(iteration),
            "episode": pa.array(episode),
            "return": pa.array(ret),
            "cost": pa.array(cost),
        }
    )
    pq.write_table(table, path, compression="snappy")
    return n


def generate(folder, seeds, iterates, train_episodes, final_episodes):
    os.makedirs(folder, exist_ok=True)
    rng = np.random.default_rng(0)
    paths, total = [], 0
    for task in TASKS:
        for bound in BOUNDS:
            for algo in ALGOS:
                for seed in range(seeds):
                    path = os.path.join(folder, f"{task}_d{bound:g}_{algo}_seed{seed}.parquet")
                    if not os.path.exists(path):
                        write_shard(path, task, bound, algo, seed, iterates, train_episodes, final_episodes, rng)
                    paths.append(path)
    total = len(paths) * (iterates * train_episodes + 2 * final_episodes)
    return paths, total


def child_evaluate(list_file, out_dir, reps, jobs, root):
    """Runs in a fresh process (with ``root``'s metrics package) so its max RSS is the evaluation's own peak."""
    sys.path.insert(0, root)
    import metrics
    from metrics.aggregate import write_aggregate_files
    from metrics.tiers import write_tiers

    with open(list_file) as fh:
        paths = fh.read().split("\n")
    times = {}
    t0 = time.perf_counter()
    summary = metrics.summarise(paths, jobs=jobs)
    times["summarise"] = time.perf_counter() - t0
    t = time.perf_counter()
    result = metrics.aggregate(summary, reps=reps, seed=0)
    times["aggregate"] = time.perf_counter() - t
    t = time.perf_counter()
    tables = metrics.assign_tiers(result)
    times["tiers"] = time.perf_counter() - t
    t = time.perf_counter()
    os.makedirs(out_dir, exist_ok=True)
    write_aggregate_files(result, out_dir)
    write_tiers(tables, out_dir)
    times["write"] = time.perf_counter() - t
    times["total"] = time.perf_counter() - t0
    usage = [resource.getrusage(who) for who in (resource.RUSAGE_SELF, resource.RUSAGE_CHILDREN)]
    print(json.dumps({"stages": times, "cpu_s": sum(u.ru_utime + u.ru_stime for u in usage),
                      "peak_kb": max(u.ru_maxrss for u in usage)}))


def evaluate(root, list_file, out, reps, jobs):
    """Wall time, stage times, CPU time and peak memory of one evaluation in a fresh process."""
    shutil.rmtree(out, ignore_errors=True)
    t = time.perf_counter()
    child = subprocess.run(
        [sys.executable, os.path.abspath(__file__), "--_child", list_file, out, str(reps), str(jobs), root],
        capture_output=True, text=True,
    )
    wall = time.perf_counter() - t
    if child.returncode != 0:
        sys.exit(f"evaluation with {root} failed:\n{child.stderr}")
    return {"wall": wall, **json.loads(child.stdout.strip().splitlines()[-1])}


def print_evaluation(label, r, episodes):
    print(f"  {label}wall time {r['wall']:.1f} s (process start + imports included); inside: "
          + ", ".join(f"{k} {v:.1f} s" for k, v in r["stages"].items()))
    print(f"  {label}CPU time {r['cpu_s']:.1f} s (user + system; less sensitive than wall time to a busy machine)")
    print(f"  {label}peak memory (max RSS of the evaluating process) {r['peak_kb'] / 1024**2:.2f} GiB")
    print(f"  {label}throughput {episodes / r['stages']['total'] / 1e6:.2f} million episodes/s")


def output_differences(ours, theirs) -> list:
    """Files of two evaluation folders that differ (Parquet tables compared value by value, exactly)."""
    import pandas as pd

    differ = []
    for name in sorted(set(os.listdir(ours)) | set(os.listdir(theirs))):
        a, b = os.path.join(ours, name), os.path.join(theirs, name)
        if not (os.path.exists(a) and os.path.exists(b)):
            differ.append(f"{name} (only in one)")
        elif name.endswith(".parquet"):
            try:
                pd.testing.assert_frame_equal(pd.read_parquet(a), pd.read_parquet(b), check_exact=True)
            except AssertionError as err:
                differ.append(f"{name} ({str(err).strip().splitlines()[0]})")
        elif open(a, "rb").read() != open(b, "rb").read():
            differ.append(name)
    return differ


def ours_iqm_with_ci(runs, reps, estimator):
    """Our IQM-with-CI step alone: every (algo, phase), all five metrics, one shared draw."""
    from metrics import METRICS
    from metrics.bootstrap import group_rng, iqm, percentile_ci, stratified_draws, stratum_means

    for (algo, phase), rows in runs.groupby(["algo", "phase"], sort=False):
        rows = rows.sort_values(["task", "bound", "seed"])
        sizes = rows.groupby(["task", "bound"], sort=False).size().to_numpy()
        values = rows[list(METRICS)].to_numpy()
        draws = stratified_draws(sizes, reps, group_rng(0, algo, phase))
        if estimator == "stratified":
            replicates = iqm(stratum_means(values, draws, sizes), axis=1)
        else:
            replicates = iqm(values[draws], axis=1)
        percentile_ci(replicates, axis=0)


RLIABLE_SCRIPT = r"""
import json, sys, time
import numpy as np, pandas as pd
from rliable import library as rly, metrics as rm
runs = pd.read_parquet(sys.argv[1]); reps = int(sys.argv[2])
metric_names = ["R", "C", "V", "Dnorm", "Dnorm_plus"]
t = time.perf_counter()
for phase, rows in runs.groupby("phase"):
    for m in metric_names:
        scores = {}
        for algo, r in rows.groupby("algo"):
            # runs x tasks matrix: seeds as rows, (task, bound) strata as columns
            scores[algo] = r.pivot_table(index="seed", columns=["task", "bound"], values=m).to_numpy()
        rly.get_interval_estimates(scores, lambda x: np.array([rm.aggregate_iqm(x)]), reps=reps)
print(json.dumps({"rliable_s": time.perf_counter() - t, "pandas": pd.__version__}))
"""


def compare_with_rliable(run_metrics_path, reps, rliable_python):
    import pandas as pd

    runs = pd.read_parquet(run_metrics_path)
    times = {}
    for estimator in ("stratified", "pooled"):
        t = time.perf_counter()
        ours_iqm_with_ci(runs, reps, estimator)
        times[estimator] = time.perf_counter() - t
    print(f"IQM with 95 % CI, 5 metrics x {runs['algo'].nunique()} algos x 3 phases, B = {reps}:")
    print(f"  ours, stratified estimator (one draw for all metrics): {times['stratified']:.2f} s")
    print(f"  ours, pooled estimator (rliable's IQM):                {times['pooled']:.2f} s")
    if not rliable_python:
        print("  rliable: skipped (no Python with rliable given: --rliable-python PATH or RLIABLE_PYTHON)")
        return
    result = subprocess.run([rliable_python, "-c", RLIABLE_SCRIPT, run_metrics_path, str(reps)], capture_output=True, text=True)
    if result.returncode != 0:
        print(f"  rliable: failed to run ({result.stderr.strip().splitlines()[-1] if result.stderr.strip() else 'no message'})")
        return
    rl = json.loads(result.stdout.strip().splitlines()[-1])
    print(f"  rliable get_interval_estimates (pooled IQM, pandas {rl['pandas']}):  {rl['rliable_s']:.2f} s")
    print(f"  ratio rliable / ours: {rl['rliable_s'] / times['pooled']:.1f}x (pooled, same estimator), "
          f"{rl['rliable_s'] / times['stratified']:.1f}x (vs our stratified)")


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--small", action="store_true", help="144 runs (3 seeds), 10 iterates x 256 episodes, 2 x 100 final")
    parser.add_argument("--seeds", type=int, default=30)
    parser.add_argument("--iterates", type=int, default=122)
    parser.add_argument("--train-episodes", type=int, default=2048)
    parser.add_argument("--final-episodes", type=int, default=100)
    parser.add_argument("--reps", type=int, default=2000)
    parser.add_argument("--shards", help="folder for the shards (reused if present); default a temp folder")
    parser.add_argument("--keep", action="store_true", help="keep generated shards and outputs")
    parser.add_argument("--rliable-python", default=os.environ.get("RLIABLE_PYTHON") or None, metavar="PATH",
                        help="Python of a virtualenv with rliable and pandas < 3, to time rliable on the same values "
                             "(default: the environment variable RLIABLE_PYTHON; skipped if neither is set)")
    parser.add_argument("--jobs", type=int, default=1, help="processes for stage 1 (metrics.summarise(jobs=...))")
    parser.add_argument("--compare", metavar="DIR",
                        help="also evaluate with another checkout's metrics package, alternating, and compare outputs")
    parser.add_argument("--rounds", type=int, default=1, help="alternating rounds with --compare (best of each)")
    parser.add_argument("--_child", nargs=5, help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args._child:
        child_evaluate(args._child[0], args._child[1], int(args._child[2]), int(args._child[3]), args._child[4])
        return
    if args.small:
        args.seeds, args.iterates, args.train_episodes = 3, 10, 256
    # checked before minutes of generating: a named interpreter that is missing is an error
    comparison_python("--rliable-python", "RLIABLE_PYTHON", args.rliable_python, '"pandas<3" rliable pyarrow',
                      required=False)

    if args.compare and not os.path.isfile(os.path.join(args.compare, "metrics", "__init__.py")):
        sys.exit(f"--compare: {args.compare!r} has no metrics/ package (not a checkout of this project)")
    work = args.shards or tempfile.mkdtemp(prefix="metrics_scale_")
    shards = os.path.join(work, "shards")
    out = os.path.join(work, "out")
    try:
        t = time.perf_counter()
        paths, episodes = generate(shards, args.seeds, args.iterates, args.train_episodes, args.final_episodes)
        size = sum(os.path.getsize(p) for p in paths)
        print(
            f"sweep: {len(paths)} runs x ({args.iterates} iterates x {args.train_episodes} + 2 x {args.final_episodes}) "
            f"= {episodes:,} episodes in {len(paths)} Parquet shards, {size / 1e6:,.0f} MB "
            f"(generated/checked in {time.perf_counter() - t:.1f} s)"
        )
        list_file = os.path.join(work, "shards.txt")
        with open(list_file, "w") as fh:
            fh.write("\n".join(paths))
        print(f"full evaluation (B = {args.reps}, CDF bands on 2101 points, tiers), stage 1 in {args.jobs} process(es), "
              f"load average {os.getloadavg()[0]:.1f} at start:")
        checkouts = [("this: " if args.compare else "", ROOT, out)]
        if args.compare:
            checkouts.append(("other: ", os.path.abspath(args.compare), out + "-other"))
        results = {}
        for _ in range(args.rounds if args.compare else 1):
            for label, root, folder in checkouts:
                r = evaluate(root, list_file, folder, args.reps, args.jobs)
                if label not in results or r["wall"] < results[label]["wall"]:
                    results[label] = r
        for label, _, _ in checkouts:
            print_evaluation(label, results[label], episodes)
        if args.compare:
            this, other = results["this: "], results["other: "]
            speedup = {k: other["stages"][k] / this["stages"][k] for k in ("summarise", "aggregate")}
            print(f"  speed-up (other / this): wall {other['wall'] / this['wall']:.2f}x, CPU {other['cpu_s'] / this['cpu_s']:.2f}x, "
                  f"summarise {speedup['summarise']:.2f}x, aggregate {speedup['aggregate']:.2f}x "
                  f"(best of {args.rounds} alternating round(s); load average {os.getloadavg()[0]:.1f} at the end)")
            differ = output_differences(out, out + "-other")
            print(f"  outputs: {'every file identical' if not differ else 'DIFFER: ' + '; '.join(differ)}")
        compare_with_rliable(os.path.join(out, "run_metrics.parquet"), args.reps, args.rliable_python)
    finally:
        if not args.keep:
            if args.shards:
                shutil.rmtree(out, ignore_errors=True)
                shutil.rmtree(out + "-other", ignore_errors=True)
            else:
                shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    main()
