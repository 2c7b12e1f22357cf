"""How `snakemake --dry-run` planning grows with the grid: the paper preset (4 tasks x 3 bounds
x 4 algorithms) with enough seeds for about 1,440, 10,000 and 100,000 runs, each planned in an
empty folder (every run to do).

    python benchmarks/plan_scale.py [--runs 1440 10000 100000]

Prints per grid the runs, packs, wall and CPU seconds of the whole `snakemake -n` process and
CPU seconds per 1,000 runs (flat or falling: linear growth or better). A grid past the sweep
check's limit (workflow.config_validation.MAX_RUNS) is planned with the limit lifted for the
measurement only, so the benchmark shows why the limit is where it is.
"""
from __future__ import annotations

import argparse
import math
import re
import resource
import subprocess
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
RUNS_PER_SEED = 4 * 3 * 4  # the paper preset's tasks x bounds x algorithms

# snakemake's CLI in this process, with the run limit lifted (the Snakefile imports this very module)
LIFTED = ("import sys; from workflow import config_validation as cv; cv.MAX_RUNS = 10**9; "
          "from snakemake.cli import main; sys.argv[0] = 'snakemake'; main()")


def plan(seeds: int) -> tuple[float, float, int]:
    """(wall s, CPU s, train jobs) of one dry run."""
    with tempfile.TemporaryDirectory() as workdir:
        cmd = [sys.executable, "-c", LIFTED, "--snakefile", str(REPO / "Snakefile"), "--workflow-profile",
               str(REPO / "cluster_profiles" / "local"), "--dry-run", "--quiet", "rules",
               "--config", "preset=paper", f"seeds={seeds}"]
        before = resource.getrusage(resource.RUSAGE_CHILDREN)
        start = time.perf_counter()
        proc = subprocess.run(cmd, cwd=workdir, capture_output=True, text=True, env={"PYTHONPATH": str(REPO),
                                                                                      "PATH": "/usr/bin:/bin"})
        wall = time.perf_counter() - start
        after = resource.getrusage(resource.RUSAGE_CHILDREN)
        if proc.returncode != 0:
            raise SystemExit(f"seeds={seeds} failed:\n{proc.stderr[-2000:]}")
        first_table = (proc.stdout + proc.stderr).split("\ntotal", 1)[0]
        trains = sum(int(n) for n in re.findall(r"^train_\S+\s+(\d+)$", first_table, flags=re.M))
    cpu = (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)
    return wall, cpu, trains


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--runs", type=int, nargs="+", default=[1440, 10_000, 100_000])
    args = parser.parse_args()
    print(f"{'runs':>8} {'packs':>6} {'wall s':>8} {'CPU s':>8} {'CPU s / 1,000 runs':>19}", flush=True)
    for target in args.runs:
        seeds = math.ceil(target / RUNS_PER_SEED)
        wall, cpu, trains = plan(seeds)
        runs = seeds * RUNS_PER_SEED
        print(f"{runs:>8,} {trains:>6} {wall:>8.1f} {cpu:>8.1f} {cpu / runs * 1000:>19.2f}", flush=True)


if __name__ == "__main__":
    main()
