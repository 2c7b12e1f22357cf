"""Fault injection: every fault of issue 10 is either repaired by a rerun or refused up front
with a message naming the key, file or run, and no fault leaves a half-written output.

Items (docs/workflow.md, "Faults and what happens"): 1 identity fields through `set`; 2 half-
written run folders; 3 config values the trainer would refuse; 4 corrupt checkpoints; 5 non-
finite aggregates; 6 int64-extreme seeds; 7 launcher paths with spaces; 8 one-line errors;
9 SLURM retries, memory, stopping before the limit, one job per run folder; 10 code version.
Tests that train are marked slow (they share one small compiled program).
"""
from __future__ import annotations

import fnmatch
import json
import os
import shutil
import socket
import subprocess
import sys
import time
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
import yaml

from algos import programs
from runs import checkpoint, runfolder
from runs import run_layout
from runs.curves import EVENTS_GLOB
from algos.config import IDENTITY_FIELDS, config_from_dict, make_config
from fake_runs import complete_run
from metrics import cli as metrics_cli
from workflow import config_validation as cv
from runs import runlock
from workflow import launch, plan, status, train_job

REPO = Path(__file__).resolve().parent.parent
PY = sys.executable


def run_module(module: str, *args: str, env: dict | None = None, cwd=REPO) -> subprocess.CompletedProcess:
    return subprocess.run([PY, "-m", module, *args], cwd=cwd, capture_output=True, text=True,
                          env=dict(os.environ, PYTHONPATH=str(REPO), **(env or {})), timeout=600)


def one_line_error(proc: subprocess.CompletedProcess) -> str:
    """The stderr of a refusal: no traceback."""
    assert "Traceback" not in proc.stderr, proc.stderr
    return proc.stderr


def files_in(folder: Path) -> set[str]:
    return {p.name for p in folder.iterdir()} if folder.exists() else set()


# ---- 1: identity fields cannot be set through `set` --------------------------------------------

@pytest.mark.parametrize("field", IDENTITY_FIELDS)
def test_identity_fields_are_refused_by_the_trainers_set(field):
    with pytest.raises(ValueError, match=f"--set {field}=.*part of the run's identity.*--{field}"):
        make_config("cpu", dict(task="circle", bound=15.0, algo="ppo", seed=1), [f"{field}=0"])


def test_train_job_with_set_seed_and_bound_writes_nothing(tmp_path):
    out = tmp_path / "run"
    proc = run_module("runs.train", "--task", "circle", "--bound", "15", "--algo", "ppo_lag", "--seed", "1",
                      "--out", str(out), "--preset", "cpu", "--total-steps", "4096", "--num-envs", "4",
                      "--episode-length", "64", "--eval-episodes", "4", "--set", "seed=0", "--set", "bound=99")
    assert proc.returncode == 2
    assert "--set seed=0: seed is part of the run's identity" in one_line_error(proc)
    assert files_in(out) == {run_layout.FAILURE_RECORD}  # no episodes, no run.json


@pytest.mark.parametrize("field", IDENTITY_FIELDS)
def test_config_check_refuses_identity_fields_in_train_set(field):
    with pytest.raises(cv.ConfigError, match=f"config key 'train.set.{field}'.*identity"):
        cv.resolve({"preset": "tiny", "train": {"set": {field: 0}}})


# ---- 2: a run is complete only when every file is present and consistent ------------------------

def test_run_json_alone_is_not_a_complete_run(tmp_path):
    run = complete_run(tmp_path / "run")
    assert runfolder.incomplete_reason(run) is None
    (run / run_layout.EPISODES).unlink()
    assert runfolder.incomplete_reason(run) == "episodes.parquet missing"
    run = complete_run(tmp_path / "other")
    meta = json.loads((run / run_layout.RUN_JSON).read_text())
    meta["files"][run_layout.TRACE]["rows"] += 1  # a trace from another write
    (run / run_layout.RUN_JSON).write_text(json.dumps(meta))
    assert "trace.parquet has 2 rows, run.json recorded 3" == runfolder.incomplete_reason(run)
    size = (run / run_layout.TRACE).stat().st_size
    (run / run_layout.TRACE).write_bytes(b"\0" * size)  # zeroed, same size
    assert runfolder.incomplete_reason(run).startswith("trace.parquet unreadable")


