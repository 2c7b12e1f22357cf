"""The CRAX backend (optional extra crax-bench): adapter bookkeeping, and both backends driven
from the same layout with the same open-loop actions.

Slow: CRAX's MJX functions take about 45-50 s each to compile on a 2-core CPU, so the whole
module shares one environment, one compiled reset and one compiled step.
"""
import numpy as np
import pytest

crax = pytest.importorskip("crax", reason="the crax extra (PyPI crax-bench) is not installed: pip install -e '.[crax]'")

import jax  # noqa: E402
import jax.numpy as jnp  # noqa: E402

import envs  # noqa: E402
from envs import goal, point  # noqa: E402

pytestmark = [pytest.mark.slow, pytest.mark.crax]

T = 64
# Tolerances for the comparison (documented in docs/envs.md): the closed-form dynamics match
# MuJoCo to ~4e-7 per step in open space, float32 accumulation over 60 steps stays well below
# 1e-4; a hazard's proximity cost has slope 2 / 0.4 = 5 per metre, so 5e-4.
PATH_TOL = 1e-4
REWARD_TOL = 1e-4
COST_TOL = 5e-4
OBS_TOL = 5e-4  # the accelerometer reads up to ~20 m/s^2 in the yaw chatter; float32 rounding


@pytest.fixture(scope="module")
def crax_goal():
    """The env with its reset and step compiled ahead, outside JAX's persistent cache: writing
    this step's executable to the cache aborted a long-lived pytest worker twice in CI
    (SIGABRT inside XLA's executable.serialize(), in JAX's cache write; the module alone passes)."""
    env = envs.make("goal", backend="crax", episode_length=T, reward_distance_scale=1.0)
    key = jax.random.PRNGKey(0)
    # JAX decides once per process whether it uses the cache; the write threshold it reads per compile
    min_seconds = jax.config.jax_persistent_cache_min_compile_time_secs
    jax.config.update("jax_persistent_cache_min_compile_time_secs", 1e9)
    try:
        reset = jax.jit(env.reset).lower(key).compile()
        step = jax.jit(env.step).lower(jax.eval_shape(env.reset, key), jnp.zeros((2,), jnp.float32)).compile()
    finally:
        jax.config.update("jax_persistent_cache_min_compile_time_secs", min_seconds)
    return env, reset, step


def open_loop_actions():
    pieces = [([1.0, 0.0], 15), ([1.0, 0.8], 15), ([0.3, -1.0], 15), ([1.0, 0.6], 15)]
    return jnp.array([a for a, n in pieces for _ in range(n)], jnp.float32)


def test_crax_adapter_shapes_and_cost_bookkeeping(crax_goal):
    env, reset, step = crax_goal
    assert env.backend == "crax" and env.observation_size == 62 and env.action_size == 2
    state = reset(jax.random.PRNGKey(0))
    assert state.obs.shape == (62,) and state.obs.dtype == jnp.float32
    costs, rewards = [], []
    for i in range(T):
        key_before = state.key
        state = step(state, jnp.array([1.0, 0.7 if i % 20 < 10 else -0.7]))
        costs.append(float(state.cost))
        rewards.append(float(state.reward))
        assert np.isfinite(np.asarray(state.obs)).all()
        np.testing.assert_allclose(state.cost, state.point.info["cost"] if i < T - 1 else state.cost)
    assert bool(state.done) and bool(state.truncated) and int(state.t) == 0
    assert int(state.finished_length) == T
    np.testing.assert_allclose(state.finished_cost, np.sum(costs, dtype=np.float32), rtol=1e-5, atol=1e-5)
    np.testing.assert_allclose(state.finished_return, np.sum(rewards, dtype=np.float32), rtol=1e-5, atol=1e-5)
    assert float(state.episode_cost) == 0.0
    expected = reset(key_before)  # the auto-reset started the episode that reset(stored key) gives
    np.testing.assert_allclose(state.obs, expected.obs, atol=1e-5)


def test_builtin_goal_follows_crax_on_the_same_layout_and_actions(crax_goal):
    env, reset, step = crax_goal
    builtin = envs.make("goal", episode_length=T, reward_distance_scale=1.0)
    b_step = jax.jit(builtin.step)
    c_state = reset(jax.random.PRNGKey(7))
    info = c_state.point.info
    data = c_state.point.pipeline_state
    agent = point.initial_state(jnp.asarray(data.qpos[:3]), jnp.asarray(data.qvel[:3]))
    task = goal.GoalState(info["goal_positions"][:, :2], info["hazard_positions"][: goal.N_HAZARDS, :2], info["last_dist_goal"])
    b_state = builtin.reset(jax.random.PRNGKey(0))._replace(point=agent, task=task, obs=builtin.task.observe(agent, task))
    np.testing.assert_allclose(b_state.obs, c_state.obs, atol=1e-4)

    compared = 0
    worst = {"path": 0.0, "reward": 0.0, "cost": 0.0, "obs": 0.0}
    for action in open_loop_actions():
        c_state = step(c_state, action)
        b_state = b_step(b_state, action)
        if float(c_state.reward) > 0.5 or float(b_state.reward) > 0.5:
            break  # a goal was reached: the respawn draws differ from here on
        if float(c_state.cost) >= 3.0 or float(b_state.cost) >= 3.0:
            break  # a wall contact: MJX's contact and the built-in one part ways here
        worst["path"] = max(worst["path"], float(jnp.max(jnp.abs(b_state.point.qpos - c_state.point.pipeline_state.qpos[:3]))))
        worst["reward"] = max(worst["reward"], abs(float(b_state.reward - c_state.reward)))
        worst["cost"] = max(worst["cost"], abs(float(b_state.cost - c_state.cost)))
        worst["obs"] = max(worst["obs"], float(jnp.max(jnp.abs(b_state.obs - c_state.obs))))
        compared += 1
    print("worst deviations over", compared, "steps:", worst)
    assert compared >= 30
    assert worst["path"] <= PATH_TOL
    assert worst["reward"] <= REWARD_TOL
    assert worst["cost"] <= COST_TOL
    assert worst["obs"] <= OBS_TOL
