"""The off-policy core (algos/offpolicy.py) and its algorithms (algos/sac_lag.py): the losses and
updates on hand-worked cases, the replay ring, and SAC-Lag through the pack machinery (a batched
member bitwise the same in another slot, a killed pack resumed to the uninterrupted result)."""
import json
import os
import subprocess
import sys

import jax
import jax.numpy as jnp
import numpy as np
import pandas as pd
import pytest

from algos import offpolicy, sac_lag
from algos.config import foreign_fields, hyper_of, make_config
from algos.interface import update_stats


def hyper(**changes):
    return hyper_of(make_config("cpu", {"algo": "sac_lag", "bound": 25.0, **changes}))


# ---- the losses -------------------------------------------------------------------------------
def test_the_soft_target_bootstraps_with_the_entropy_term_except_at_a_terminal_step():
    reward = jnp.array([1.0, 1.0])
    discount = jnp.array([1.0, 0.0])  # the second step ended its episode by termination
    y = offpolicy.soft_target(reward, discount, next_q_min=jnp.array([2.0, 2.0]),
                              next_log_prob=jnp.array([-1.0, -1.0]), alpha=0.5, gamma=0.9)
    np.testing.assert_allclose(y, [1.0 + 0.9 * (2.0 + 0.5), 1.0], rtol=1e-6)
    # the cost critics' target has no entropy term (alpha 0)
    np.testing.assert_allclose(offpolicy.soft_target(reward, discount, jnp.array([2.0, 2.0]), jnp.array([-1.0, -1.0]),
                                                     0.0, 0.9), [2.8, 1.0], rtol=1e-6)


def test_a_step_ended_by_the_time_limit_carries_no_critic_loss():
    q = jnp.array([[1.0, 3.0], [5.0, 5.0]])  # two critics' values of two steps
    target = jnp.array([2.0, 0.0])
    # both counted: 0.5 * mean(1, 1, 25, 25); the second truncated: 0.5 * mean(1, 1, 0, 0)
    assert float(offpolicy.critic_error(q, target, jnp.array([1.0, 1.0]))) == pytest.approx(6.5)
    assert float(offpolicy.critic_error(q, target, jnp.array([1.0, 0.0]))) == pytest.approx(0.25)


def test_the_temperature_loss_raises_alpha_below_the_target_entropy_and_lowers_it_above():
    grad = jax.grad(offpolicy.temperature_loss)
    # entropy -log pi = 0.2 below the target 1.0: d/d log alpha = alpha * (0.2 - 1.0) < 0, so Adam raises it
    assert float(grad(jnp.float32(0.0), jnp.array([-0.2]), 1.0)) == pytest.approx(-0.8)
    assert float(grad(jnp.log(2.0), jnp.array([-3.0]), 1.0)) == pytest.approx(2.0 * 2.0)


# ---- the multipliers, once per gradient step -------------------------------------------------------
def test_sac_lag_steps_lambda_by_lr_over_T_projected_to_zero_and_lambda_max():
    h = hyper(sac_lagrangian_lr=0.5, sac_lambda_max=2.0)
    stats = lambda c: update_stats(c, h, 100)  # d/T = 0.25
    s = sac_lag.lag_init(h)
    s = sac_lag.lag_update(s, stats(1.25), h)  # v = 1: lambda = 0.5 / 100
    assert float(s.lam) == pytest.approx(0.005)
    s = sac_lag.lag_update(s, stats(0.0), h)  # v = -0.25: 0.005 - 0.00125
    assert float(s.lam) == pytest.approx(0.00375)
    assert float(sac_lag.lag_update(s, stats(-100.0), h).lam) == 0.0
    assert float(sac_lag.lag_update(s, stats(1e6), h).lam) == 2.0