def test_status_and_the_trainer_agree_a_half_written_run_is_not_done(tmp_path):
    cfg = cv.resolve({"preset": "tiny", "bounds": [25], "algos": ["ppo"], "seeds": [0, 1]})
    runs = tmp_path / "results-tiny" / "runs" / "circle" / "d25" / "ppo"
    complete_run(runs / "seed0", bound=25, seed=0)
    complete_run(runs / "seed1", bound=25, seed=1)
    (runs / "seed1" / run_layout.EPISODES).unlink()
    (runs / "seed1" / run_layout.JOB_MARKER).write_text(json.dumps({"host": "elsewhere", "pid": 1}))
    got = status.sweep_status(cfg, tmp_path, slurm_jobs=None)
    assert [s.state for s in got] == ["done", "failed"]
    assert "incomplete: episodes.parquet missing" in got[1].detail


def _fake_sweep(workdir: Path, bounds=(15, 25)) -> None:
    """A tiny-preset sweep folder whose runs are complete (no training)."""
    cfg = cv.resolve({"preset": "tiny"})
    for task, bound, algo, seed in status.run_keys(cfg):
        if bound in bounds:
            complete_run(run_layout.run_dir(workdir, task, bound, algo, seed, "results-tiny"), task, float(bound), algo,
                         seed)


def trained_runs(jobs) -> list[str]:
    """run.json paths that the planned pack jobs train."""
    return sorted(o for j in jobs if j.rule.startswith("train_") for o in j.outputs if o.endswith("run.json"))


def test_the_workflow_asks_for_every_run_file_and_plans_exponent_bounds(tmp_path):
    """Item 2 (a run with run.json but no episodes.parquet is retrained, alone in its pack's
    job), item 3 (a bound whose float text has an exponent gets a plain label) and a changed
    spec (another budget) retraining exactly the runs it changes, in one dry run each."""
    _fake_sweep(tmp_path, bounds=(15, 25))
    (run_layout.run_dir(tmp_path, "circle", 25, "ppo", 1, "results-tiny") / run_layout.EPISODES).unlink()
    jobs = plan.dry_run(tmp_path, ["runs", "--config", "preset=tiny"])
    assert [(j.rule, trained_runs([j])) for j in jobs if j.rule.startswith("train_")] == \
        [("train_circle_ppo_p0", ["results-tiny/runs/circle/d25/ppo/seed1/run.json"])]

    (tmp_path / "small.yaml").write_text(yaml.safe_dump({"preset": "tiny", "bounds": [15, 0.00001]}))
    jobs = plan.dry_run(tmp_path, ["runs", "--configfile", str(tmp_path / "small.yaml")])
    assert trained_runs(jobs) == sorted(f"results-tiny/runs/circle/d0.00001/{a}/seed{s}/run.json"
                                        for a in ("ppo", "ppo_lag") for s in (0, 1))

    (tmp_path / "budget.yaml").write_text(yaml.safe_dump({"preset": "tiny", "algos": ["ppo_lag"],
                                                          "train": {"total_steps": 8192}}))
    jobs = plan.dry_run(tmp_path, ["runs", "--configfile", str(tmp_path / "budget.yaml")])
    assert trained_runs(jobs) == sorted(f"results-tiny/runs/circle/d{b}/ppo_lag/seed{s}/run.json"
                                        for b in (15, 25) for s in (0, 1))


# ---- 3: what the trainer would refuse is refused before any job starts -------------------------

@pytest.mark.parametrize("override, key, words", [
    ({"thresholds": {"moderate": {"V": float("nan")}}}, "thresholds.moderate.V", "finite"),
    ({"thresholds": {"minimal": {"Dnorm": float("inf")}}}, "thresholds.minimal.Dnorm", "finite"),
    ({"thresholds": {"modrate": {"V": 0.3}}}, "thresholds.modrate", "unknown tier 'modrate'"),
    ({"seeds": [0, 2**31]}, "seeds[1]", "must be < 2**31"),
    ({"seeds": 2**31 + 1}, "seeds", "largest seed"),
    ({"train": {"num_envs": 3}}, "train.num_envs", "must divide"),
    ({"train": {"set": {"learning_rte": 0.1}}}, "train.set.learning_rte", "unknown config field"),
    ({"train": {"set": {"policy_hidden": "a,b"}}}, "train.set.policy_hidden", "comma-separated integers"),
    ({"train": {"set": {"env.reward_distanse_scale": 1.0}}}, "train.set.env.reward_distanse_scale",
     "unknown option(s) ['reward_distanse_scale']"),
])
def test_config_check_refuses_what_the_trainer_would_refuse_naming_the_key(override, key, words):
    with pytest.raises(cv.ConfigError) as err:
        cv.resolve({"preset": "tiny", **override})
    assert f"'{key}'" in str(err.value) and words in str(err.value)


