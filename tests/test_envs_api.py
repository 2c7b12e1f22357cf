"""The envs API contract (docs/api-contracts.md): make, reset/step, auto-reset and bookkeeping."""
import functools

import jax
import jax.numpy as jnp
import numpy as np
import pytest

import envs

BUILTIN_SIZES = {"goal": 62, "circle": 28, "push": 68, "button": 62}  # docs/envs.md's, the paper's four


def available_tasks():
    out = []
    for task in envs.TASKS:
        try:
            envs.make(task)
        except ImportError:
            continue
        out.append(task)
    return out


T = 5
STEPS = 12  # crosses two auto-resets (after steps 5 and 10)
BATCH = 3


@functools.lru_cache(maxsize=None)
def compiled(task):
    """One environment, one compiled rollout and reset per task, shared by the tests."""
    env = envs.make(task, episode_length=T)

    @jax.jit
    def rollout(key):
        k_reset, k_act = jax.random.split(key)
        state = jax.vmap(env.reset)(jax.random.split(k_reset, BATCH))

        def body(s, k):
            a = jax.random.uniform(k, (BATCH, 2), minval=-1.0, maxval=1.0)
            s = jax.vmap(env.step)(s, a)
            return s, s

        return jax.lax.scan(body, state, jax.random.split(k_act, STEPS))[1]

    return env, rollout, jax.jit(jax.vmap(env.reset))


def test_make_rejects_unknown_names():
    with pytest.raises(ValueError, match="unknown task 'maze'"):
        envs.make("maze")
    with pytest.raises(ValueError, match="unknown backend 'mjx'"):
        envs.make("goal", backend="mjx")
    with pytest.raises(ValueError, match="level 2"):
        envs.make("goal", level=2)
    with pytest.raises(ValueError, match="episode_length"):
        envs.make("goal", episode_length=0)
    with pytest.raises(ValueError, match="unknown option"):
        envs.make("goal", reward_scale=3.0)


def test_env_is_hashable_and_reports_sizes():
    env = envs.make("goal", episode_length=17, reward_distance_scale=1.0)
    assert hash(env) == hash(envs.make("goal", episode_length=17, reward_distance_scale=1.0))
    assert env.observation_size == 62 and env.action_size == 2 and env.episode_length == 17


@pytest.mark.parametrize("task", available_tasks())
def test_episodes_reset_exactly_every_T_steps_with_consistent_totals(task):
    env, rollout, _ = compiled(task)
    states = rollout(jax.random.PRNGKey(3))
    done = np.asarray(states.done)
    expected = np.zeros_like(done)
    expected[T - 1 :: T] = True
    np.testing.assert_array_equal(done, expected)
    np.testing.assert_array_equal(np.asarray(states.truncated), expected)
    np.testing.assert_array_equal(np.asarray(states.t)[:, 0], (np.arange(STEPS) + 1) % T)
    # finished totals equal the sums of the per-step rewards and costs of that episode
    costs, rewards = np.asarray(states.cost), np.asarray(states.reward)
    for end in range(T - 1, STEPS, T):
        np.testing.assert_allclose(states.finished_cost[end], costs[end - T + 1 : end + 1].sum(0), rtol=1e-5, atol=1e-5)
        np.testing.assert_allclose(states.finished_return[end], rewards[end - T + 1 : end + 1].sum(0), rtol=1e-5, atol=1e-5)
        np.testing.assert_array_equal(states.finished_length[end], T)
        np.testing.assert_array_equal(states.episode_cost[end], 0.0)
    # running sums within an episode
    np.testing.assert_allclose(states.episode_cost[T + 2], costs[T : T + 3].sum(0), rtol=1e-5, atol=1e-5)
    np.testing.assert_allclose(states.episode_return[T + 2], rewards[T : T + 3].sum(0), rtol=1e-5, atol=1e-5)
    # observations: documented size, finite; terminal_obs == obs except on done steps
    obs, term = np.asarray(states.obs), np.asarray(states.terminal_obs)
    assert obs.shape[-1] == env.observation_size == BUILTIN_SIZES.get(task, env.observation_size)
    assert obs.dtype == np.float32 and np.isfinite(obs).all() and np.isfinite(term).all()
    np.testing.assert_array_equal(obs[~done], term[~done])
    assert not np.allclose(obs[done], term[done])