def test_sac_pid_is_ppo_pids_controller_with_its_scalars():
    h = hyper(algo="sac_pid", pid_kp=2.0, pid_ki=0.5, pid_kd=1.0, pid_deriv_beta=0.5)
    s = sac_lag.PID_HOOKS.init(h)
    s = sac_lag.PID_HOOKS.update(s, update_stats(0.45, h, 100), h)  # v = 0.2, I = 0.2, D = 0.1
    assert float(sac_lag.PID_HOOKS.multiplier(s, h)) == pytest.approx(2.0 * 0.2 + 0.5 * 0.2 + 1.0 * 0.1)
    # its runs' identity keeps the pid_* scalars it reads; SAC-Lag's leave them out, and the PPO core's fields
    assert "pid_kp" not in foreign_fields("sac_pid") and "pid_kp" in foreign_fields("sac_lag")
    assert {"num_epochs", "clip_eps"} <= foreign_fields("sac_lag") and "replay_size" in foreign_fields("ppo_lag")


# ---- the replay ring -------------------------------------------------------------------------------
def test_the_replay_ring_overwrites_the_oldest_rows_and_samples_only_filled_ones():
    replay = offpolicy.empty_replay(5, obs_size=1, action_size=1)

    def rows(values):
        v = jnp.asarray(values, jnp.float32)
        return {"obs": v[:, None], "action": v[:, None], "reward": v, "cost": v, "discount": v, "keep": v,
                "next_obs": v[:, None]}

    replay = offpolicy.insert(replay, rows([1, 2, 3]))
    assert (int(replay.position), int(replay.size)) == (3, 3)
    drawn = offpolicy.sample(replay, jax.random.PRNGKey(0), 4, 16)["reward"]
    assert drawn.shape == (4, 16) and set(np.unique(drawn)) <= {1.0, 2.0, 3.0}
    replay = offpolicy.insert(replay, rows([4, 5, 6]))  # 6 overwrites 1
    assert (int(replay.position), int(replay.size)) == (1, 5)
    np.testing.assert_array_equal(replay.reward, [6, 2, 3, 4, 5])


def test_replay_bytes_plans_a_members_buffer():
    cfg = make_config("cpu", {"algo": "sac_lag"})
    assert offpolicy.replay_bytes(cfg, obs_size=62, action_size=2) == 4 * 100_000 * (2 * 62 + 2 + 4)


# ---- SAC-Lag through packs, checkpoints and run folders ----------------------------------------------
@pytest.fixture(scope="module")
def sac_packs(tmp_path_factory):
    """SAC-Lag packs in a process without FMA (tests/batched_packs.py says why)."""
    out = tmp_path_factory.mktemp("sac_packs")
    env = dict(os.environ, XLA_FLAGS="--xla_cpu_max_isa=AVX")
    script = os.path.join(os.path.dirname(__file__), "batched_packs.py")
    done = subprocess.run([sys.executable, script, str(out), "sac"], env=env, capture_output=True, text=True,
                          timeout=1500)
    assert done.returncode == 0, done.stderr[-3000:]
    return out


def tables(folder):
    return [pd.read_parquet(os.path.join(folder, name)) for name in ("episodes.parquet", "trace.parquet")]


def runs_of(base, name):
    return {p.name: p for p in sorted((base / name).iterdir())}


@pytest.mark.slow
def test_a_batched_sac_lag_member_does_not_depend_on_its_slot_and_a_killed_pack_resumes_exactly(sac_packs):
    full, perm, alone, killed = (runs_of(sac_packs, n) for n in ("full", "perm", "alone", "killed"))
    for run, folder in full.items():
        episodes, trace = tables(folder)
        for other in (perm[run], killed[run]):
            for a, b in zip((episodes, trace.drop(columns="wall_time")), tables(other)):
                pd.testing.assert_frame_equal(a.drop(columns="wall_time", errors="ignore"),
                                              b.drop(columns="wall_time", errors="ignore"), check_exact=True)
        assert json.load(open(killed[run] / "run.json"))["restarts"] == 1
        # it learned: the losses are finite once gradient steps ran, alpha moved, lambda >= 0
        assert np.isfinite(trace[["value_loss", "cost_value_loss", "policy_loss"]].to_numpy()[1:]).all()
        assert (trace.sac_alpha.to_numpy()[1:] != 1.0).all() and (trace.multiplier >= 0).all()
        assert set(episodes.phase) == {"train", "final_explore", "final_greedy"}
    (run, folder), = alone.items()
    for a, b in zip(tables(folder), tables(full[run])):
        pd.testing.assert_frame_equal(a.drop(columns="wall_time", errors="ignore"),
                                      b.drop(columns="wall_time", errors="ignore"), check_exact=True)


