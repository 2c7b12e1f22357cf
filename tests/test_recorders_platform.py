"""Recorded shards give the same table and the same metrics as this platform's own trainer.

The trainer (runs.train.run) trains PPO on a variant of the built-in goal task whose dynamics
ignore the policy's action (the agent moves by an action drawn from the env's own step key)
and which also ends each episode early with probability 0.1 per step. So its episodes depend
only on the env's keys, not on the learning, and a plain rollout of the same env from the same
reset keys produces exactly the episodes the trainer logged. The recorders are put on that
rollout: the JAX recorder reads the env's finished_* fields inside a jitted scan, and the
Gymnasium vector recorder sees the same steps through a Gymnasium VectorEnv. Early
termination makes the envs finish at different times, so the iterate grouping (first episode
per env, extra ones dropped) is what is being compared, not only the sums.
"""
import dataclasses

import gymnasium
import jax
import jax.numpy as jnp
import numpy as np
import pandas as pd
import pytest

import metrics
from runs import train
from algos.config import make_config
from algos.learning import EVAL_SALT
from envs.base import Env
from envs.goal import GoalTask
from metrics.cli import main as metrics_main
from recorders import EpisodeWriter
from recorders import jax_recorder as jr
from recorders.gym import RecordVectorEpisodes

pytestmark = pytest.mark.slow
SEED, N, T, EVAL = 3, 8, 30, 6


@dataclasses.dataclass(frozen=True)
class ActionBlindGoal:
    """The goal task driven by actions drawn from the step key; ends early with probability p."""

    inner: GoalTask = GoalTask(reward_distance_scale=1.0)
    stop_probability: float = 0.1

    @property
    def observation_size(self) -> int:
        return self.inner.observation_size

    def init(self, key):
        return self.inner.init(key)

    def observe(self, agent, task):
        return self.inner.observe(agent, task)

    def transition(self, agent, task, action, key):
        k_action, k_stop = jax.random.split(jax.random.fold_in(key, 0x0B11D))
        action = jax.random.uniform(k_action, (2,), minval=-1.0, maxval=1.0)
        agent, task, reward, cost, terminated = self.inner.transition(agent, task, action, key)
        return agent, task, reward, cost, terminated | (jax.random.uniform(k_stop) < self.stop_probability)


ENV = Env(task=ActionBlindGoal(), episode_length=T, name="goal")
CONFIG = make_config("cpu", dict(task="goal", bound=4.0, algo="ppo", seed=SEED, num_envs=N, episode_length=T,
                                 total_steps=64 * 20, eval_episodes=EVAL),
                     ["batch_size=8", "num_minibatches=1", "num_epochs=1", "policy_hidden=4", "critic_hidden=4",
                      "chunk_updates=10", "log_capacity=64"])
STEPS = CONFIG.num_updates * CONFIG.unrolls_per_update * CONFIG.unroll_length  # rollout steps per env
IDENTITY = dict(task="goal", bound=4.0, algo="ppo", seed=SEED)


def initial_states():
    """The trainer's first env states: algos.core.init splits PRNGKey(seed) into (params, env, run)."""
    _, k_env, _ = jax.random.split(jax.random.PRNGKey(SEED), 3)
    return jax.vmap(ENV.reset)(jax.random.split(k_env, N))


def eval_keys():
    """The trainer's evaluation keys (algos.core evaluate): reset keys and noise key."""
    k_reset, k_noise = jax.random.split(jax.random.fold_in(jax.random.PRNGKey(SEED), EVAL_SALT))
    return jax.random.split(k_reset, EVAL), k_noise


@pytest.fixture(scope="module")
def trainer_table(tmp_path_factory):
    out = tmp_path_factory.mktemp("trainer")
    assert train.run(CONFIG, str(out), env=ENV, quiet=True) == 0
    return str(out / "episodes.parquet")


