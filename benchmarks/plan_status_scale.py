"""How long planning (workflow.packs.plan, what every `snakemake` call runs first) and
`workflow.status` take on a finished paper-size sweep: 1,440 complete run folders whose tables
Snakemake touched after each job (so their mtimes are newer than run.json's record).

    python benchmarks/plan_status_scale.py [--seeds 30] [--episodes 25000] [--keep DIR]

The paper's runs log about 2.5e5 episodes each (about 7 GB of tables for the sweep); to keep
the benchmark feasible here each run gets --episodes (default 25,000, a tenth) and the hashing
part of each time is scaled by the ratio to the paper's 2.5e5 (hashing reads every byte; the
footer reads do not depend on the size). Prints, per call:
- before: every table hashed (what each plan and status call did before verified.json: the
  touched mtimes never matched run.json's);
- after: tables hashed once by the summarise step's verification, footers only since;
- status --verify: every table hashed, as asked.
The tables sit in the page cache (just written); a cold cache makes the hashing calls slower.
"""
from __future__ import annotations

import argparse
import os
import shutil
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from algos import programs  # noqa: E402
from runs import runfolder  # noqa: E402
from algos.trace_schema import TRACE_COLUMNS  # noqa: E402
from metrics import episode_table  # noqa: E402
from runs import run_layout
from workflow import config_validation as cv  # noqa: E402
from workflow import packs, status  # noqa: E402

PAPER_EPISODES = 250_000
N_ENVS = 100


def write_run(folder: Path, spec: dict, episodes: int, rng) -> None:
    """A complete run folder as the trainer writes it, then touched as Snakemake does."""
    c = spec["config"]
    n_iter = max(episodes // N_ENVS, 1)
    blocks = [episode_table.episode_rows(c["task"], c["bound"], c["algo"], c["seed"], "train", range(n_iter),
                                         rng.normal(size=(n_iter, N_ENVS)), rng.exponential(c["bound"], (n_iter, N_ENVS)),
                                         np.full((n_iter, N_ENVS), 2000))]
    for phase in ("final_explore", "final_greedy"):
        blocks.append(episode_table.episode_rows(c["task"], c["bound"], c["algo"], c["seed"], phase, [n_iter - 1],
                                                 rng.normal(size=(1, N_ENVS)), rng.exponential(c["bound"], (1, N_ENVS)),
                                                 np.full((1, N_ENVS), 2000)))
    table = episode_table.episodes_table(blocks)
    trace = runfolder.trace_table({name: rng.normal(size=n_iter) for name in TRACE_COLUMNS})
    folder.mkdir(parents=True, exist_ok=True)
    runfolder.write_parquet(str(folder / run_layout.EPISODES), table)
    runfolder.write_parquet(str(folder / run_layout.TRACE), trace)
    runfolder.write_json(str(folder / run_layout.RUN_JSON), {
        "complete": True, "config": c, "code_version": programs.code_version(),
        "files": {run_layout.EPISODES: runfolder.file_record(folder / run_layout.EPISODES, table.num_rows),
                  run_layout.TRACE: runfolder.file_record(folder / run_layout.TRACE, trace.num_rows)}})
    later = time.time_ns() + 3_000_000_000  # Snakemake's touch, 2-3 s after the trainer's writes
    for name in run_layout.RUN_FILES:
        os.utime(folder / name, ns=(later, later))


def timed(fn) -> float:
    start = time.perf_counter()
    fn()
    return time.perf_counter() - start


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--seeds", type=int, default=30, help="seeds of the paper preset's grid (30: 1,440 runs)")
    parser.add_argument("--episodes", type=int, default=25_000, help="episodes per run (paper: about 2.5e5)")
    parser.add_argument("--keep", default=None, help="build the folder here and keep it (default: a temporary one)")
    args = parser.parse_args()

    cfg = cv.resolve({"preset": "paper", "seeds": args.seeds})
    from workflow import sweep  # the paper sweep's own folder, results-paper/
    runs = list(cfg["specs"])
    root = Path(args.keep or tempfile.mkdtemp(prefix="plan_status_"))
    rng = np.random.default_rng(0)
    built = timed(lambda: [write_run(root / sweep.runs_root(cfg) / r, cfg["specs"][r], args.episodes, rng)
                           for r in runs])
    size = sum((root / sweep.runs_root(cfg) / r / n).stat().st_size for r in runs
               for n in (run_layout.EPISODES, run_layout.TRACE))
    print(f"{len(runs)} runs x {args.episodes:,} episodes, tables {size / 1e6:,.0f} MB (built in {built:.0f} s) in {root}")

    def plan():
        assert not any(p.pending for p in packs.plan(cfg, root)), "a synthetic run was taken as pending"

    def sweep_status(verify=False):
        states = {s.state for s in status.sweep_status(cfg, root, None, verify)}
        assert states == {"done"}, states

    remember = runfolder._remember
    runfolder._remember = lambda *a: None  # before: nothing noted, every touched table hashed
    before = {"plan": timed(plan), "status": timed(sweep_status)}
    runfolder._remember = remember
    timed(lambda: [packs.verify_for_summary(root / sweep.runs_root(cfg) / r) for r in runs])  # summarise's check
    after = {"plan": timed(plan), "status": timed(sweep_status)}
    verify = timed(lambda: sweep_status(verify=True))

    scale = PAPER_EPISODES / args.episodes
    print(f"{'call':<18}{'measured s':>12}{'at 2.5e5 episodes/run s':>26}")
    for name in ("plan", "status"):
        paper = after[name] + (before[name] - after[name]) * scale  # only the hashing grows with the tables
        print(f"{name + ' before':<18}{before[name]:>12.2f}{paper:>26.2f}")
        print(f"{name + ' after':<18}{after[name]:>12.2f}{after[name]:>26.2f}")
    print(f"{'status --verify':<18}{verify:>12.2f}{after['status'] + (verify - after['status']) * scale:>26.2f}")
    if args.keep is None:
        shutil.rmtree(root)


if __name__ == "__main__":
    main()
