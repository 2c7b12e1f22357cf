"""benchmarks/budget_study.py: its sweeps at two budgets and its table, on the tiny preset."""
from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pandas as pd

SCRIPT = Path(__file__).resolve().parent.parent / "benchmarks" / "budget_study.py"


def study(out: Path, *extra: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, str(SCRIPT), "--out", str(out), "--preset", "tiny", "--tasks", "circle",
                           "--algos", "ppo_lag", "--seeds", "2", "--budgets", "1", "2", "--base-steps", "4096",
                           "--cores", "1", *extra], capture_output=True, text=True, timeout=900,
                          env={**os.environ, "PYTHONPATH": str(SCRIPT.parent.parent)})


def test_budget_study_trains_each_budget_and_reports_what_the_sweeps_hold(tmp_path):
    done = study(tmp_path)
    assert done.returncode == 0, done.stdout[-2000:] + done.stderr[-2000:]
    assert "budget x1: trained and evaluated" in done.stdout and "budget x2: trained and evaluated" in done.stdout
    for budget, steps in ((1, 4096), (2, 8192)):
        runs = pd.read_parquet(tmp_path / f"x{budget}" / "results" / "metrics" / "run_metrics.parquet")
        assert set(runs["algo"]) == {"ppo_lag"} and runs["seed"].nunique() == 2
        trace = pd.read_parquet(next((tmp_path / f"x{budget}" / "results" / "runs").rglob("trace.parquet")))
        # action_std is the latest update's: NaN for the iterates logged before the first update ends
        assert trace["env_steps"].iloc[-1] <= steps and trace["action_std"].iloc[-1] > 0
        greedy = runs[runs["phase"] == "final_greedy"]["R"].mean()
        # the per-algorithm row's greedy return is the mean over tasks of the per-task means (one task here)
        row = next(line for line in done.stdout.splitlines() if line.split()[:2] == [f"x{budget}", "ppo_lag"])
        assert f"{greedy:.2f}" in row.split()

    again = study(tmp_path, "--report-only")  # reads the same sweeps, trains nothing
    assert again.returncode == 0, again.stderr[-2000:]
    assert "trained and evaluated" not in again.stdout and "x2 ppo_lag" in " ".join(again.stdout.split())