def test_bound_labels_never_use_an_exponent():
    assert [run_layout.bound_label(b) for b in (25, 12.5, 1e-05, 1e20, 0.1)] == \
        ["25", "12.5", "0.00001", "100000000000000000000", "0.1"]
    assert cv.resolve({"preset": "tiny", "bounds": [1e-05]})["bounds"] == [1e-05]


def test_run_of_path_inverts_run_dir():
    for task, bound, algo, seed in [("goal", 6.25, "ppo_lag", 3), ("circle", 1e-05, "ppo", 0), ("push", 25, "p3o", 2**31 - 1)]:
        path = run_layout.run_dir("/x/sweep", task, bound, algo, seed) / run_layout.TRACE
        assert run_layout.run_of_path(path) == {"task": task, "bound": bound, "algo": algo, "seed": seed}
    with pytest.raises(ValueError, match="results/trace.parquet: expected a file of a run folder"):
        run_layout.run_of_path("results/trace.parquet")


def test_snakemake_refuses_a_bad_config_before_any_job(tmp_path):
    (tmp_path / "bad.yaml").write_text(yaml.safe_dump({"preset": "tiny", "train": {"set": {"seed": 0}}}))
    with pytest.raises(RuntimeError, match="config key 'train.set.seed'"):
        plan.dry_run(tmp_path, ["--configfile", str(tmp_path / "bad.yaml")])
    assert files_in(tmp_path) <= {"bad.yaml", ".snakemake"}


# ---- 4: corrupt checkpoints ----------------------------------------------------------------------

def _two_generations(folder: Path):
    import jax.numpy as jnp

    states = [{"w": jnp.full((3,), float(g), jnp.float32)} for g in (0, 1)]
    for g, state in enumerate(states):
        checkpoint.save(str(folder), state, {"ret": np.full(2, g, np.float32)}, {"config": {"a": 1}})
    import jax

    return jax.eval_shape(lambda: states[0])


