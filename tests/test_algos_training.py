"""End-to-end tests of runs.train on the built-in goal task with the `cpu` preset.

The runs share two compiled programs (ppo_lag and ppo on goal, cpu preset): bound, seed and
budget are runtime values, so every run below reuses them. Budgets are the cpu preset's
(about 4e5 steps, two chunks of 100 updates) or one chunk of it.
"""
import json
import os
import re
import signal
import subprocess
import sys
import time

import jax.numpy as jnp
import numpy as np
import pandas as pd
import pytest

from runs import checkpoint, train
from algos.programs import compile_programs
from algos.config import make_config

pytestmark = pytest.mark.slow
ROOT = os.path.join(os.path.dirname(__file__), "..")
ONE_CHUNK = str(100 * 2048)  # total steps of one chunk of the cpu preset (100 updates of 2048 steps)


def cli(out, algo="ppo_lag", bound=25, seed=0, extra=()):
    argv = ["--task", "goal", "--bound", str(bound), "--algo", algo, "--seed", str(seed), "--out", str(out),
            *extra]
    return train.main(argv)


def episodes(out, phase=None):
    frame = pd.read_parquet(os.path.join(out, "episodes.parquet"))
    return frame if phase is None else frame[frame.phase == phase].reset_index(drop=True)


@pytest.fixture(scope="module")
def runs(tmp_path_factory):
    base = tmp_path_factory.mktemp("runs")
    paths = {name: base / name for name in ("lag", "ppo")}
    assert cli(paths["lag"], "ppo_lag", bound=15) == 0
    assert cli(paths["ppo"], "ppo", bound=15) == 0
    return paths


def test_run_folder_follows_the_episode_table_and_trace_contracts(runs):
    out = runs["lag"]
    frame = episodes(out)
    assert list(frame.columns) == ["task", "bound", "algo", "seed", "phase", "iteration", "episode", "return",
                                   "cost", "length"]
    cfg = make_config("cpu", dict(task="goal"))
    train_rows = frame[frame.phase == "train"]
    n_iter = train_rows.iteration.nunique()
    # an iterate every N*T steps (episodes end only by the time limit on goal)
    assert n_iter == cfg.num_updates * cfg.steps_per_update // (cfg.num_envs * cfg.episode_length)
    assert len(train_rows) == n_iter * cfg.num_envs and (train_rows.length == cfg.episode_length).all()
    for phase in ("final_explore", "final_greedy"):
        rows = frame[frame.phase == phase]
        assert len(rows) == cfg.eval_episodes and (rows.iteration == n_iter - 1).all()
    assert not frame.duplicated(["task", "bound", "algo", "seed", "phase", "iteration", "episode"]).any()
    assert (frame.bound == 15.0).all() and (frame.algo == "ppo_lag").all() and (frame.task == "goal").all()
    trace = pd.read_parquet(os.path.join(out, "trace.parquet"))
    for column in ("iteration", "env_steps", "wall_time", "multiplier", "policy_loss", "value_loss",
                   "cost_value_loss", "entropy", "approx_kl", "action_std"):
        assert column in trace.columns
    assert (trace.action_std > 0).all()  # the policy's sigma is softplus + 0.001
    assert len(trace) == n_iter and (np.diff(trace.env_steps) == cfg.num_envs * cfg.episode_length).all()
    assert (np.diff(trace.wall_time) > 0).all() and (trace.multiplier >= 0).all()
    np.testing.assert_allclose(trace.mean_cost, train_rows.groupby("iteration").cost.mean(), rtol=1e-6)
    meta = json.load(open(os.path.join(out, "run.json")))
    assert meta["complete"] and meta["env_steps"] == cfg.num_updates * cfg.steps_per_update
    assert not os.path.exists(os.path.join(out, "checkpoint"))
    assert pd.read_parquet(os.path.join(runs["ppo"], "trace.parquet")).multiplier.isna().all()


def test_ppo_learns_and_ppo_lag_trades_return_for_cost(runs):
    ppo, lag = episodes(runs["ppo"], "train"), episodes(runs["lag"], "train")
    first = ppo[ppo.iteration == 0]["return"].mean()  # near-random policy
    last_ppo = ppo[ppo.iteration >= ppo.iteration.max() - 4]
    last_lag = lag[lag.iteration >= lag.iteration.max() - 4]
    assert last_ppo["return"].mean() > first + 5.0, (first, last_ppo["return"].mean())
    assert last_lag.cost.mean() < 0.8 * last_ppo.cost.mean(), (last_lag.cost.mean(), last_ppo.cost.mean())
    assert last_lag["return"].mean() < last_ppo["return"].mean()


def test_same_seed_same_episodes_and_budget_does_not_change_the_computation(runs, tmp_path):
    assert cli(tmp_path / "short", "ppo_lag", bound=15, extra=["--total-steps", ONE_CHUNK]) == 0
    short, full = episodes(tmp_path / "short", "train"), episodes(runs["lag"], "train")
    assert short.iteration.nunique() > 3
    prefix = full[full.iteration <= short.iteration.max()].reset_index(drop=True)
    pd.testing.assert_frame_equal(short, prefix, check_exact=True)
    assert cli(tmp_path / "seed1", "ppo_lag", bound=15, seed=1, extra=["--total-steps", ONE_CHUNK]) == 0
    other = episodes(tmp_path / "seed1", "train")
    assert not np.array_equal(other.cost.to_numpy(), short.cost.to_numpy())