def record_with_jax(folder):
    writer = EpisodeWriter(folder, **IDENTITY)

    @jax.jit
    def rollout(state):
        def body(c, _):
            state, rec = c
            state = jax.vmap(ENV.step)(state, jnp.zeros((N, 2)))
            return (state, jr.record(rec, state.done, state.finished_return, state.finished_cost,
                                     state.finished_length)), None

        return jax.lax.scan(body, (state, jr.init_recorder(N, 64)), None, length=STEPS)[0][1]

    jr.drain(rollout(initial_states()), writer)
    reset, step = jr.builtin_env_functions(ENV)
    reset_keys, noise_key = eval_keys()
    jr.evaluate_final(writer, reset, step, lambda obs, key, scale: jnp.zeros((obs.shape[0], 2)), reset_keys,
                      noise_key, num_steps=T)
    return writer.files()


class BuiltinVectorEnv(gymnasium.vector.VectorEnv):
    """The built-in env behind Gymnasium's vector API (it resets inside the step: same-step mode)."""

    metadata = {"autoreset_mode": gymnasium.vector.AutoresetMode.SAME_STEP}

    def __init__(self):
        self.num_envs = N
        self._step = jax.jit(jax.vmap(ENV.step))

    def reset(self, *, seed=None, options=None):
        self.state = initial_states()
        return np.asarray(self.state.obs), {}

    def step(self, actions):
        self.state = self._step(self.state, jnp.asarray(actions))
        s = self.state
        return (np.asarray(s.obs), np.asarray(s.reward), np.asarray(s.done & ~s.truncated), np.asarray(s.truncated),
                {"cost": np.asarray(s.cost)})


def test_jax_recorder_reproduces_the_trainers_episode_table_and_metrics(trainer_table, tmp_path):
    files = record_with_jax(tmp_path / "jax")
    ours, theirs = metrics.read_episodes(files), metrics.read_episodes([trainer_table])
    columns = ["task", "bound", "algo", "seed", "phase", "iteration", "episode", "return", "cost"]
    assert theirs.phase.value_counts().to_dict() == {"train": len(theirs) - 2 * EVAL, "final_explore": EVAL,
                                                     "final_greedy": EVAL}
    assert theirs[theirs.phase == "train"].iteration.nunique() >= 3
    keys = columns[:-2]
    assert ours[keys].equals(theirs[keys])  # the same episodes in the same iterates
    # the same float32 sums, up to the last bit: XLA compiles the env step into two different programs
    np.testing.assert_allclose(ours[["return", "cost"]], theirs[["return", "cost"]], rtol=1e-6, atol=1e-6)
    raw = pd.concat([pd.read_parquet(f) for f in files]).sort_values(["phase", "iteration", "episode"])
    trainer_raw = pd.read_parquet(trainer_table).sort_values(["phase", "iteration", "episode"])
    np.testing.assert_array_equal(raw.length, trainer_raw.length)
    assert (raw.length < T).any()  # early terminations happened
    for name, paths in (("ours", files), ("trainer", [trainer_table])):
        assert metrics_main(["evaluate", *paths, "--out", str(tmp_path / name), "--reps", "20"]) == 0
    for output in ("run_metrics.parquet", "iterates.parquet"):
        a = pd.read_parquet(tmp_path / "ours" / output).drop(columns="source", errors="ignore")
        b = pd.read_parquet(tmp_path / "trainer" / output).drop(columns="source", errors="ignore")
        pd.testing.assert_frame_equal(a, b, rtol=1e-5)


def test_gymnasium_vector_recorder_reproduces_the_trainers_training_iterates(trainer_table, tmp_path):
    writer = EpisodeWriter(tmp_path / "gym", **IDENTITY)
    env = RecordVectorEpisodes(BuiltinVectorEnv(), writer)
    env.reset()
    for _ in range(STEPS):
        env.step(np.zeros((N, 2), np.float32))
    env.close()
    ours = pd.concat([pd.read_parquet(f) for f in writer.files()]).reset_index(drop=True)
    theirs = pd.read_parquet(trainer_table)
    theirs = theirs[theirs.phase == "train"].reset_index(drop=True)
    for column in ("iteration", "episode", "length"):
        np.testing.assert_array_equal(ours[column], theirs[column])
    # the Gymnasium recorder sums the float32 step values in float64; the trainer sums in float32
    np.testing.assert_allclose(ours["return"], theirs["return"], rtol=1e-5, atol=1e-5)
    np.testing.assert_allclose(ours["cost"], theirs["cost"], rtol=1e-5, atol=1e-5)
