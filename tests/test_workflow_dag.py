"""The Snakemake DAG on a completed tiny sweep (the `tiny` preset, local profile): every
product is made, a rerun has nothing to do, a threshold change reruns only tiers and what
reads them, and a deleted run reruns exactly that run and what depends on it.

One sweep is run once per session (the `tiny_sweep` fixture of conftest.py, about a minute
with a warm JAX compilation cache) and every test works on it or on a copy of it."""
from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
from collections import Counter
from pathlib import Path

import pandas as pd
import pytest

from workflow import plan, status
from workflow.config_validation import resolve

REPO = Path(__file__).resolve().parent.parent
SNAKEMAKE = [sys.executable, "-m", "snakemake", "--snakefile", str(REPO / "Snakefile")]
LOCAL_PROFILE = str(REPO / "cluster_profiles" / "local")
UPSTREAM_PREFIXES = ("train_", "summarise_", "aggregate")

pytestmark = pytest.mark.slow


def product_rules() -> set[str]:
    """Rules of the product table (workflow/products/registry.py), one per table/figure."""
    from workflow.products import registry

    return set(registry.by_name())


def run_snakemake(workdir: Path, *args: str, env: dict | None = None) -> subprocess.CompletedProcess:
    return subprocess.run([*SNAKEMAKE, "--workflow-profile", LOCAL_PROFILE, *args], cwd=workdir,
                          capture_output=True, text=True, env=env)


@pytest.fixture()
def sweep_copy(tiny_sweep, tmp_path) -> Path:
    """A copy of the completed sweep (files, times and Snakemake's metadata) to change freely."""
    dest = tmp_path / "sweep"
    shutil.copytree(tiny_sweep, dest, symlinks=True)
    return dest


def test_tiny_sweep_makes_every_run_metric_table_figure_and_the_report(tiny_sweep):
    cfg = resolve({"preset": "tiny"})
    states = status.sweep_status(cfg, tiny_sweep)
    assert len(states) == 8 and {s.state for s in states} == {"done"}
    metrics = tiny_sweep / "results-tiny" / "metrics"
    for name in ["iqm.csv", "bootstrap.parquet", "cdf.parquet", "run_metrics.parquet", "tiers.csv",
                 "conditions.csv", "thresholds.yaml"]:
        assert (metrics / name).is_file(), name
    tiers = pd.read_csv(metrics / "tiers.csv")
    assert set(tiers["algo"]) == {"ppo", "ppo_lag"}
    run_metrics = pd.read_parquet(metrics / "run_metrics.parquet")
    assert len(run_metrics.groupby(["task", "bound", "algo", "seed"])) == 8
    report = (tiny_sweep / "results-tiny" / "report.html").read_text()
    assert "preset <b>tiny</b>" in report
    assert "<h2 id='findings'>Findings</h2>" in report
    assert "Deployment at least as safe as training (final greedy tier ≥ training tier): PPO-Lag" in report
    if product_rules():
        assert any((tiny_sweep / "results-tiny" / "figures").glob("*.png"))
        assert any((tiny_sweep / "results-tiny" / "tables").glob("*"))
        assert "data:image/png;base64," in report


def test_a_rerun_of_a_completed_sweep_has_nothing_to_do(tiny_sweep):
    assert plan.dry_run(tiny_sweep, ["--configfile", "tiny.yaml"]) == []


def test_threshold_change_plans_only_tiers_tables_figures_and_report(sweep_copy):
    (sweep_copy / "changed.yaml").write_text("preset: tiny\nthresholds:\n  moderate: {V: 0.3}\n")
    jobs = plan.dry_run(sweep_copy, ["--configfile", "changed.yaml"])
    rules = {j.rule for j in jobs}
    assert {"write_thresholds", "tiers", "report", "all"} <= rules
    assert rules <= {"write_thresholds", "tiers", "report", "all"} | product_rules()
    assert not [r for r in rules if r.startswith(UPSTREAM_PREFIXES)]


def test_deleting_one_run_plans_exactly_that_run_and_its_dependents(sweep_copy):
    run = "results-tiny/runs/circle/d25/ppo/seed1"
    shutil.rmtree(sweep_copy / run)
    jobs = plan.dry_run(sweep_copy, ["--configfile", "tiny.yaml"])
    counts = Counter(j.rule for j in jobs)
    trained = [j for j in jobs if j.rule.startswith("train_")]
    # the run's pack trains it alone; its pack is re-summarised (milliseconds a run)
    assert [j.rule for j in trained] == ["train_circle_ppo_p0"]
    assert trained[0].outputs == tuple(f"{run}/{f}" for f in ("episodes.parquet", "trace.parquet", "run.json"))
    summarised = [j for j in jobs if j.rule.startswith("summarise_")]
    assert [j.rule for j in summarised] == ["summarise_circle_ppo_p0"]
    assert f"{run}/summary.parquet" in summarised[0].outputs
    assert counts["aggregate"] == 1 and counts["tiers"] == 1 and counts["report"] == 1
    assert "write_thresholds" not in counts  # the thresholds did not change


def test_deleting_one_runs_result_file_retrains_it(sweep_copy):
    os.remove(sweep_copy / "results-tiny/runs/circle/d15/ppo_lag/seed0/run.json")
    jobs = plan.dry_run(sweep_copy, ["--configfile", "tiny.yaml"])
    trained = [j.outputs for j in jobs if j.rule.startswith("train_")]
    assert trained == [tuple(f"results-tiny/runs/circle/d15/ppo_lag/seed0/{f}"
                             for f in ("episodes.parquet", "trace.parquet", "run.json"))]


def test_a_failed_seed_is_reported_and_the_rerun_trains_only_it(sweep_copy):
    run = "circle/d15/ppo/seed0"
    shutil.rmtree(sweep_copy / "results-tiny" / "runs" / run)
    env = dict(os.environ, SAFERL_FAIL_RUNS=run)
    failed = run_snakemake(sweep_copy, "runs", "--configfile", "tiny.yaml", env=env)
    assert failed.returncode != 0
    states = {s.run: s for s in status.sweep_status(resolve({"preset": "tiny"}), sweep_copy)}
    assert states[run].state == "failed"
    assert "fails on purpose" in Path(states[run].log).read_text()
    assert sum(s.state == "done" for s in states.values()) == 7
    # the test switch is not a param: without it, the plan is that one run and its dependents
    jobs = plan.dry_run(sweep_copy, ["--configfile", "tiny.yaml"])
    assert [j.outputs[-1] for j in jobs if j.rule.startswith("train_")] == [f"results-tiny/runs/{run}/run.json"]


def test_paper_preset_plans_1440_runs_in_16_pack_jobs(tmp_path):
    proc = subprocess.run([*SNAKEMAKE, "--dry-run", "--config", "preset=paper", "--quiet", "rules"],
                          cwd=tmp_path, capture_output=True, text=True)
    assert proc.returncode == 0, proc.stderr[-3000:]
    stats = dict(re.findall(r"^(\w+)\s+(\d+)$", proc.stdout + proc.stderr, flags=re.M))
    train = {rule: int(n) for rule, n in stats.items() if rule.startswith("train_")}
    summarise = {rule: int(n) for rule, n in stats.items() if rule.startswith("summarise_")}
    assert len(train) == 16 and set(train.values()) == {1} and len(summarise) == 16
    assert int(stats["aggregate"]) == 1
