"""Integration test through a real SLURM cluster (cluster_profiles/slurm-local/up.sh) with
Snakemake's SLURM executor and the slurm-local profile:
- a tiny sweep in which one seed is made to fail completes the others and reports that seed
  failed (with its log); the rerun submits exactly that seed and completes the sweep;
- a training job cancelled mid-run (SIGTERM from scancel) is retried and resumes from its
  checkpoint instead of starting again from zero.
Skipped, with the reason, when no cluster answers."""
from __future__ import annotations

import json
import os
import re
import shutil
import signal
import subprocess
import sys
import time
from collections import Counter
from pathlib import Path

import pandas as pd
import pytest

from workflow import status
from workflow.config_validation import resolve

REPO = Path(__file__).resolve().parent.parent
SNAKEMAKE = [sys.executable, "-m", "snakemake", "--snakefile", str(REPO / "Snakefile"),
             "--workflow-profile", str(REPO / "cluster_profiles" / "slurm-local")]
SWEEP_TIMEOUT_S = 900


def cluster_problem() -> str | None:
    """Why no SLURM cluster can take jobs, or None when one can."""
    if shutil.which("sbatch") is None or shutil.which("sinfo") is None:
        return "no SLURM client (sbatch/sinfo) on PATH; start one with cluster_profiles/slurm-local/up.sh"
    try:
        states = subprocess.run(["sinfo", "-h", "-o", "%t"], capture_output=True, text=True, timeout=20)
    except (OSError, subprocess.SubprocessError) as e:
        return f"sinfo failed ({e}); start a cluster with cluster_profiles/slurm-local/up.sh"
    if states.returncode != 0 or not re.search(r"^(idle|mix|alloc)", states.stdout, flags=re.M):
        return (f"no SLURM node is up (sinfo: {states.stdout.strip() or states.stderr.strip()}); "
                "start one with cluster_profiles/slurm-local/up.sh")
    return None


pytestmark = [pytest.mark.slurm, pytest.mark.skipif(cluster_problem() is not None,
                                                    reason=str(cluster_problem()))]


def snakemake(workdir: Path, *args: str, env_extra: dict | None = None, timeout=SWEEP_TIMEOUT_S):
    env = {k: v for k, v in os.environ.items() if k != "SAFERL_FAIL_RUNS"}
    env.update(env_extra or {})
    # SIGINT on timeout: Snakemake then cancels its SLURM jobs (slurm-notes.md).
    return subprocess.run(["timeout", "-s", "INT", str(timeout), *SNAKEMAKE, *args], cwd=workdir,
                          capture_output=True, text=True, env=env)


def submitted(log: str) -> list[str]:
    """Log paths of the SLURM jobs a Snakemake run submitted (one line per sbatch)."""
    return re.findall(r"has been submitted with SLURM jobid \d+ \(log: (.*?)\)", log)


def trained_runs(log: str) -> list[str]:
    """Run folders of the pack jobs a Snakemake run started (a run once per job it was in)."""
    outputs = re.findall(r"rule train_\w+:\n\s+output: (.*)\n", log)
    return [o.strip()[:-len("/run.json")] for line in outputs for o in line.split(",") if o.strip().endswith("/run.json")]


def test_tiny_sweep_with_a_failing_seed_then_a_rerun_of_exactly_that_seed(tmp_path):
    (tmp_path / "tiny.yaml").write_text("preset: tiny\n")
    bad = "circle/d25/ppo_lag/seed1"
    # target `metrics`: the products run in the controller and are tested with the local profile
    first = snakemake(tmp_path, "metrics", "--configfile", "tiny.yaml", env_extra={"SAFERL_FAIL_RUNS": bad})
    log1 = first.stdout + first.stderr
    assert first.returncode != 0, log1[-3000:]
    # one SLURM job per pack (4 runs each); the failing pack is retried once (profile), and its
    # retry trains its other runs again (Snakemake clears a job's outputs before a retry)
    attempts = Counter(trained_runs(log1))
    assert attempts == {f"results/runs/{r}": 2 if "/ppo_lag/" in r else 1
                        for r in status.run_ids(resolve({"preset": "tiny"}))}
    assert len(submitted(log1)) == 3
    assert re.search(rf"Error in rule train_circle_ppo_lag_p0:\n(?:\s+\w+: .*\n)*?\s+output: .*results/runs/{bad}/",
                     log1), log1[-3000:]

    cfg = resolve({"preset": "tiny"})
    states = {s.run: s for s in status.sweep_status(cfg, tmp_path, status.slurm_active_jobs())}
    assert states[bad].state == "failed"
    assert "fails on purpose" in Path(states[bad].log).read_text()
    done = {r for r, s in states.items() if s.state == "done"}
    assert done == set(states) - {bad}
    done_mtimes = {r: (tmp_path / "results/runs" / r / "run.json").stat().st_mtime_ns for r in done}

    second = snakemake(tmp_path, "metrics", "--configfile", "tiny.yaml")
    log2 = second.stdout + second.stderr
    assert second.returncode == 0, log2[-3000:]
    assert trained_runs(log2) == [f"results/runs/{bad}"]
    # that run's job and the aggregation: nothing else went to the scheduler
    jobs2 = submitted(log2)
    assert len(jobs2) == 2, jobs2
    assert sum("/rule_train_circle_ppo_lag_p0/" in p for p in jobs2) == 1
    assert sum("/rule_aggregate/" in p for p in jobs2) == 1
    assert {s.state for s in status.sweep_status(cfg, tmp_path)} == {"done"}
    assert {r: (tmp_path / "results/runs" / r / "run.json").stat().st_mtime_ns for r in done} == done_mtimes
    tiers = pd.read_csv(tmp_path / "results" / "metrics" / "tiers.csv")
    assert set(tiers["algo"]) == {"ppo", "ppo_lag"}


