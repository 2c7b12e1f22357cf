"""What the default check's identity test (an episode table's footer statistics must name its
run: runs.runfolder._identity_problem, which finds two runs' tables swapped with size and
mtime kept) costs in `workflow.status`, on a finished paper-preset sweep of synthetic runs.

    python benchmarks/integrity_cost.py [--seeds 30] [--episodes 2500] [--repeat 5]

Prints the median CPU time of `workflow.status`'s check of every run folder (status.sweep_status,
tables unchanged since hashed, so footers only) with the identity test and without it (the
test replaced by one that finds nothing), measured alternately in one process, and their
ratio; and the identity test alone over the footers already read.
"""
from __future__ import annotations

import argparse
import shutil
import statistics
import sys
import tempfile
import time
from pathlib import Path

import numpy as np
import pyarrow.parquet as pq

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from plan_status_scale import write_run  # noqa: E402  (beside this file)

from runs import run_layout, runfolder  # noqa: E402
from workflow import config_validation as cv  # noqa: E402
from workflow import packs, status, sweep  # noqa: E402


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--seeds", type=int, default=30, help="seeds of the paper preset's grid (30: 1,440 runs)")
    parser.add_argument("--episodes", type=int, default=2_500, help="episodes per run (the check reads footers only)")
    parser.add_argument("--repeat", type=int, default=5)
    args = parser.parse_args()

    cfg = cv.resolve({"preset": "paper", "seeds": args.seeds})
    root = Path(tempfile.mkdtemp(prefix="integrity_cost_"))
    runs_root = root / sweep.runs_root(cfg)
    rng = np.random.default_rng(0)
    for run, spec in cfg["specs"].items():
        write_run(runs_root / run, spec, args.episodes, rng)
    for run in cfg["specs"]:
        packs.verify_for_summary(runs_root / run)  # hashed once, as the summarise step does

    def check() -> float:  # CPU seconds of this process: other load on the machine does not count
        start = time.process_time()
        states = {s.state for s in status.sweep_status(cfg, root, None, False)}
        assert states == {"done"}, states
        return time.process_time() - start

    identity = runfolder._identity_problem
    with_test, without = [], []
    check()  # warm the page cache and the imports
    for _ in range(args.repeat):
        with_test.append(check())
        runfolder._identity_problem = lambda metadata, config: None
        without.append(check())
        runfolder._identity_problem = identity
    footers = [(pq.read_metadata(runs_root / run / run_layout.EPISODES), spec["config"])
               for run, spec in cfg["specs"].items()]
    start = time.process_time()
    assert not any(identity(metadata, config) for metadata, config in footers)
    alone = time.process_time() - start

    on, off = statistics.median(with_test), statistics.median(without)
    print(f"{len(cfg['specs'])} runs; workflow.status check, median of {args.repeat}:")
    print(f"  with the identity test     {on:7.3f} CPU s")
    print(f"  without it                 {off:7.3f} CPU s")
    print(f"  ratio with / without       {on / off:7.3f} ({(on - off) / off * 100:+.1f} %)")
    print(f"  identity test alone        {alone:7.3f} CPU s ({alone / off * 100:.1f} % of the check without it)")
    shutil.rmtree(root)


if __name__ == "__main__":
    main()
