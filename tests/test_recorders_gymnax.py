"""The gymnax adapter (recorders/gymnax.py): a real safenax env recorded in a training loop and in
both final phases, every total equal to an independent per-step sum; gymnax < 1.0's step
convention and the adapter's errors on a small env defined here."""
import warnings

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from recorders import EpisodeWriter, RecorderError
from recorders import gymnax as gx
from recorders import jax_recorder as jr
from tests.recorder_envs import RUN, recorded, table

INSTALL = "pip install --no-deps -r .ci/safenax-requirements.txt (pinned; safenax's own requirements pull jax[cuda13])"


class GymnaxLine:
    """tests/recorder_envs.py's line episodes behind gymnax < 1.0's interface (5-tuple step that
    resets the env when the episode ends): at step t reward = action * t, cost = 1 on odd t; the
    episode's length (1 to 4) is drawn from its reset key; the cost in info[cost_key]."""

    def __init__(self, cost_key="cost"):
        self.cost_key = cost_key

    def reset(self, key, params=None):
        return jnp.float32(0), (jnp.int32(0), jax.random.randint(key, (), 1, 5))

    def step(self, key, state, action, params=None):
        t, length = state
        t = t + 1
        done = t >= length
        obs_reset, state_reset = self.reset(key, params)
        state = jax.tree.map(lambda a, b: jnp.where(done, a, b), state_reset, (t, length))
        obs = jnp.where(done, obs_reset, t.astype(jnp.float32))
        return obs, state, action * t, done, {self.cost_key: (t % 2).astype(jnp.float32)}


def line_policy(obs, key, noise_scale):  # greedy action 1
    return 1.0 + noise_scale * jax.random.normal(key, obs.shape)


def first_states(env, reset_keys, params=None):
    """The env states the final evaluation starts episode i from (through the adapter's own reset)."""
    reset, _ = gx.episode_functions(env, params)
    (state, _), _ = jax.vmap(reset)(reset_keys)
    return state


