"""The JAX recorder: the pure step inside jit/scan/vmap, the host-side drain, the final
evaluation; tables checked against hand-computed ones (same scripted episodes as
tests/test_recorders.py: at step t of an episode reward = action * t, cost = 1 on odd t)."""
import glob

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from recorders import EpisodeWriter, RecorderError
from recorders import jax_recorder as jr
from tests.recorder_envs import RUN, recorded, same_step_expected, table

MAX_LEN = 8


def line_step(schedule, t, episode, action):
    """One env of the scripted line task: episode k lasts schedule[k % len] steps (auto-resets)."""
    t = t + 1
    length = jnp.asarray(schedule)[episode % len(schedule)]
    done = t >= length
    reward, cost = action * t, (t % 2).astype(jnp.float32)
    return jnp.where(done, 0, t), jnp.where(done, episode + 1, episode), reward, cost, done


def schedules_array(schedules):
    """[N, MAX_LEN] cyclic schedules (each row repeats its pattern) so envs can be vmapped."""
    return jnp.asarray([[s[k % len(s)] for k in range(MAX_LEN)] for s in schedules], jnp.int32)


def rollout(schedules, actions, steps, capacity=8, rec=None, carry=None):
    """Jitted scan over `steps` steps of N line envs with the recorder in the loop."""
    sched = schedules_array(schedules)
    n = sched.shape[0]

    @jax.jit
    def run(rec, carry):
        def body(c, _):
            t, episode, sums, rec = c
            t, episode, reward, cost, done = jax.vmap(line_step)(sched, t, episode, actions)
            sums, finished = jr.accumulate(sums, reward, cost, done)
            return (t, episode, sums, jr.record_finished(rec, finished)), None

        (t, episode, sums, rec), _ = jax.lax.scan(body, (*carry, rec), None, length=steps)
        return rec, (t, episode, sums)

    rec = jr.init_recorder(n, capacity) if rec is None else rec
    carry = (jnp.zeros(n, jnp.int32), jnp.zeros(n, jnp.int32), jr.init_sums(n)) if carry is None else carry
    return run(rec, carry)


def test_recorder_inside_scan_matches_the_hand_computed_table(tmp_path):
    rec, _ = rollout([[2, 1, 3], [4]], jnp.array([1.0, 2.0]), 14)
    assert int(rec.count) == 3
    writer = EpisodeWriter(tmp_path, **RUN)
    rec = jr.drain(rec, writer)
    assert int(rec.count) == 0 and bool(rec.pending[0]) and not bool(rec.pending[1])  # env 0's L2 ended at 14
    assert recorded(tmp_path).equals(same_step_expected())


def test_draining_between_chunks_keeps_the_iterate_in_progress(tmp_path):
    writer = EpisodeWriter(tmp_path, **RUN)
    rec, carry = None, None
    for steps in (5, 2, 7):  # iterates complete at steps 4, 8, 12: chunk borders fall inside them
        rec, carry = rollout([[2, 1, 3], [4]], jnp.array([1.0, 2.0]), steps, capacity=2, rec=rec, carry=carry)
        rec = jr.drain(rec, writer)
    assert writer.iterations == 3
    assert recorded(tmp_path).equals(same_step_expected())


def test_recorder_under_vmap_records_several_runs():
    sched = jnp.stack([schedules_array([[2, 1, 3], [4]]), schedules_array([[1], [2]])])

    def run(sched):
        def body(c, _):
            t, episode, sums, rec = c
            t, episode, reward, cost, done = jax.vmap(line_step)(sched, t, episode, jnp.ones(2))
            sums, finished = jr.accumulate(sums, reward, cost, done)
            return (t, episode, sums, jr.record_finished(rec, finished)), None

        zero = jnp.zeros(2, jnp.int32)
        return jax.lax.scan(body, (zero, zero, jr.init_sums(2), jr.init_recorder(2, 8)), None, length=4)[0][3]

    recs = jax.jit(jax.vmap(run))(sched)
    with pytest.raises(RecorderError, match="leading axes"):
        jr.completed(recs)
    ret, cost, length = jr.completed(jax.tree.map(lambda x: x[1], recs))
    # run 1: env 0 ends every step (L1: return 1, cost 1), env 1 every 2 steps (L2: 3, 1): iterates at 2 and 4
    np.testing.assert_array_equal(ret, [[1.0, 3.0], [1.0, 3.0]])
    np.testing.assert_array_equal(length, [[1, 2], [1, 2]])
    ret, _, length = jr.completed(jax.tree.map(lambda x: x[0], recs))
    np.testing.assert_array_equal(ret, [[3.0, 10.0]])  # run 0: one iterate by step 4, env 1 under action 1
    np.testing.assert_array_equal(length, [[2, 4]])


