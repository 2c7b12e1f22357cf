"""How long Snakemake takes to plan the sweep (`snakemake --dry-run`), per preset.

    python benchmarks/workflow_plan.py [--repeat 3]

Prints, for the `paper` preset (1440 runs) and the `default` preset (96 runs), the wall
time of a dry run in an empty folder (everything to do), with the local and with the slurm
profile, and the number of planned train jobs (one per pack of runs).
The ratio against the default preset shows how planning scales with the grid.
"""
from __future__ import annotations

import argparse
import re
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent


def plan_seconds(preset: str, profile: str, repeat: int) -> tuple[float, int]:
    times, trains = [], 0
    for _ in range(repeat):
        with tempfile.TemporaryDirectory() as workdir:
            cmd = [sys.executable, "-m", "snakemake", "--snakefile", str(REPO / "Snakefile"),
                   "--workflow-profile", str(REPO / "cluster_profiles" / profile),
                   "--dry-run", "--quiet", "rules", "--config", f"preset={preset}"]
            start = time.perf_counter()
            proc = subprocess.run(cmd, cwd=workdir, capture_output=True, text=True)
            times.append(time.perf_counter() - start)
            if proc.returncode != 0:
                raise SystemExit(f"{' '.join(cmd)} failed:\n{proc.stderr[-2000:]}")
            # one rule per pack (train_TASK_ALGO_pK); the job-count table is printed twice
            first_table = (proc.stdout + proc.stderr).split("\ntotal", 1)[0]
            trains = sum(int(n) for n in re.findall(r"^train_\S+\s+(\d+)$", first_table, flags=re.M))
    return statistics.median(times), trains


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--repeat", type=int, default=3)
    args = parser.parse_args()
    results = {}
    for preset in ("paper", "default"):
        for profile in ("local", "slurm"):
            seconds, trains = plan_seconds(preset, profile, args.repeat)
            results[preset, profile] = seconds
            print(f"{preset:8s} {profile:6s} {trains:5d} train (pack) jobs planned in {seconds:5.2f} s "
                  f"(median of {args.repeat}, whole `snakemake --dry-run` process)")
    for profile in ("local", "slurm"):
        ratio = results["paper", profile] / results["default", profile]
        print(f"paper / default planning time ({profile} profile): {ratio:.1f}x for 15x the runs")


if __name__ == "__main__":
    main()
