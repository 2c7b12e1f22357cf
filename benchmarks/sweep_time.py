"""Where a finished sweep's training time went, from its runs' run.json files.

    python benchmarks/sweep_time.py SWEEP_DIR [--preset NAME]

SWEEP_DIR: the folder the sweep ran in (its results/ for the default preset, results-NAME/
with --preset NAME, the one results*/ folder there) or a results folder itself.

A pack's members record the pack's wall times (compile, train, eval) and its size; a run's
share is 1 / pack_size of each, so the sums below count every pack once. Prints the sums,
each part's share, and how many packs compiled their programs and how many loaded them
(algos.program_cache) with the seconds of each.
"""
from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("sweep", help="the folder the sweep ran in, or its results folder")
    parser.add_argument("--preset", help="the sweep's preset: reads results-NAME/ (default: results/)")
    args = parser.parse_args(argv)
    sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
    from workflow.sweep import folder_in

    root = Path(folder_in(args.sweep, args.preset)) / "runs"
    print(f"runs of {root}")
    parts = {"compile_s": 0.0, "train_wall_s": 0.0, "eval_wall_s": 0.0}
    runs = 0
    sources: dict = {}  # program_source -> [packs, seconds]
    for path in sorted(root.glob("*/*/*/*/run.json")):
        meta = json.loads(path.read_text())
        size = meta.get("pack_size", 1)
        for key in parts:
            parts[key] += meta[key] / size
        source = sources.setdefault(meta.get("program_source", "not recorded"), [0.0, 0.0])
        source[0] += 1 / size
        source[1] += meta["compile_s"] / size
        runs += 1
    if not runs:
        raise SystemExit(f"sweep_time: no run.json under {root}/TASK/BOUND/ALGO/SEED/: not a trained sweep's folder")
    total = sum(parts.values())
    print(f"{runs} runs; summed over packs (seconds of a job's wall time):")
    for key, value in parts.items():
        print(f"  {key:13} {value:8.1f}  {100 * value / total:5.1f} %")
    print(f"  {'total':13} {total:8.1f}")
    for name, (packs, seconds) in sorted(sources.items()):
        print(f"  programs {name}: {packs:.0f} packs, {seconds:.1f} s")
    return 0


if __name__ == "__main__":
    sys.exit(main())
