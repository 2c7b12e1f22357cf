"""The `velocity-tiny` sweep end to end on the CPU: a CRAX velocity task at level 1 and CRAX's
goal task at level 2 train in batched packs through the whole workflow, its tables and report
name both tasks with their levels, and each member retrained in the other slot of its pack is
bitwise the same. In processes without FMA (XLA_FLAGS=--xla_cpu_max_isa=AVX; tests/batched_packs.py
says why) and single-threaded as the sweep's jobs (`--threads 1`: XLA's multi-threaded products
differ in the last bits), so the retrained packs load the sweep's compiled programs from JAX's cache.

Also: the `velocity` preset's SLURM dry run plans the six velocity tasks."""
import json
import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pandas as pd
import pytest

pytest.importorskip("crax", reason="the crax extra (PyPI crax-bench) is not installed: pip install -e '.[crax]'")
pytestmark = [pytest.mark.crax]

REPO = Path(__file__).resolve().parent.parent
ENV = dict(os.environ, XLA_FLAGS="--xla_cpu_max_isa=AVX")
SNAKEMAKE = [sys.executable, "-m", "snakemake", "--snakefile", str(REPO / "Snakefile")]
VELOCITY = ["safe_velocity_ant", "safe_velocity_halfcheetah", "safe_velocity_hopper", "safe_velocity_humanoid",
            "safe_velocity_swimmer", "safe_velocity_walker2d"]



def tables(folder: Path):
    """The run's episodes and trace, less the trace's wall-clock times."""
    frames = [pd.read_parquet(folder / name) for name in ("episodes.parquet", "trace.parquet")]
    return [f.drop(columns="wall_time") if "wall_time" in f else f for f in frames]


@pytest.mark.slow
@pytest.mark.heavy
def test_velocity_tiny_trains_both_tasks_in_batched_packs_slot_independent(tmp_path):
    done = subprocess.run([*SNAKEMAKE, "--workflow-profile", str(REPO / "cluster_profiles" / "local"),
                           "--config", "preset=velocity-tiny"], cwd=tmp_path, env=ENV, capture_output=True, text=True,
                          timeout=2400)
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    results = tmp_path / "results-velocity-tiny"
    conditions = pd.read_csv(results / "metrics" / "conditions.csv")
    assert set(zip(conditions.task, conditions.bound)) == {("safe_velocity_hopper", 6.4), ("safe_goal_point@l2", 0.8)}
    report = (results / "report.html").read_text()
    assert "Velocity hopper" in report and "Goal L2" in report
    for task, bound in (("safe_velocity_hopper", "6.4"), ("safe_goal_point@l2", "0.8")):
        runs = results / "runs" / task / f"d{bound}" / "ppo_lag"
        episodes = pd.read_parquet(runs / "seed0" / "episodes.parquet")
        assert set(episodes.task) == {task}
        meta = json.loads((runs / "seed0" / "run.json").read_text())
        assert meta["pack_mode"] == "batched" and meta["pack_size"] == 2
        # the pack again with its members in the other slots: each member bitwise the same
        specs = []
        for seed in (1, 0):
            folder = tmp_path / "swapped" / task / f"seed{seed}"
            folder.mkdir(parents=True)
            shutil.copy(runs / f"seed{seed}" / "spec.json", folder / "spec.json")
            specs.append(str(folder / "spec.json"))
        swapped = subprocess.run([sys.executable, "-m", "runs.train", "--threads", "1", "--spec", *specs], cwd=REPO,
                                 env=ENV, capture_output=True, text=True, timeout=1200)
        assert swapped.returncode == 0, swapped.stderr[-3000:]
        for seed in (0, 1):
            for a, b in zip(tables(runs / f"seed{seed}"), tables(tmp_path / "swapped" / task / f"seed{seed}")):
                pd.testing.assert_frame_equal(a, b, check_exact=True)
    # one run from the trainer's command line at level 2, alone in its pack's program size (the
    # sweep's compiled program, from JAX's cache): bitwise the sweep's run
    alone = tmp_path / "alone"
    single = subprocess.run([sys.executable, "-m", "runs.train", "--task", "safe_goal_point", "--level", "2",
                             "--backend", "crax", "--bound", "0.8", "--algo", "ppo_lag", "--seed", "1",
                             "--out", str(alone), "--threads", "1", "--total-steps", "1024", "--num-envs", "4",
                             "--episode-length", "64",
                             "--eval-episodes", "4", "--set", "batch_size=8", "--set", "num_minibatches=2",
                             "--set", "pack_mode=batched", "--pack-runs", "2"],
                            cwd=REPO, env=ENV, capture_output=True, text=True, timeout=1200)
    assert single.returncode == 0, single.stderr[-3000:]
    assert json.loads((alone / "run.json").read_text())["config"]["level"] == 2
    sweep_run = results / "runs" / "safe_goal_point@l2" / "d0.8" / "ppo_lag" / "seed1"
    for a, b in zip(tables(sweep_run), tables(alone)):
        pd.testing.assert_frame_equal(a, b, check_exact=True)


def test_the_velocity_preset_plans_the_six_velocity_tasks_on_slurm(tmp_path):
    proc = subprocess.run([*SNAKEMAKE, "--workflow-profile", str(REPO / "cluster_profiles" / "slurm"),
                           "--config", "preset=velocity", "--dry-run", "--quiet", "rules"],
                          cwd=tmp_path, capture_output=True, text=True, timeout=900)
    assert proc.returncode == 0, proc.stderr[-3000:]
    stats = dict(re.findall(r"^(\w+)\s+(\d+)$", proc.stdout + proc.stderr, flags=re.M))
    train = sorted(rule for rule in stats if rule.startswith("train_"))
    # 6 tasks x 4 algorithms, each pack 30 seeds x 3 bounds = 90 runs
    assert train == sorted(f"train_{t}_{a}_p0" for t in VELOCITY for a in ("ppo", "ppo_lag", "p3o", "focops"))
    assert "sweep velocity in results-velocity/ (2160 runs" in proc.stdout + proc.stderr