def test_a_job_cancelled_mid_run_resumes_from_its_checkpoint(tmp_path):
    # one run, long enough to be caught mid-training; same compiled program as `tiny`
    (tmp_path / "long.yaml").write_text(
        "preset: tiny\ntasks: [circle]\nbounds: [25]\nalgos: [ppo]\nseeds: [0]\n"
        "train: {total_steps: 1600000}\n")
    run_dir = tmp_path / "results/runs/circle/d25/ppo/seed0"
    train_log = tmp_path / "results/logs/train/circle_ppo_p0.log"
    proc = subprocess.Popen(["timeout", "-s", "INT", str(SWEEP_TIMEOUT_S), *SNAKEMAKE, "runs",
                             "--configfile", "long.yaml"], cwd=tmp_path, stdout=subprocess.PIPE,
                            stderr=subprocess.STDOUT, text=True)
    try:
        deadline = time.monotonic() + 600
        job_id = None
        while time.monotonic() < deadline and proc.poll() is None:
            text = train_log.read_text() if train_log.exists() else ""
            if "steps/s" in text and (run_dir / "job.json").exists():  # training, past compilation
                job_id = json.loads((run_dir / "job.json").read_text())["slurm_job_id"]
                break
            time.sleep(0.5)
        assert job_id, "the training job never started training"
        subprocess.run(["scancel", str(job_id)], check=True)
        out, _ = proc.communicate(timeout=SWEEP_TIMEOUT_S)
    finally:
        if proc.poll() is None:
            proc.send_signal(signal.SIGINT)
            proc.wait(60)
    assert proc.returncode == 0, out[-3000:]
    # Snakemake clears a job's log before its retry: the log is the resumed attempt's.
    text = train_log.read_text()
    resumed = re.search(r"resumed from \S+/checkpoint at update (\d+)/(\d+)", text)
    assert resumed, text
    assert 0 < int(resumed.group(1)) < int(resumed.group(2))  # neither from zero nor after the end
    # the cancelled job failed and was submitted again (the profile's one retry, more runtime)
    assert f"SLURM jobid {job_id} " in out and "Trying to restart job" in out
    assert len(submitted(out)) == 2 and re.search(r"runtime=20\b", out)
    run = json.loads((run_dir / "run.json").read_text())
    assert run["restarts"] == 1 and run["env_steps"] >= 1600000
    assert not (run_dir / "checkpoint").exists()  # removed once the run completed


def test_launcher_submits_the_controller_as_a_slurm_job(tmp_path):
    import submitit

    proc = subprocess.run([sys.executable, "-m", "workflow.launch", "--profile",
                           str(REPO / "cluster_profiles" / "slurm-local"), "--preset", "tiny",
                           "--partition", "debug", "--cpus", "1", "--mem-gb", "1", "--hours", "0.2",
                           "--", "--dry-run", "metrics"],
                          cwd=tmp_path, capture_output=True, text=True, env=dict(os.environ, PYTHONPATH=str(REPO)))
    assert proc.returncode == 0, proc.stderr
    job_id = re.search(r"as slurm job (\d+)", proc.stdout).group(1)
    job = submitit.SlurmJob(folder=tmp_path / ".snakemake" / "launcher", job_id=job_id)
    assert job.result() == 0  # the controller's Snakemake exited 0
    controller_log = Path(job.paths.stdout).read_text() + Path(job.paths.stderr).read_text()
    assert "This was a dry-run" in controller_log
    assert re.search(r"^train_circle_ppo_p0\s+1$", controller_log, flags=re.M)
    assert re.search(r"^train_circle_ppo_lag_p0\s+1$", controller_log, flags=re.M)