def test_overflow_and_bad_sizes_are_errors():
    rec, _ = rollout([[1], [1]], jnp.ones(2), 5, capacity=3)
    assert int(rec.count) == 5
    with pytest.raises(RecorderError, match="overflow: 5 iterates completed between drains but the log holds 3"):
        jr.completed(rec)
    with pytest.raises(RecorderError, match="num_envs must be an integer >= 1, got 0"):
        jr.init_recorder(0, 4)
    with pytest.raises(RecorderError, match="capacity must be an integer >= 1, got 2.5"):
        jr.init_recorder(4, 2.5)


# ---- final evaluation ------------------------------------------------------------------------
def eval_env():
    """A line env whose episode length (1..4) is its layout, drawn from the reset key."""

    def reset(key):
        length = jax.random.randint(key, (), 1, 5)
        state = (jnp.int32(0), length)
        return state, jnp.stack([jnp.float32(0), length.astype(jnp.float32)])

    def step(state, action):
        t, length = state
        t = t + 1
        done = t >= length
        obs = jnp.stack([t.astype(jnp.float32), length.astype(jnp.float32)])
        return (jnp.where(done, 0, t), length), obs, action * t, (t % 2).astype(jnp.float32), done

    return reset, step


def test_final_evaluation_uses_the_same_layouts_and_noise(tmp_path):
    reset, step = eval_env()

    def policy(obs, key, noise_scale):  # greedy action 1
        return 1.0 + noise_scale * jax.random.normal(key, (obs.shape[0],))

    keys = jax.random.split(jax.random.PRNGKey(5), 6)
    writer = EpisodeWriter(tmp_path, **RUN)
    writer.append_iterates([[0.0]], [[0.0]], [[1]])
    writer.append_iterates([[0.0]], [[0.0]], [[1]])
    phases = jr.evaluate_final(writer, reset, step, policy, keys, jax.random.PRNGKey(9), num_steps=4)
    lengths = np.asarray([int(reset(k)[0][1]) for k in keys])
    assert len(set(lengths)) > 1 and lengths.max() > 1  # layouts differ; num_steps=1 below is too short
    frame = recorded(tmp_path)
    greedy = frame[frame.phase == "final_greedy"].reset_index(drop=True)
    # greedy episode of length L: return 1 + ... + L, cost ceil(L / 2); iteration = last train iterate (1)
    assert greedy.equals(table([("final_greedy", 1, i, L * (L + 1) / 2, (L + 1) // 2, L)
                                for i, L in enumerate(lengths)]))
    explore = frame[frame.phase == "final_explore"].reset_index(drop=True)
    np.testing.assert_array_equal(explore.length, lengths)  # same layouts
    assert not np.allclose(explore["return"], greedy["return"])
    again = jr.evaluate_final(EpisodeWriter(tmp_path / "again", **RUN), reset, step, policy, keys,
                              jax.random.PRNGKey(9), num_steps=4)
    np.testing.assert_array_equal(again["final_explore"]["return"], phases["final_explore"]["return"])
    with pytest.raises(RecorderError, match=r"final_explore: \d of 6 episodes did not end within num_steps=1"):
        jr.evaluate_final(EpisodeWriter(tmp_path / "short", **RUN), reset, step, policy, keys,
                          jax.random.PRNGKey(9), num_steps=1)
    assert glob.glob(str(tmp_path / "short" / "*.parquet")) == []


def test_drain_after_the_final_evaluation_is_an_error_even_with_nothing_to_write(tmp_path):
    writer = EpisodeWriter(tmp_path, **RUN)
    writer.write_final({"return": [1.0], "cost": [0.0], "length": [2]}, {"return": [1.0], "cost": [0.0], "length": [2]})
    with pytest.raises(RecorderError, match="the final evaluation is recorded; no training iterates may follow"):
        jr.drain(jr.init_recorder(2, 1), writer)
    with pytest.raises(RecorderError, match="the final evaluation is recorded already"):
        jr.evaluate_final(writer, None, None, None, jnp.zeros((2, 2), jnp.uint32), None, num_steps=1)
