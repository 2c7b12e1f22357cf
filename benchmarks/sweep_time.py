"""Where a finished sweep's training time went, from its runs' run.json files.

    python benchmarks/sweep_time.py SWEEP_DIR

A pack's members record the pack's wall times (compile, train, eval) and its size; a run's
share is 1 / pack_size of each, so the sums below count every pack once. Prints the sums,
each part's share, and compile's share of the summed run time.
"""
from __future__ import annotations

import json
import sys
from pathlib import Path


def main(argv=None) -> int:
    root = Path((argv or sys.argv[1:])[0]) / "results" / "runs"
    parts = {"compile_s": 0.0, "train_wall_s": 0.0, "eval_wall_s": 0.0}
    runs = 0
    for path in sorted(root.glob("*/*/*/*/run.json")):
        meta = json.loads(path.read_text())
        size = meta.get("pack_size", 1)
        for key in parts:
            parts[key] += meta[key] / size
        runs += 1
    total = sum(parts.values())
    print(f"{runs} runs; summed over packs (seconds of a job's wall time):")
    for key, value in parts.items():
        print(f"  {key:13} {value:8.1f}  {100 * value / total:5.1f} %")
    print(f"  {'total':13} {total:8.1f}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