def test_gymnax_before_1_0_final_evaluation_matches_the_hand_computed_table(tmp_path):
    env, keys = GymnaxLine(), jax.random.split(jax.random.PRNGKey(3), 8)
    writer = EpisodeWriter(tmp_path, **RUN)
    phases = gx.evaluate_final(writer, env, line_policy, keys, jax.random.PRNGKey(4), num_steps=4)
    lengths = np.asarray(first_states(env, keys)[1])
    assert len(set(lengths)) > 1
    frame = recorded(tmp_path)
    greedy = frame[frame.phase == "final_greedy"].reset_index(drop=True)
    assert greedy.equals(table([("final_greedy", 0, i, L * (L + 1) / 2, (L + 1) // 2, L) for i, L in enumerate(lengths)]))
    np.testing.assert_array_equal(phases["final_explore"]["length"], lengths)  # same episodes, other actions
    assert not np.array_equal(phases["final_explore"]["return"], phases["final_greedy"]["return"])


def test_adapter_errors_name_the_problem():
    key, state = jax.random.PRNGKey(0), (jnp.int32(0), jnp.int32(2))
    with pytest.raises(RecorderError, match=r"info has no 'cost' \(its keys: \['penalty'\]\).*pass cost_key="):
        gx.unpack_step(GymnaxLine("penalty").step(key, state, 1.0))
    assert float(gx.unpack_step(GymnaxLine("penalty").step(key, state, 1.0), cost_key="penalty")[3]) == 1.0
    with pytest.raises(RecorderError, match="returned a tuple of 4; expected"):
        gx.unpack_step((0, 0, 0, {}))
    obs, state, reward, done, info = GymnaxLine().step(key, state, 1.0)
    with pytest.raises(RecorderError, match=r"cost has shape \(2,\), done has \(\); expected one cost per env"):
        gx.unpack_step((obs, state, reward, done, {"cost": jnp.zeros(2)}))


# ---- a real safenax env ----------------------------------------------------------------------
N, CHUNK, EPISODES, MAX_STEPS = 6, 60, 12, 100


@pytest.fixture(scope="module")
def lake():
    try:
        with warnings.catch_warnings():  # safenax imports every env's framework; some warn on import
            warnings.simplefilter("ignore")
            import safenax
    except ImportError as error:
        pytest.skip(f"safenax does not import ({error}); {INSTALL}")
    # goal +1, every other step -0.02: returns that say how long an episode took
    return safenax.FrozenLakeV2(reward_schedule=(1.0, -0.02, -0.02))


def lake_policy(obs, key, noise_scale):
    """Greedy: right, down at the right wall; with noise: a softmax that favours that move."""
    greedy = jnp.where(obs % 4 == 3, 1, 2)
    sampled = jax.random.categorical(key, 2.0 * jax.nn.one_hot(greedy, 4))
    return jnp.where(noise_scale > 0, sampled, greedy)


def expected_iterates(reward, cost, done):
    """The protocol's iterates from a per-step ledger [T, N], summed here in float32 step by step:
    each env's first episode finished since the last iterate, an iterate once all N have one."""
    n = reward.shape[1]
    ret, total, length = np.zeros(n, np.float32), np.zeros(n, np.float32), np.zeros(n, np.int64)
    pending, rows = [None] * n, []
    for t in range(reward.shape[0]):
        for i in range(n):
            ret[i], total[i], length[i] = ret[i] + reward[t, i], total[i] + cost[t, i], length[i] + 1
            if done[t, i]:
                pending[i] = pending[i] or (float(ret[i]), float(total[i]), int(length[i]))
                ret[i], total[i], length[i] = 0, 0, 0
        if all(pending):
            iteration = len(rows) // n
            rows += [("train", iteration, i, *episode) for i, episode in enumerate(pending)]
            pending = [None] * n
    return rows


def test_safenax_training_iterates_equal_an_independent_per_step_sum(tmp_path, lake):
    params = lake.default_params
    step = jax.vmap(lake.step, in_axes=(0, 0, 0, None))

    @jax.jit
    def chunk(obs, state, sums, rec, key):
        def body(carry, _):
            obs, state, sums, rec, key = carry
            key, key_act, key_env = jax.random.split(key, 3)
            out = step(jax.random.split(key_env, N), state, lake_policy(obs, key_act, 1.0), params)
            obs, state, reward, cost, done = gx.unpack_step(out)
            sums, rec = gx.record_step(sums, rec, reward, cost, done)
            return (obs, state, sums, rec, key), (reward, cost, done)

        return jax.lax.scan(body, (obs, state, sums, rec, key), None, length=CHUNK)

    writer = EpisodeWriter(tmp_path, **RUN)
    obs, state = jax.vmap(lake.reset, in_axes=(0, None))(jax.random.split(jax.random.PRNGKey(1), N), params)
    carry, ledger = (obs, state, jr.init_sums(N), jr.init_recorder(N, CHUNK), jax.random.PRNGKey(2)), []
    for epoch in range(4):  # chunk borders fall inside episodes and iterates
        carry, steps = chunk(*carry)
        carry = (*carry[:3], jr.drain(carry[3], writer, trainer_step=epoch), carry[4])
        ledger.append(steps)
    reward, cost, done = (np.concatenate([np.asarray(s[k]) for s in ledger]) for k in range(3))
    rows = expected_iterates(reward, cost, done)
    assert len(rows) >= 2 * N and len({r[3] for r in rows}) > 1 and min(r[4] for r in rows) > 0  # real episodes
    assert recorded(tmp_path).equals(table(rows))


class Ledgered:
    """A gymnax-interface env around ``env`` that reports each step's reward, cost and done to
    ``self.steps`` (a host callback) with its episode's tag (drawn from the reset key) and step count."""

    def __init__(self, env):
        self.env, self.steps = env, []

    def reset(self, key, params=None):
        obs, state = self.env.reset(key, params)
        return obs, (state, jax.random.bits(key, (), jnp.uint32), jnp.int32(0))

    def step(self, key, state, action, params=None):
        inner, tag, t = state
        obs, inner, reward, terminated, truncated, info = self.env.step(key, inner, action, params)
        report = lambda *values: self.steps.append(tuple(np.asarray(v).item() for v in values))  # noqa: E731
        jax.debug.callback(report, tag, t, reward, info["cost"], terminated | truncated)
        return obs, (inner, tag, t + 1), reward, terminated, truncated, info


def first_episode_sums(steps, tag):
    """(return, cost, length) of the first episode tagged ``tag``, summed in float32 step by step."""
    ret = total = np.float32(0)
    for length, (_, _, reward, cost, done) in enumerate(sorted(s for s in steps if s[0] == tag), 1):
        ret, total = ret + np.float32(reward), total + np.float32(cost)
        if done:
            return float(ret), float(total), length
    raise AssertionError(f"episode {tag} did not end")


def test_safenax_final_phases_equal_an_independent_per_step_sum(tmp_path, lake):
    ledgered, keys, noise = Ledgered(lake), jax.random.split(jax.random.PRNGKey(7), EPISODES), jax.random.PRNGKey(8)
    writer = EpisodeWriter(tmp_path, **RUN)
    writer.append_iterates([[0.0]], [[0.0]], [[1]])
    written = gx.evaluate_final(writer, ledgered, lake_policy, keys, noise, num_steps=MAX_STEPS)
    jax.effects_barrier()
    tags = np.asarray(first_states(ledgered, keys)[1]).tolist()
    assert len(set(tags)) == EPISODES
    # the phases run one after the other (explore, then greedy), each N episodes x MAX_STEPS steps
    per_phase, phases = EPISODES * MAX_STEPS, {}
    assert len(ledgered.steps) == 2 * per_phase
    for k, phase in enumerate(("final_explore", "final_greedy")):
        steps = ledgered.steps[k * per_phase:(k + 1) * per_phase]
        assert sorted(s[:2] for s in steps) == [(tag, t) for tag in sorted(tags) for t in range(MAX_STEPS)]
        phases[phase] = [first_episode_sums(steps, tag) for tag in tags]
    expected = table([(phase, 0, i, *episode) for phase in phases for i, episode in enumerate(phases[phase])])
    frame = recorded(tmp_path)
    assert frame[frame.phase != "train"].reset_index(drop=True).equals(expected)
    assert phases["final_explore"] != phases["final_greedy"]
    assert len({length for _, _, length in phases["final_greedy"]}) > 1  # the slippery lake varies the episodes
    # the bare env gives the same episodes: the ledger's wrapper changed nothing
    bare = gx.evaluate_final(EpisodeWriter(tmp_path / "bare", **RUN), lake, lake_policy, keys, noise,
                             num_steps=MAX_STEPS)
    for phase in written:
        for field in ("return", "cost", "length"):
            np.testing.assert_array_equal(bare[phase][field], written[phase][field])


def test_safenax_docs_example_runs_and_is_evaluated(tmp_path, lake):
    from tests.test_recorders_docs import test_byo_example_runs_and_is_evaluated
    test_byo_example_runs_and_is_evaluated(tmp_path, "gymnax")