def test_resume_refuses_a_checkpoint_of_another_config(tmp_path, capsys):
    out = tmp_path / "run"
    assert cli(out, "ppo_lag", bound=15, extra=["--total-steps", str(3 * 100 * 2048), "--stop-after-chunks", "1"]) == 75
    capsys.readouterr()
    assert cli(out, "ppo_lag", bound=25, extra=["--total-steps", str(3 * 100 * 2048)]) == 1
    assert "different config (fields ['bound'])" in capsys.readouterr().err


def test_multiplier_follows_the_bound_in_training(tmp_path):
    assert cli(tmp_path / "loose", "ppo_lag", bound=1e9, extra=["--total-steps", ONE_CHUNK]) == 0
    assert (pd.read_parquet(tmp_path / "loose" / "trace.parquet").multiplier == 0).all()
    assert cli(tmp_path / "tight", "ppo_lag", bound=1e-3, extra=["--total-steps", ONE_CHUNK]) == 0
    tight = pd.read_parquet(tmp_path / "tight" / "trace.parquet").multiplier.to_numpy()
    # the first iterate is logged after a few updates; by then lambda has risen, and it keeps rising
    # while the cost is above d/T (below it, it can fall by at most lr * d/T = 1.2e-5 per update)
    assert 0 < tight[0] < tight[-1] and (np.diff(tight) > -1e-3).all()


def test_greedy_and_noisy_evaluation_differ_only_in_the_noise():
    cfg = make_config("cpu", dict(task="goal", algo="ppo_lag", bound=15))
    compiled = compile_programs(cfg)
    from algos.config import hyper_of

    state = compiled.init(jnp.int32(3), hyper_of(cfg))
    run = lambda scale: compiled.evaluate(state, jnp.int32(3), jnp.float32(scale), hyper_of(cfg))
    greedy, obs_g = run(0.0)
    noisy, obs_n = run(1.0)
    again, _ = run(0.0)
    assert np.array_equal(np.asarray(obs_g), np.asarray(obs_n))  # same fresh layouts
    assert np.array_equal(np.asarray(greedy.ret), np.asarray(again.ret))  # greedy is deterministic
    assert not np.array_equal(np.asarray(greedy.cost), np.asarray(noisy.cost))
    assert bool(jnp.all(greedy.done)) and bool(jnp.all(noisy.done))
    # fresh layouts: not the training layouts
    assert not np.array_equal(np.asarray(obs_g[: cfg.num_envs]), np.asarray(state.env_state.obs[: len(obs_g)]))


def test_sigterm_checkpoints_exits_75_and_the_resumed_run_equals_the_uninterrupted_one(runs, tmp_path, capsys):
    """A preemption (SIGTERM mid-run, the run of the `runs` fixture's "lag") checkpoints at a chunk
    boundary and exits 75; the same command resumes there, and the finished run is the
    uninterrupted one bit for bit (episodes and trace). (--stop-after-chunks, the rehearsal of a
    preemption, is tested in test_resume_refuses_a_checkpoint_of_another_config.)"""
    out = tmp_path / "preempted"
    cmd = [sys.executable, "-m", "runs.train", "--task", "goal", "--bound", "15", "--algo", "ppo_lag", "--seed",
           "0", "--out", str(out)]
    proc = subprocess.Popen(cmd, cwd=ROOT, stderr=subprocess.PIPE, text=True,
                            env=dict(os.environ, PYTHONPATH=os.path.abspath(ROOT)))
    deadline = time.time() + 150
    for line in proc.stderr:  # wait for the first chunk's progress line
        if " | update " in line or time.time() > deadline:
            break
    proc.send_signal(signal.SIGTERM)
    proc.communicate(timeout=120)
    assert proc.returncode == train.EXIT_TEMPFAIL
    assert checkpoint.load_meta(str(out / "checkpoint")) is not None and not os.path.exists(out / "run.json")
    capsys.readouterr()
    assert cli(out, "ppo_lag", bound=15) == 0
    at = re.search(r"resumed from \S+ at update (\d+)/(\d+)", capsys.readouterr().err)
    assert at and 0 < int(at.group(1)) < int(at.group(2)) == 391, at  # mid-run: neither from zero nor the end
    pd.testing.assert_frame_equal(episodes(out), episodes(runs["lag"]), check_exact=True)
    a = pd.read_parquet(out / "trace.parquet").drop(columns="wall_time")
    b = pd.read_parquet(runs["lag"] / "trace.parquet").drop(columns="wall_time")
    pd.testing.assert_frame_equal(a, b, check_exact=True)
    assert json.load(open(out / "run.json"))["restarts"] == 1 and not os.path.exists(out / "checkpoint")
