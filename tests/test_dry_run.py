"""Planning only reads: `snakemake -n` leaves the sweep's folder (results-tiny/ for `tiny`) as it was (every file's bytes and mtime,
every folder's mtime) while still planning the missing, half-written and stale runs; and a
pack's job that starts after its pack was finished (by an orphaned job of a killed controller)
finds its rule and trains nothing.

The run folders are written without training (tests/fake_runs.py), so these tests take seconds."""
from __future__ import annotations

import hashlib
import json
import os
import subprocess
import sys
from pathlib import Path

import yaml

from runs import runfolder
from fake_runs import complete_run, tiny_config
from runs import run_layout
from workflow import plan

REPO = Path(__file__).resolve().parent.parent
TINY_RUNS = [(b, a, s) for b in (15, 25) for a in ("ppo", "ppo_lag") for s in (0, 1)]  # task circle
TINY = "results-tiny"  # the tiny preset's own results folder (workflow.sweep)


def tiny_sweep_folder(root: Path) -> None:
    """The tiny preset's eight runs written complete, each with its spec.json."""
    from workflow import config_validation as cv

    cfg = cv.resolve({"preset": "tiny"})
    for bound, algo, seed in TINY_RUNS:
        folder = complete_run(run_layout.run_dir(root, "circle", bound, algo, seed, TINY), "circle", float(bound), algo,
                              seed)
        runfolder.write_spec(folder, cv.run_spec(cfg, "circle", bound, algo, seed))


def state_of(folder: Path) -> dict:
    """Every path under `folder` but Snakemake's own .snakemake/: a file's sha256 and mtime, a
    folder's mtime (in ns)."""
    state = {}
    for path in sorted(folder.rglob("*")):
        if ".snakemake" in path.relative_to(folder).parts:
            continue
        st = path.stat()
        digest = hashlib.sha256(path.read_bytes()).hexdigest() if path.is_file() else "dir"
        state[str(path.relative_to(folder))] = (digest, st.st_mtime_ns)
    return state


def trained(jobs) -> list[str]:
    return sorted(os.path.dirname(o)[len(f"{TINY}/runs") + 1:]
                  for j in jobs if j.rule.startswith("train_") for o in j.outputs if o.endswith(run_layout.RUN_JSON))


def test_a_dry_run_of_a_half_finished_sweep_changes_nothing_in_results(tmp_path):
    tiny_sweep_folder(tmp_path)
    missing = run_layout.run_dir(tmp_path, "circle", 25, "ppo", 1, TINY)
    for name in run_layout.RUN_FILES:  # a run that never trained: only its spec.json
        (missing / name).unlink()
    (run_layout.run_dir(tmp_path, "circle", 15, "ppo", 0, TINY) / run_layout.RUN_JSON).unlink()  # half-written
    stale = run_layout.run_dir(tmp_path, "circle", 15, "ppo_lag", 1, TINY)  # trained for a spec that changed since
    meta = json.loads((stale / run_layout.RUN_JSON).read_text())
    meta["config"]["total_steps"] += 1
    (stale / run_layout.RUN_JSON).write_text(json.dumps(meta))
    os.utime(stale / run_layout.SPEC, ns=(1, 1))  # older than every run file: mtimes alone say "up to date"
    # another config (the case: every spec changes), for the second dry run below
    (tmp_path / "b.yaml").write_text(yaml.safe_dump({"preset": "tiny", "train": {"total_steps": 8192}}))
    before = state_of(tmp_path)

    jobs = plan.dry_run(tmp_path, ["--config", "preset=tiny"])
    assert trained(jobs) == ["circle/d15/ppo/seed0", "circle/d15/ppo_lag/seed1", "circle/d25/ppo/seed1"]
    assert state_of(tmp_path) == before

    # another config plans every run (in place: no results_dir) and still writes nothing
    jobs = plan.dry_run(tmp_path, ["--configfile", str(tmp_path / "b.yaml")])
    assert len(trained(jobs)) == 8
    assert state_of(tmp_path) == before


def test_the_flag_of_a_stale_run_changes_with_its_folder(tmp_path):
    """A flag left behind by a killed job never stands for a later state of the same run."""
    from workflow import packs

    run = run_layout.run_id("circle", 25, "ppo", 0)
    spec = {"preset": "cpu", "config": tiny_config("circle", 25.0, "ppo", 0)}
    assert packs.stale_flag(run, spec, tmp_path) is None  # no run.json: Snakemake sees it missing
    folder = complete_run(run_layout.run_dir(tmp_path, "circle", 25, "ppo", 0))
    first = packs.stale_flag(run, spec, tmp_path)
    assert first.startswith(f"{packs.STALE_DIR}/{run}.") and first == packs.stale_flag(run, spec, tmp_path)
    assert packs.stale_flag(run, spec, tmp_path, TINY) is None  # another sweep's folder: no run.json there
    assert packs.stale_flag(run, {**spec, "preset": "paper"}, tmp_path) != first
    complete_run(folder, cost=3.0)  # retrained: a new run.json
    assert packs.stale_flag(run, spec, tmp_path) != first


def test_a_pack_job_started_after_its_pack_finished_trains_nothing(tmp_path):
    """What a job of a relaunched sweep does when it re-reads the workflow (Snakemake runs each
    job as `snakemake --target-jobs RULE:`) and an orphaned job has finished its pack since."""
    tiny_sweep_folder(tmp_path)
    before = state_of(tmp_path / TINY / "runs")
    proc = subprocess.run([sys.executable, "-m", "snakemake", "--snakefile", str(REPO / "Snakefile"), "--cores", "1",
                           "--target-jobs", "train_circle_ppo_lag_p0:", "--allowed-rules", "train_circle_ppo_lag_p0",
                           "--config", "preset=tiny"], cwd=tmp_path, capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, proc.stdout[-2000:] + proc.stderr[-2000:]
    assert state_of(tmp_path / TINY / "runs") == before
    log = tmp_path / TINY / "logs" / "train" / "circle_ppo_lag_p0.log"
    assert "nothing pending" in log.read_text()


def test_the_first_pending_pack_of_each_shared_program_is_planned_to_go_first(tmp_path):
    """On the CPU the simple-form algorithms share one program per task (algos.registry.program_algos):
    one pack per task compiles it first (its rule's priority), the others find it in the cache."""
    from workflow import config_validation as cv
    from workflow import packs

    cfg = cv.resolve({"preset": "default"})
    planned = packs.plan(cfg, tmp_path)
    assert len(planned) == 16 and {p.program for p in planned} == {f"{t}/ppo+ppo_lag+p3o+focops" for t in cfg["tasks"]}
    assert packs.compiles_first(planned) == {f"{t}_ppo_p0" for t in cfg["tasks"]}
    done = [p._replace(pending=()) if p.name == "goal_ppo_p0" else p for p in planned]  # goal's PPO pack finished
    assert packs.compiles_first(done) == {"goal_ppo_lag_p0"} | {f"{t}_ppo_p0" for t in cfg["tasks"] if t != "goal"}
    zoo = packs.plan(cv.resolve({"preset": "zoo"}), tmp_path)
    assert {p.program for p in zoo if p.name.startswith("circle_")} == {
        "circle/ppo+ppo_lag+p3o+focops", "circle/ppo_pid", "circle/ppo_saute", "circle/crpo", "circle/cpo"}
