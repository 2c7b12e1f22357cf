"""Training curves (runs/curves.py, runs/wandb_runs.py): every run folder's TensorBoard event
files read back with one point per logged iterate, equal to its trace.parquet and
episodes.parquet; a run resumed after lost work continues its curve with no gap and no
duplicate; the sweep's `curves` key reaches the job and retrains nothing; a W&B offline run
is written per run with no network."""
from __future__ import annotations

import glob
import json
import os
import shutil
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
from tensorboard.backend.event_processing.event_accumulator import EventAccumulator

from algos.config import make_config
from runs import runfolder, train
from runs.curves import event_files
from runs.pack import Member
from workflow import plan, sweep
from workflow.config_validation import resolve

pytestmark = pytest.mark.slow
# tiny circle runs: 4 envs, T = 64, 16 updates in chunks of 4 (one compiled program for every test here)
KW = dict(task="circle", algo="ppo_lag", total_steps=16 * 2048, num_envs=4, episode_length=64, eval_episodes=4)


def config(bound=15.0, seed=0):
    return make_config("cpu", dict(KW, bound=bound, seed=seed), ["chunk_updates=4"])


def curves(folder) -> dict[str, list[tuple[int, float]]]:
    """tag -> [(step, value)] as TensorBoard reads the folder's event files (every point kept)."""
    events = EventAccumulator(str(folder), size_guidance={"scalars": 0})
    events.Reload()
    return {tag: [(e.step, e.value) for e in events.Scalars(tag)] for tag in events.Tags()["scalars"]}


def expected_curves(folder) -> dict[str, np.ndarray]:
    """What the run folder's tables say each curve is, one value per iterate (float32, as stored)."""
    trace = pd.read_parquet(os.path.join(folder, "trace.parquet"))
    episodes = pd.read_parquet(os.path.join(folder, "episodes.parquet"))
    train_rows = episodes[episodes.phase == "train"]
    bound = float(episodes.bound.iloc[0])
    violated = (train_rows.cost.astype(np.float64) > bound).groupby(train_rows.iteration).mean()
    assert list(trace.iteration) == list(violated.index) == list(range(len(trace)))
    return {"train/return": trace.mean_return.to_numpy(np.float32), "train/cost": trace.mean_cost.to_numpy(np.float32),
            "train/V": violated.to_numpy(np.float32)}


def assert_curves_match_tables(folder) -> None:
    got = curves(folder)
    for tag, values in expected_curves(folder).items():
        assert [s for s, _ in got[tag]] == list(range(len(values))), tag  # one point per iterate, in order
        np.testing.assert_array_equal(np.float32([v for _, v in got[tag]]), values, err_msg=tag)
    episodes = pd.read_parquet(os.path.join(folder, "episodes.parquet"))
    last = len(expected_curves(folder)["train/return"]) - 1
    for phase in ("final_explore", "final_greedy"):
        rows = episodes[episodes.phase == phase]
        assert got[f"{phase}/V"] == [(last, np.float32((rows.cost.astype(np.float64) > rows.bound).mean()))]
        assert got[f"{phase}/return"] == [(last, np.float32(rows["return"].astype(np.float64).mean()))]
        assert got[f"{phase}/cost"] == [(last, np.float32(rows.cost.astype(np.float64).mean()))]


def test_every_run_of_the_tiny_sweep_has_its_curves_equal_to_its_tables(tiny_sweep):
    folders = sorted(glob.glob(str(tiny_sweep / "results-tiny" / "runs" / "*" / "*" / "*" / "*")))
    assert len(folders) == 8
    for folder in folders:
        assert len(event_files(folder)) == 1, folder
        assert_curves_match_tables(folder)
        tags = set(curves(folder))
        assert {"train/length", "train/steps_per_s", "loss/policy_loss", "loss/action_std"} <= tags
        assert ("train/multiplier" in tags) == ("/ppo_lag/" in folder)


def test_a_run_resumed_after_lost_work_continues_its_curve_with_no_gap_and_no_duplicate(tmp_path):
    whole, resumed = str(tmp_path / "whole"), str(tmp_path / "resumed")
    assert train.run(config(), whole, quiet=True) == 0
    # a first attempt stops after one chunk; a second trains one more chunk and checkpoints it,
    # then that checkpoint is lost: the folder holds events of iterates past its checkpoint
    assert train.run(config(), resumed, quiet=True, stop_after_chunks=1) == train.EXIT_TEMPFAIL
    kept = tmp_path / "checkpoint-after-one-chunk"
    shutil.copytree(os.path.join(resumed, "checkpoint"), kept)
    assert train.run(config(), resumed, quiet=True, stop_after_chunks=1) == train.EXIT_TEMPFAIL
    ahead = max(s for s, _ in curves(resumed)["train/return"])
    shutil.rmtree(os.path.join(resumed, "checkpoint"))
    shutil.copytree(kept, os.path.join(resumed, "checkpoint"))
    earlier = set(event_files(resumed))
    assert train.run(config(), resumed, quiet=True) == 0
    assert json.load(open(os.path.join(resumed, "run.json")))["restarts"] == 1  # resumed from the first stop
    assert_curves_match_tables(resumed)
    assert ahead < len(expected_curves(resumed)["train/return"]) - 1
    assert earlier and not earlier & set(event_files(resumed))  # the earlier attempts' files were replaced
    for tag, points in curves(whole).items():  # the same curve as the uninterrupted run's
        if tag != "train/steps_per_s":  # timings differ
            assert curves(resumed)[tag] == points, tag