@pytest.mark.parametrize("task", available_tasks())
def test_auto_reset_starts_the_episode_that_reset_of_the_stored_key_gives(task):
    env, rollout, reset = compiled(task)
    states = rollout(jax.random.PRNGKey(11))
    stored = states.key[T - 2]  # the key held during the first episode
    expected = reset(stored)
    np.testing.assert_allclose(states.obs[T - 1], expected.obs, rtol=1e-5, atol=1e-5)
    np.testing.assert_array_equal(states.key[T - 1], expected.key)
    np.testing.assert_array_equal(states.t[T - 1], 0)
    np.testing.assert_array_equal(states.episode_return[T - 1], 0.0)
    # a fresh layout: the new episode's observation is not the old one's
    assert not np.allclose(states.obs[T - 1], states.terminal_obs[T - 1])


@pytest.mark.parametrize("task", available_tasks())
def test_rollouts_are_deterministic_per_key_and_differ_across_keys(task):
    _, rollout, _ = compiled(task)
    a, b, c = rollout(jax.random.PRNGKey(0)), rollout(jax.random.PRNGKey(0)), rollout(jax.random.PRNGKey(1))
    for x, y in zip(jax.tree_util.tree_leaves(a), jax.tree_util.tree_leaves(b)):
        np.testing.assert_array_equal(x, y)
    assert not np.allclose(a.obs, c.obs)


def test_single_env_and_vmapped_steps_agree():
    env = envs.make("goal", episode_length=3)
    keys = jax.random.split(jax.random.PRNGKey(5), 2)
    batch = jax.vmap(env.reset)(keys)
    singles = [env.reset(k) for k in keys]
    action = jnp.array([0.7, -0.9])
    for _ in range(4):  # crosses an auto-reset
        batch = jax.jit(jax.vmap(env.step, in_axes=(0, None)))(batch, action)
        singles = [jax.jit(env.step)(s, action) for s in singles]
    for i, s in enumerate(singles):
        np.testing.assert_allclose(batch.obs[i], s.obs, rtol=1e-5, atol=1e-5)
        assert bool(batch.done[i]) == bool(s.done)


@pytest.mark.parametrize("needed", [0, 3, 8, 9, 64])
def test_lazy_where_matches_where_for_none_few_and_many(needed):
    """envs.lazy: the batched rule (nobody / a gathered few / the whole batch) equals the plain where."""
    from envs.lazy import lazy_where

    fn = lambda a: (jnp.sin(a[0]) * a[1], a[1] + 1)
    n = 64
    arg = (jnp.linspace(0.0, 3.0, n), jnp.arange(n, dtype=jnp.int32))
    other = (jnp.full(n, -1.0), jnp.full(n, -7, jnp.int32))
    pred = jnp.zeros(n, bool).at[jnp.arange(needed) * 7 % n].set(True)
    got = jax.jit(jax.vmap(lazy_where(fn)))(pred, arg, other)
    want = jax.vmap(lambda p, a, o: jax.tree_util.tree_map(lambda f, x: jnp.where(p, f, x), fn(a), o))(pred, arg, other)
    for x, y in zip(got, want):
        np.testing.assert_array_equal(x, y)


def test_step_key_is_the_fold_in_of_the_stored_key_and_t():
    from envs.lazy import StepKey, step_key

    key = jax.random.PRNGKey(3)
    np.testing.assert_array_equal(step_key(StepKey(key, jnp.int32(7))), jax.random.fold_in(key, 7))
    np.testing.assert_array_equal(step_key(key), key)


def test_crax_backend_without_the_extra_says_how_to_install_it():
    try:
        import crax  # noqa: F401
    except ImportError:
        with pytest.raises(ImportError, match=r"pip install -e '\.\[crax\]'"):
            envs.make("goal", backend="crax")
    else:
        pytest.skip("crax is installed here; tests/test_envs_crax.py covers the backend")