@pytest.mark.parametrize("damage", ["truncate", "zero", "delete"])
def test_a_corrupt_newest_checkpoint_falls_back_to_the_previous_one_and_says_so(tmp_path, damage):
    template = _two_generations(tmp_path)
    newest = tmp_path / "state-1.npz"
    if damage == "truncate":
        newest.write_bytes(newest.read_bytes()[: newest.stat().st_size // 2])
    elif damage == "zero":
        newest.write_bytes(b"\0" * newest.stat().st_size)
    else:
        newest.unlink()
    heard = []
    state, host, meta = checkpoint.load(str(tmp_path), template, {"a": 1}, warn=heard.append)
    assert meta["generation"] == 0 and float(state["w"][0]) == 0.0 and host["ret"][0] == 0
    assert len(heard) == 1 and "newest checkpoint unusable" in heard[0] and "generation 0" in heard[0]
    assert checkpoint.inspect(str(tmp_path), {"a": 1}).fallback
    # the next save replaces the broken generation, never the one resumed from
    checkpoint.save(str(tmp_path), state, host, {"config": {"a": 1}}, keep=meta["arrays"])
    assert checkpoint.load(str(tmp_path), template, {"a": 1})[2]["generation"] == 2
    assert checkpoint.load_meta(str(tmp_path))["arrays"] == "state-1.npz"


def test_no_usable_checkpoint_names_the_folder_and_the_remedy(tmp_path):
    template = _two_generations(tmp_path)
    for slot in (0, 1):
        (tmp_path / f"state-{slot}.npz").write_bytes(b"junk")
    with pytest.raises(checkpoint.CheckpointError) as err:
        checkpoint.load(str(tmp_path), template, {"a": 1})
    assert str(err.value).startswith(f"{tmp_path}: no usable checkpoint") and f"delete {tmp_path}" in str(err.value)
    assert not checkpoint.inspect(str(tmp_path), {"a": 1}).usable


def test_status_tells_what_the_rerun_does_with_a_checkpoint(tmp_path):
    """Usable, fallen back, unusable, and written by another config: four different lines."""
    import jax.numpy as jnp

    cfg = cv.resolve({"preset": "tiny", "bounds": [25], "algos": ["ppo"], "seeds": [0, 1, 2, 3]})
    identity = {s: checkpoint.identity_of(config_from_dict(cfg["specs"][run_layout.run_id("circle", 25, "ppo", s)]["config"]))
                for s in range(4)}
    runs = tmp_path / "results-tiny" / "runs" / "circle" / "d25" / "ppo"
    for seed in range(4):
        folder = runs / f"seed{seed}" / "checkpoint"
        config = dict(identity[seed], total_steps=999) if seed == 3 else identity[seed]
        for _ in range(2):
            checkpoint.save(str(folder), {"w": jnp.zeros(2)}, {}, {"config": config})
        (folder.parent / run_layout.JOB_MARKER).write_text(json.dumps({"host": "elsewhere", "pid": 1}))
    (runs / "seed1" / "checkpoint" / "state-1.npz").unlink()
    for slot in (0, 1):
        (runs / "seed2" / "checkpoint" / f"state-{slot}.npz").write_bytes(b"")
    details = [s.detail for s in status.sweep_status(cfg, tmp_path, slurm_jobs=None)]
    assert "checkpoint generation 1 usable; the rerun resumes from it" in details[0]
    assert "checkpoint generation 0 usable (newer one unreadable" in details[1]
    assert "no usable checkpoint" in details[2] and "delete" in details[2]
    assert "different config (fields ['total_steps'])" in details[3] and "delete" in details[3]


# ---- 5: non-finite aggregates ---------------------------------------------------------------------

def _episodes_csv(path: Path, seeds=(0, 1), cost=10.0, bound=25.0, drop=None) -> Path:
    rows = [dict(task="goal", bound=bound, algo="ppo", seed=s, phase=ph, iteration=0, episode=e,
                 **{"return": 1.0}, cost=cost)
            for s in seeds for ph in ("train", "final_explore", "final_greedy") for e in range(3)]
    frame = pd.DataFrame(rows)
    if drop is not None:
        frame = frame[~drop(frame)]
    frame.to_csv(path, index=False)
    return path


@pytest.mark.parametrize("cost, bound, names", [(1e308, 25.0, "C=inf, Dnorm=inf"),
                                                (10.0, 1e-320, "Dnorm=inf, Dnorm_plus=inf")])
def test_non_finite_aggregates_are_an_error_naming_the_run(tmp_path, capsys, cost, bound, names):
    src = _episodes_csv(tmp_path / "ep.csv", cost=cost, bound=bound)
    assert metrics_cli.main(["evaluate", str(src), "--out", str(tmp_path / "out"), "--reps", "20"]) == 2
    err = capsys.readouterr().err
    assert "error: non-finite metric values for task=goal" in err and "algo=ppo, seed=0, phase=train" in err
    assert names in err
    assert not (tmp_path / "out").exists()


# ---- 6: int64-extreme seeds ------------------------------------------------------------------------

def test_int64_extreme_seeds_are_not_reported_as_duplicates(tmp_path, capsys):
    lo, hi = int(np.iinfo(np.int64).min), int(np.iinfo(np.int64).max)
    src = _episodes_csv(tmp_path / "ep.csv", seeds=(lo, hi))
    assert metrics_cli.main(["summarise", str(src), "--out", str(tmp_path / "s.parquet")]) == 0
    from metrics.summary import read_summary

    assert sorted(set(read_summary(tmp_path / "s.parquet").runs["seed"])) == [lo, hi]


# ---- 7: the launcher quotes the checkout's path ------------------------------------------------------

def test_launcher_exports_a_pythonpath_with_spaces_intact():
    repo = Path("/tmp/my checkout/with 'quote'/saferl-eval")
    args = launch.main.__globals__["argparse"].Namespace(hours=1, cpus=1, mem_gb=1, partition=None, account=None)
    setup = launch.executor_parameters(args, repo)["slurm_setup"]
    out = subprocess.run(["bash", "-c", "; ".join(setup) + '; printf %s "$PYTHONPATH"'], capture_output=True,
                         text=True, env={"PATH": os.environ["PATH"]})
    assert out.returncode == 0 and out.stdout == str(repo)


# ---- 8: one-line errors ---------------------------------------------------------------------------

def test_metrics_cli_gives_one_line_errors(tmp_path, capsys):
    good = _episodes_csv(tmp_path / "ep.csv")
    (tmp_path / "afile").write_text("x")
    cases = [
        (["evaluate", str(good), "--out", str(tmp_path / "afile")], "--out", "is a file, not a folder"),
        (["aggregate", str(tmp_path / "nothing.parquet"), "--out", str(tmp_path / "agg"),
          "--reps", str(10**11)], "", "cannot be read as a summary"),
    ]
    header = tmp_path / "header.csv"
    header.write_text("task,bound,algo,seed,phase,iteration,episode,return,cost\n")
    cases.append((["summarise", str(header), "--out", str(tmp_path / "h.parquet")], str(header),
                  "has no episode rows"))
    zero = _episodes_csv(tmp_path / "zero.csv", bound=0.0)
    cases.append((["summarise", str(zero), "--out", str(tmp_path / "z.parquet")], str(zero),
                  "column bound must be finite and > 0 (found 0.0)"))
    for argv, first, words in cases:
        assert metrics_cli.main(argv) == 2
        err = capsys.readouterr().err
        assert err.startswith(f"error: {first}") and words in err and err.count("\n") == 1, err
    assert (tmp_path / "afile").read_text() == "x"
    assert not any(tmp_path.glob("*.parquet"))


def test_too_many_bootstrap_replicates_is_a_one_line_error(tmp_path, capsys):
    src = _episodes_csv(tmp_path / "ep.csv")
    assert metrics_cli.main(["summarise", str(src), "--out", str(tmp_path / "s.parquet")]) == 0
    for reps in (10**11, 10**19):
        assert metrics_cli.main(["aggregate", str(tmp_path / "s.parquet"), "--out", str(tmp_path / "agg"),
                                 "--reps", str(reps)]) == 2
        err = capsys.readouterr().err
        assert f"--reps {reps} is too many bootstrap replicates" in err and err.count("\n") == 1
    assert not (tmp_path / "agg").exists()


def test_a_corrupt_stage_folder_given_to_tiers_is_named(tmp_path, capsys):
    src = _episodes_csv(tmp_path / "ep.csv")
    assert metrics_cli.main(["evaluate", str(src), "--out", str(tmp_path / "m"), "--reps", "20"]) == 0
    (tmp_path / "m" / "bootstrap.parquet").write_bytes(b"not parquet")
    before = (tmp_path / "m" / "tiers.csv").read_text()
    assert metrics_cli.main(["tiers", str(tmp_path / "m")]) == 2
    err = capsys.readouterr().err
    assert err.startswith(f"error: {tmp_path / 'm' / 'bootstrap.parquet'}: cannot be read") and err.count("\n") == 1
    assert "saferl-eval aggregate" in err
    assert (tmp_path / "m" / "tiers.csv").read_text() == before  # left as it was


def test_a_seed_missing_from_a_final_phase_is_warned_about(tmp_path, capsys):
    src = _episodes_csv(tmp_path / "ep.csv", drop=lambda f: (f.seed == 1) & (f.phase == "final_greedy"))
    assert metrics_cli.main(["evaluate", str(src), "--out", str(tmp_path / "m"), "--reps", "20"]) == 0
    assert ("run task=goal, bound=25, algo=ppo, seed=1 has training episodes but no final_greedy episodes"
            in capsys.readouterr().err)


def test_trainer_refuses_an_out_that_is_a_file(tmp_path):
    (tmp_path / "f").write_text("keep")
    proc = run_module("runs.train", "--task", "circle", "--bound", "15", "--algo", "ppo", "--seed", "0",
                      "--out", str(tmp_path / "f"))
    assert proc.returncode == 2 and "is a file, not a folder" in one_line_error(proc)
    assert (tmp_path / "f").read_text() == "keep"


# ---- 9: SLURM: retries, memory, stopping in time, one job per run folder ------------------------

def test_slurm_profiles_grow_runtime_and_memory_per_attempt_and_rules_set_no_resources():
    for name in ("slurm", "slurm-local"):
        prof = yaml.safe_load((REPO / "cluster_profiles" / name / "config.yaml").read_text())
        # the training packs' resources are the defaults (their rules are named per pack)
        for res in (prof["default-resources"], {**prof["default-resources"], **prof["set-resources"]["aggregate"]}):
            runtime = [eval(str(res["runtime"]), {"attempt": a}) for a in (1, 2, 3)]
            mem = [eval(str(res["mem_mb"]), {"attempt": a}) for a in (1, 2, 3)]
            assert runtime == sorted(set(runtime)) and mem == sorted(set(mem)), (name, runtime, mem)
        assert prof["default-resources"]["gpu"] == 1 and prof["set-resources"]["aggregate"]["gpu"] == 0
    for smk in (REPO / "workflow" / "rules").glob("*.smk"):
        text = smk.read_text()
        assert "runtime=" not in text and "mem_mb=" not in text, smk


def tiny_spec(workdir: Path, task="circle", bound=25, algo="ppo", seed=0) -> str:
    """A tiny-preset run spec written into its run folder under `workdir`; returns its path."""
    folder = run_layout.run_dir(workdir, task, bound, algo, seed)
    runfolder.write_spec(folder, cv.run_spec(cv.resolve({"preset": "tiny"}), task, bound, algo, seed))
    return str(folder / run_layout.SPEC)


def test_a_retry_after_a_deterministic_failure_stops_at_once(tmp_path):
    args = [tiny_spec(tmp_path)]
    tmp_path = run_layout.run_dir(tmp_path, "circle", 25, "ppo", 0)
    (tmp_path / run_layout.FAILURE_RECORD).write_text(json.dumps({"error": "ValueError: bad option"}))
    proc = run_module("workflow.train_job", *args, "--attempt", "2")
    assert proc.returncode == 1
    assert "not retrying circle/d25/ppo/seed0" in proc.stderr and "ValueError: bad option" in proc.stderr
    # attempt 1 (a new invocation) tries again: here it gets past the gate to the fail switch
    proc = run_module("workflow.train_job", *args, "--attempt", "1", env={"SAFERL_FAIL_RUNS": "*"})
    assert proc.returncode == 1 and "fails on purpose" in proc.stderr and "not retrying" not in proc.stderr


def test_stop_time_is_well_before_the_slurm_limit(monkeypatch):
    now = 1_000_000.0
    assert train_job.stop_time(now + 3 * 3600, now) == now + 3 * 3600 - 600
    assert train_job.stop_time(now + 300, now) == now + 300 - 60  # short jobs: a fifth of the time left
    assert train_job.stop_time(None, now) is None
    monkeypatch.setenv("SLURM_JOB_END_TIME", "1700000000")
    assert train_job.slurm_end_time("123") == 1_700_000_000.0


def test_a_run_folder_is_owned_by_one_live_job(tmp_path):
    spec = tiny_spec(tmp_path)
    tmp_path = run_layout.run_dir(tmp_path, "circle", 25, "ppo", 0)
    sleeper = subprocess.Popen(["sleep", "60"])
    try:
        owner = {"host": socket.gethostname(), "pid": sleeper.pid, "proc_start": runlock._proc_start(sleeper.pid),
                 "slurm_job_id": None}
        (tmp_path / run_layout.JOB_MARKER).write_text(json.dumps(owner))
        with pytest.raises(runlock.RunFolderLocked, match=f"owned by pid {sleeper.pid} on .*, which still runs"):
            runlock.acquire(tmp_path, wait_s=0)
        proc = run_module("workflow.train_job", spec, env={"SAFERL_LOCK_WAIT_S": "0", "SAFERL_FAIL_RUNS": "*"})
        assert proc.returncode == 1 and "not starting a second trainer" in proc.stderr
        assert json.loads((tmp_path / run_layout.JOB_MARKER).read_text())["pid"] == sleeper.pid  # untouched
    finally:
        sleeper.kill()
        sleeper.wait()
    assert "stale lock of pid" in runlock.acquire(tmp_path, wait_s=0)  # its job has ended
    assert runlock.read_marker(tmp_path)["pid"] == os.getpid()
    assert not [p for p in tmp_path.iterdir() if p.name not in (run_layout.JOB_MARKER, run_layout.SPEC)]


def test_a_reused_pid_is_not_a_live_owner(tmp_path):
    marker = {"host": socket.gethostname(), "pid": os.getpid(), "proc_start": "1"}  # this pid, another start
    assert runlock.owner_alive(marker) is False
    assert runlock.owner_alive({"host": "elsewhere", "pid": 1}) is None  # cannot be checked here
    assert runlock.owner_alive({"slurm_job_id": "7"}, slurm_jobs={"7"}) is True


# ---- 10: code version --------------------------------------------------------------------------------

def test_code_version_follows_the_training_code(tmp_path):
    for package in programs.CODE_PACKAGES:
        (tmp_path / package).mkdir()
        (tmp_path / package / "a.py").write_text("x = 1\n")
    before = programs.code_version(tmp_path)
    (tmp_path / "envs" / "a.py").write_text("x = 2\n")
    assert programs.code_version(tmp_path) != before and len(before) == 16


def test_status_lists_runs_trained_by_older_code(tmp_path):
    runs = tmp_path / "results-tiny" / "runs" / "circle" / "d15" / "ppo"
    complete_run(runs / "seed0", bound=15, seed=0, code_version="0123456789abcdef")
    complete_run(runs / "seed1", bound=15, seed=1)
    proc = run_module("workflow.status", "--config", "preset=tiny", "bounds=[15]", "algos=[ppo]",
                      "--dir", str(tmp_path), "--outdated")
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.split() == [str(runs / "seed0" / run_layout.RUN_JSON)]
    proc = run_module("workflow.status", "--config", "preset=tiny", "bounds=[15]", "algos=[ppo]",
                      "--dir", str(tmp_path))
    assert "trained by older code (0123456789abcdef" in proc.stdout


# ---- the trainer itself (slow: one small compiled program) --------------------------------------

TINY = ["--task", "circle", "--bound", "15", "--algo", "ppo", "--seed", "0", "--preset", "cpu",
        "--total-steps", str(4 * 2048), "--num-envs", "4", "--episode-length", "64", "--eval-episodes", "4",
        "--set", "chunk_updates=1", "--set", "checkpoint_every_s=0"]


def train_cli(out: Path, *extra: str) -> int:
    from runs import train

    return train.main([*TINY, "--out", str(out), *extra])


@pytest.fixture(scope="module")
def reference(tmp_path_factory) -> Path:
    out = tmp_path_factory.mktemp("faults") / "reference"
    assert train_cli(out) == 0
    return out


def _episodes(out: Path) -> pd.DataFrame:
    return pd.read_parquet(out / run_layout.EPISODES)


@pytest.mark.slow
def test_run_json_records_rows_and_the_code_version(reference):
    meta = json.loads((reference / run_layout.RUN_JSON).read_text())
    assert meta["code_version"] == programs.code_version() and meta["code_versions"] == [meta["code_version"]]
    assert {name: f["rows"] for name, f in meta["files"].items()} == {
        run_layout.EPISODES: len(_episodes(reference)), run_layout.TRACE: len(pd.read_parquet(reference / run_layout.TRACE))}
    assert runfolder.incomplete_reason(reference) is None


@pytest.mark.slow
def test_the_trainer_retrains_a_run_whose_episodes_are_missing(reference, tmp_path, capfd):
    out = tmp_path / "half"
    shutil.copytree(reference, out)
    (out / run_layout.EPISODES).unlink()
    assert train_cli(out) == 0
    assert "incomplete (episodes.parquet missing); training it again" in capfd.readouterr().err
    pd.testing.assert_frame_equal(_episodes(out), _episodes(reference), check_exact=True)


@pytest.mark.slow
def test_the_trainer_resumes_from_the_previous_generation_when_the_newest_is_corrupt(reference, tmp_path, capfd):
    out = tmp_path / "resume"
    assert train_cli(out, "--stop-after-chunks", "2") == 75
    ckpt = out / run_layout.CHECKPOINT_DIR
    assert {"state-0.npz", "state-1.npz"} <= files_in(ckpt)
    newest = ckpt / checkpoint.load_meta(str(ckpt))["arrays"]
    newest.write_bytes(newest.read_bytes()[:100])  # truncated
    capfd.readouterr()
    assert train_cli(out) == 0
    err = capfd.readouterr().err
    assert "newest checkpoint unusable" in err and "resuming from the previous one, generation 0" in err
    pd.testing.assert_frame_equal(_episodes(out), _episodes(reference), check_exact=True)
    assert not ckpt.exists() and run_layout.FAILURE_RECORD not in files_in(out)


@pytest.mark.slow
def test_the_trainer_stops_with_one_line_when_no_checkpoint_is_usable(reference, tmp_path):
    out = tmp_path / "broken"
    assert train_cli(out, "--stop-after-chunks", "2") == 75
    for npz in (out / run_layout.CHECKPOINT_DIR).glob("*.npz"):
        npz.write_bytes(b"\0" * 64)
    proc = run_module("runs.train", *TINY, "--out", str(out))
    assert proc.returncode == 1
    err = one_line_error(proc)
    assert f"{out / 'checkpoint'}: no usable checkpoint" in err and f"delete {out / 'checkpoint'}" in err
    # nothing half-written; the progress of the interrupted attempt stays for workflow.status, and
    # its live curve (runs.curves: replaced by the host log's iterates when the run next opens)
    files = files_in(out)
    curves = {name for name in files if fnmatch.fnmatch(name, EVENTS_GLOB)}
    assert len(curves) == 1
    assert files - curves == {run_layout.CHECKPOINT_DIR, run_layout.FAILURE_RECORD, run_layout.JOB_MARKER,
                              run_layout.PROGRESS}
    assert "no usable checkpoint" in json.loads((out / run_layout.FAILURE_RECORD).read_text())["error"]


@pytest.mark.slow
def test_the_trainer_stops_before_its_stop_time(reference, tmp_path, capfd):
    out = tmp_path / "deadline"
    assert train_cli(out, "--stop-at", str(time.time())) == 75  # stops after the first chunk
    assert "before the stop time" in capfd.readouterr().err
    assert checkpoint.load_meta(str(out / run_layout.CHECKPOINT_DIR))["generation"] == 0
    assert train_cli(out) == 0
    pd.testing.assert_frame_equal(_episodes(out), _episodes(reference), check_exact=True)


@pytest.mark.slow
def test_a_resume_under_changed_code_is_recorded_and_listed_as_outdated(reference, tmp_path, capfd):
    out = tmp_path / "results/runs/circle/d15/ppo/seed0"
    assert train_cli(out, "--stop-after-chunks", "2") == 75
    ckpt = out / run_layout.CHECKPOINT_DIR
    for meta_file in ckpt.glob("*.json"):  # as if the first chunks were trained by other code
        meta = json.loads(meta_file.read_text())
        meta_file.write_text(json.dumps(dict(meta, code_versions=["0ld0ld0ld0ld0ld0"])))
    capfd.readouterr()
    assert train_cli(out) == 0
    assert "resumed under changed code: it was trained by code 0ld0ld0ld0ld0ld0" in capfd.readouterr().err
    meta = json.loads((out / run_layout.RUN_JSON).read_text())
    assert meta["code_versions"] == ["0ld0ld0ld0ld0ld0", programs.code_version()]
    pd.testing.assert_frame_equal(_episodes(out), _episodes(reference), check_exact=True)
    done = status.run_status(tmp_path, "circle/d15/ppo/seed0", None, socket.gethostname(),
                             code=programs.code_version())
    assert done.state == "done" and status.outdated([done]) == [done]
    assert "0ld0ld0ld0ld0ld0" in done.detail


@pytest.mark.slow
def test_the_trainer_takes_its_backend_and_cache_folder_from_the_command_line(tmp_path):
    """--backend builtin trains the built-in task; --cache-dir is where the compiled programs go."""
    cache = tmp_path / "cache"
    proc = run_module("runs.train", *TINY, "--backend", "builtin", "--cache-dir", str(cache),
                      "--out", str(tmp_path / "run"))
    assert proc.returncode == 0, proc.stderr[-2000:]
    assert json.loads((tmp_path / "run" / run_layout.RUN_JSON).read_text())["config"]["backend"] == "builtin"
    assert any(p.is_file() for p in cache.rglob("*"))