@pytest.mark.slow
def test_the_planner_caps_a_pack_by_the_members_states_that_fit_in_train_memory_gb(tmp_path, monkeypatch):
    from workflow import config_validation as cv
    from workflow import packs

    monkeypatch.setenv("JAX_COMPILATION_CACHE_DIR", str(tmp_path))
    cfg = cv.resolve({"preset": "offpolicy", "tasks": ["goal"], "train": {"memory_gb": 0.12}})
    sizes = packs.pack_sizes(cfg)
    # a SAC-family member holds a 100,000-transition replay buffer (52.7 MB on goal): two fit in
    # 0.12 GB; PPO-Lag's state (0.3 MB) leaves train.pack_size as it is
    assert sizes["goal", "sac_lag"] == sizes["goal", "sac"] == 2 and sizes["goal", "ppo_lag"] == 6
    planned = {p.name: len(p.runs) for p in packs.plan(cfg, tmp_path)}
    assert planned["goal_sac_lag_p0"] == 2 and len([n for n in planned if n.startswith("goal_sac_lag_")]) == 3
    assert (tmp_path / "state_bytes.json").exists()  # measured once: the next plan reads it
    assert packs.pack_sizes(cfg) == sizes


@pytest.mark.slow
@pytest.mark.crax
@pytest.mark.heavy
def test_sac_lag_trains_on_a_crax_task(tmp_path):
    """The off-policy core takes CRAX's tasks as the PPO core does (the env is the same `Env`)."""
    pytest.importorskip("crax", reason="the crax extra (PyPI crax-bench) is not installed: pip install -e '.[crax]'")
    from runs import train

    cfg = make_config("cpu", dict(task="goal", backend="crax", algo="sac_lag", bound=1.0, seed=0, total_steps=2 * 16,
                                  num_envs=2, episode_length=16, eval_episodes=2),
                      ["replay_size=64", "replay_batch_size=8", "offpolicy_hidden=8,8", "chunk_updates=16"])
    assert train.run(cfg, str(tmp_path), quiet=True) == 0
    episodes, trace = tables(tmp_path)
    assert set(episodes.phase) == {"train", "final_explore", "final_greedy"} and len(trace) == 1
    assert np.isfinite(trace[["value_loss", "cost_value_loss", "policy_loss", "sac_alpha"]].to_numpy()).all()


@pytest.mark.slow
def test_runs_memory_prints_each_configs_state_bytes_and_one_runs_in_mb():
    """`python -m runs.memory --configs -` (the planner's subprocess) and its one-run form."""
    repo = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    cfg = make_config("cpu", {"algo": "sac_lag", "task": "goal"})
    out = subprocess.run([sys.executable, "-m", "runs.memory", "--configs", "-"], cwd=repo, check=True, text=True,
                         input=json.dumps([cfg.to_dict()]), capture_output=True).stdout
    (state,) = json.loads(out)  # the replay buffer plus networks, optimiser and envs (under a MB at cpu sizes)
    assert offpolicy.replay_bytes(cfg, 62, 2) < state < offpolicy.replay_bytes(cfg, 62, 2) + 1_000_000
    one = subprocess.run([sys.executable, "-m", "runs.memory", "--preset", "cpu", "--algo", "sac_lag", "--task", "goal"],
                         cwd=repo, check=True, text=True, capture_output=True).stdout
    assert one.strip().startswith("goal sac_lag (cpu): ") and one.strip().endswith("MB of training state per run")