def test_the_curves_key_reaches_the_job_and_changes_no_run(tmp_path):
    tiny = resolve({"preset": "tiny"})
    assert sweep.curve_flags(tiny) == []  # TensorBoard on, W&B off: the defaults
    changed = resolve({"preset": "tiny", "curves": {"tensorboard": False, "wandb": {"enabled": True}}})
    assert sweep.curve_flags(changed) == ["--no-tensorboard", "--wandb", "offline", "--wandb-project", "saferl-eval",
                                          "--wandb-group", f"tiny-{sweep.training_hash(tiny)}"]
    assert sweep.training_hash(changed) == sweep.training_hash(tiny) and changed["specs"] == tiny["specs"]
    online = resolve({"preset": "tiny", "curves": {"wandb": {"enabled": True, "mode": "online", "group": "g",
                                                             "entity": "lab"}}})
    assert sweep.curve_flags(online)[1:] == ["online", "--wandb-project", "saferl-eval", "--wandb-group", "g",
                                             "--wandb-entity", "lab"]


def test_turning_logging_on_in_a_finished_sweep_retrains_nothing(tiny_sweep, tmp_path):
    config_file = tmp_path / "curves.yaml"
    config_file.write_text("preset: tiny\ncurves: {tensorboard: false, wandb: {enabled: true, mode: online}}\n")
    jobs = plan.dry_run(tiny_sweep, ["--configfile", str(config_file)])
    assert not [j.rule for j in jobs if j.rule.startswith(("train_", "summarise_", "aggregate", "tiers"))]


@pytest.fixture
def offline_wandb(tmp_path, monkeypatch):
    """W&B with no network: offline mode, its folders in tmp_path."""
    for name in ("WANDB_DIR", "WANDB_CONFIG_DIR", "WANDB_CACHE_DIR", "WANDB_DATA_DIR"):
        monkeypatch.setenv(name, str(tmp_path / name.lower()))
        os.makedirs(tmp_path / name.lower())
    monkeypatch.setenv("WANDB_MODE", "offline")
    monkeypatch.setenv("WANDB_SILENT", "true")
    monkeypatch.delenv("WANDB_API_KEY", raising=False)


def wandb_runs(folder) -> list[bytes]:
    return [Path(p).read_bytes() for p in glob.glob(os.path.join(folder, "wandb", "offline-run-*", "run-*.wandb"))]


def test_the_sweep_job_writes_an_offline_wandb_run_per_run(tmp_path, offline_wandb, monkeypatch):
    from workflow import train_job

    flags = sweep.curve_flags(resolve({"preset": "tiny", "curves": {"tensorboard": False,
                                                                    "wandb": {"enabled": True}}}))
    folders = [tmp_path / "runs" / "circle" / f"d{b}" / "ppo_lag" / "seed0" for b in (15, 25)]
    for folder, bound in zip(folders, (15.0, 25.0)):
        runfolder.write_spec(folder, runfolder.spec_of("cpu", config(bound)))
    monkeypatch.setenv("PYTHONPATH", str(Path(__file__).resolve().parent.parent))
    with pytest.raises(SystemExit) as done:
        train_job.main([*flags, *(str(f / "spec.json") for f in folders)])
    assert done.value.code == 0
    for folder, bound in zip(folders, ("15", "25")):
        (data,) = wandb_runs(folder)  # one offline run per run
        iterates = json.load(open(folder / "run.json"))["iterates"]
        assert data.count(b"train/return") >= iterates and f"circle/d{bound}/ppo_lag/seed0".encode() in data
        assert b"final_greedy/V" in data and f"tiny-{sweep.training_hash(resolve({'preset': 'tiny'}))}".encode() in data
        assert not event_files(str(folder))  # --no-tensorboard


def test_the_trainer_refuses_wandb_it_cannot_import_before_training(tmp_path, monkeypatch, capsys):
    import builtins

    real_import = builtins.__import__

    def no_wandb(name, *args, **kwargs):
        if name == "wandb":
            raise ImportError("No module named 'wandb'")
        return real_import(name, *args, **kwargs)

    monkeypatch.setattr(builtins, "__import__", no_wandb)
    out = tmp_path / "run"
    status = train.main(["--task", "circle", "--bound", "15", "--algo", "ppo_lag", "--seed", "0", "--out", str(out),
                         "--wandb", "offline"])
    assert status == 1 and not (out / "checkpoint").exists()
    assert 'pip install -e ".[wandb]"' in capsys.readouterr().err
    assert "wandb" in json.load(open(out / "failure.json"))["error"]


def test_the_host_logs_newest_rows_are_the_whole_logs_tail():
    from runs.pack import HostLog

    rng = np.random.default_rng(0)
    start = {k: rng.normal(size=(3, *shape)).astype(dtype) for k, (shape, dtype) in
             {"update": ((), np.int32), "step": ((), np.int32), "ret": ((2,), np.float32), "cost": ((2,), np.float32),
              "length": ((2,), np.int32), "multiplier": ((), np.float32), "metrics": ((6,), np.float32),
              "state": ((1,), np.float32), "wall_time": ((), np.float64)}.items()}
    host = HostLog(2, start, num_state=1)  # a checkpoint's 3 iterates, then chunks of 2, 0 and 4
    for count in (2, 0, 4):
        chunk = {k: rng.normal(size=(5, *v.shape[1:])).astype(v.dtype) for k, v in start.items()}
        host.append(chunk, count, chunk["wall_time"][:count])
    assert host.count == 9
    tails = [host.since(first) for first in range(11)]  # from the parts as the chunks left them
    whole = host.arrays()
    for first, tail in enumerate(tails):
        for k, v in whole.items():
            np.testing.assert_array_equal(tail[k], v[first:], err_msg=f"{k} since {first}")
            assert tail[k].dtype == v.dtype and tail[k].shape[1:] == v.shape[1:]
    np.testing.assert_array_equal(host.since(4)["ret"], whole["ret"][4:])  # and once compacted
