"""Issue 10, item 11: the job's thread count reaches the trainer (train.threads -> --threads), here
on the retraining of a run that was trained for another spec: it alone retrains, its pack's job
gives the trainer the configured threads, and the flag that planned it records why."""
from __future__ import annotations

import json
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from runs import run_layout
from workflow import plan
from workflow.config_validation import resolve

REPO = Path(__file__).resolve().parent.parent

pytestmark = pytest.mark.slow


def test_a_stale_run_retrains_alone_with_the_configured_threads(tiny_sweep, tmp_path):
    sweep = tmp_path / "sweep"
    shutil.copytree(tiny_sweep, sweep, symlinks=True)
    stale = run_layout.run_dir(sweep, "circle", 15, "ppo_lag", 1, "results-tiny")
    meta = json.loads((stale / run_layout.RUN_JSON).read_text())
    meta["config"]["total_steps"] += 1  # as if trained before the budget changed
    (stale / run_layout.RUN_JSON).write_text(json.dumps(meta))
    others = {p: p.read_bytes() for p in (sweep / "results-tiny" / "runs").rglob(run_layout.RUN_JSON) if p.parent != stale}
    assert len(others) == 7

    (sweep / "threads.yaml").write_text("preset: tiny\ntrain: {threads: 2}\n")  # threads are in no spec
    proc = subprocess.run([sys.executable, "-m", "snakemake", "--snakefile", str(REPO / "Snakefile"),
                           "--workflow-profile", str(REPO / "cluster_profiles" / "local"), "runs",
                           "--configfile", "threads.yaml"], cwd=sweep, capture_output=True, text=True, timeout=900)
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]

    log = (sweep / "results-tiny" / "logs" / "train" / "circle_ppo_lag_p0.log").read_text()
    assert f"--spec results-tiny/runs/circle/d15/ppo_lag/seed1/spec.json --threads 2" in log
    assert {p: p.read_bytes() for p in others} == others  # its pack-mates and the other pack untouched
    spec = resolve({"preset": "tiny"})["specs"]["circle/d15/ppo_lag/seed1"]
    assert json.loads((stale / run_layout.RUN_JSON).read_text())["config"] == spec["config"]
    [flag] = (sweep / "results-tiny" / "logs" / "stale").rglob("*.txt")
    assert flag.read_text() == "circle/d15/ppo_lag/seed1: trained with another config (fields ['total_steps'])\n"
    assert not [j for j in plan.dry_run(sweep, ["runs", "--config", "preset=tiny"]) if j.rule.startswith("train_")]
