"""What both learners share (the on-policy core, algos/core.py, and the off-policy core,
algos/offpolicy.py): the static pieces of a run's programs (`Learner`), the programs' interface
(`Programs`: init, a chunk of updates, evaluate), the chunk loop and its iterate log, the final
evaluation, the losses' logged form, Adam's step, and how the envs of a run (or a batched pack)
are stepped as one batch. A learner's own update is its module's `training_step`; everything a
pack, a checkpoint, a run folder or the trace reads of a run comes from here, so the two cores
are peers and a third is one more module beside them (algos/registry.py LEARNERS).

The programs close over the static config only; `Hyper` (bound, learning rates, algorithm
scalars) and the seed are traced arguments. `h` is always the run's `Hyper`.
"""
from __future__ import annotations

from typing import Any, Callable, NamedTuple

import jax
import jax.numpy as jnp
import optax

from algos import distribution as dist
from algos.config import Hyper, TrainConfig
from algos.interface import EnvTransform, Hooks
from algos.trace_schema import LOSS_METRICS
from recorders.jax_recorder import builtin_finished, keep_first, no_episodes

EVAL_SALT = 0x5EED_E7A1 & 0x7FFFFFFF  # separates evaluation layouts from training layouts


ADAM = optax.scale_by_adam()  # Adam's direction; the step is -learning_rate times it (a runtime value)


class LossMetrics(NamedTuple):
    """What one update reports of its losses (means over its minibatches); the trace's columns
    (trace_schema.LOSS_METRICS) in the same order. NaN where the update has no such loss."""

    policy_loss: jnp.ndarray
    value_loss: jnp.ndarray
    cost_value_loss: jnp.ndarray  # NaN without a cost critic
    entropy: jnp.ndarray
    approx_kl: jnp.ndarray  # mean(rho - 1 - log rho)
    action_std: jnp.ndarray  # the policy's mean pre-tanh sigma (exploration noise left)

    def flat(self) -> jnp.ndarray:
        """[len(LOSS_METRICS)] float32, the form the trace and the training state keep."""
        return jnp.stack(list(self))

    @classmethod
    def from_flat(cls, values) -> LossMetrics:
        return cls(*(values[i] for i in range(len(cls._fields))))


assert LossMetrics._fields == LOSS_METRICS, "LossMetrics and trace_schema.LOSS_METRICS name the same columns"


class IterateLog(NamedTuple):
    """Iterates logged during one chunk (rows beyond `count` are unused); after `count` the
    fields are the row of recorders.jax_recorder.advance: the episodes, then what the trainer adds."""

    count: jnp.ndarray  # int32: iterates completed in the chunk (> capacity means overflow)
    ret: jnp.ndarray  # float32 [C, N]
    cost: jnp.ndarray  # float32 [C, N]
    length: jnp.ndarray  # int32 [C, N]
    update: jnp.ndarray  # int32 [C]: update index during whose rollout the iterate completed
    step: jnp.ndarray  # int32 [C]: rollout step within that update
    multiplier: jnp.ndarray  # float32 [C]
    metrics: jnp.ndarray  # float32 [C, len(LOSS_METRICS)]
    state: jnp.ndarray  # float32 [C, len(state_columns)]: the algorithm's traced state


class UpdateSummary(NamedTuple):
    """Per update, for progress output."""

    mean_step_cost: jnp.ndarray
    multiplier: jnp.ndarray


class Programs(NamedTuple):
    """The pure functions of one static config (jit them to get its compiled programs)."""

    init: Any  # (seed, hyper) -> TrainState
    chunk: Any  # (TrainState, hyper, num_updates) -> (TrainState, IterateLog, UpdateSummary)
    evaluate: Any  # (TrainState, seed, noise_scale, hyper) -> (Finished of the eval episodes, first obs)


class Learner(NamedTuple):
    """The static pieces one config's programs are built from (Python values, no runtime ones)."""

    config: TrainConfig  # the static config (runtime fields blanked)
    hooks: Hooks  # the algorithm's (several, switched on Hyper.algo_index, in a shared program)
    env_reset: Callable  # keys [n] -> the task's state of n envs
    env_step: Callable  # (state [n], action [n, A]) -> state [n]
    with_cost: bool  # the params hold a cost critic
    cost_by_algo: tuple | None  # a shared program: per algorithm index, whether it trains the cost critic
    state_columns: tuple  # the trace's columns of the algorithm's state

    @property
    def transform(self) -> EnvTransform | None:
        return self.hooks.transform

    @property
    def activation(self) -> str:
        return self.config.activation

    @property
    def normalize(self) -> bool:
        return self.config.normalize_observations


def policy_observation(learner: Learner, transform_state, obs, h: Hyper):
    """The task's observations [n, O] as the policy sees them (an algorithm's transform may add entries)."""
    return obs if learner.transform is None else learner.transform.observe(transform_state, obs, h)


def training_reward(learner: Learner, transform_state, next_env_state, h: Hyper):
    """(transform state, the reward [n] the critics and advantages train on) after a step."""
    if learner.transform is None:
        return transform_state, next_env_state.reward
    return learner.transform.step(transform_state, next_env_state, h)


def trace_values(learner: Learner, algo_state, transform_state, h: Hyper):
    """(multiplier, state columns [len(state_columns)]) the trace logs for this state (Hooks.trace)."""
    values = learner.hooks.trace(algo_state, transform_state, h)
    n_state = len(learner.state_columns)
    if len(values) != 1 + n_state:
        raise ValueError(f"algos.registry {learner.config.algo!r}: trace gives {len(values) - 1} state columns, "
                         f"the entry names {n_state} ({learner.state_columns})")
    columns = (jnp.stack([jnp.asarray(v, jnp.float32) for v in values[1:]]) if n_state
               else jnp.zeros((0,), jnp.float32))
    return jnp.asarray(values[0], jnp.float32), columns


def adam_step(params, opt_state, grads, learning_rate):
    """(params, opt_state) after one Adam step of size `learning_rate` (a runtime value)."""
    updates, opt_state = ADAM.update(grads, opt_state, params)
    return jax.tree_util.tree_map(lambda p, u: p - learning_rate * u, params, updates), opt_state


def make_env(config: TrainConfig):
    import envs  # imported here so algos imports without the envs package being built

    return envs.make(config.task, backend=config.backend, level=config.level,
                     episode_length=config.episode_length, **dict(config.env_kwargs))


def env_batch(fn, fold_members: bool = False):
    """`jax.vmap(fn)` over a run's envs. With `fold_members`, a further vmap over a batched
    pack's members folds the member axis into the env axis: the task sees one flat batch of
    P x N envs, so each lazy branch (envs/lazy.py: respawns, the contact solve) stays one
    `cond` over the whole pack instead of becoming a select that computes every branch."""
    over_envs = jax.vmap(fn)
    if not fold_members:
        return over_envs
    fold = jax.custom_batching.custom_vmap(lambda *args: over_envs(*args))

    @fold.def_vmap
    def over_members(axis_size, in_batched, *args):
        args = jax.tree_util.tree_map(
            lambda x, b: x if b else jnp.broadcast_to(x, (axis_size,) + jnp.shape(x)), args, tuple(in_batched))
        out = over_envs(*jax.tree_util.tree_map(merge_member_axis, args))
        return jax.tree_util.tree_map(lambda x: split_member_axis(x, axis_size), out), \
            jax.tree_util.tree_map(lambda _: True, out)

    return fold


# The fold's two reshapes. Every leaf a task's state holds carries the env axis first (it comes
# out of a vmap over envs), whatever else it is: zero-size (MJX keeps empty contact arrays),
# integer, boolean, or a per-env scalar. The sizes are spelled out rather than inferred with -1,
# which is ambiguous, and fails, for a leaf with no elements.
def merge_member_axis(x):
    """[P, N, ...] -> [P*N, ...]."""
    x = jnp.asarray(x)
    if x.ndim < 2:
        raise ValueError(f"env_batch: a leaf of shape {x.shape} has no env axis to fold the members into")
    return x.reshape((x.shape[0] * x.shape[1],) + x.shape[2:])


def split_member_axis(x, members: int):
    """[P*N, ...] -> [P, N, ...]."""
    return x.reshape((members, x.shape[0] // members) + x.shape[1:])


def with_matmul_precision(precision: str):
    """A wrapper that traces a program under `jax.default_matmul_precision(precision)`, so every
    float32 matrix product in it carries that precision (TrainConfig.matmul_precision); the
    identity for "default", whose programs are exactly those traced without it."""
    if precision == "default":
        return lambda fn: fn

    def wrap(fn):
        def traced(*args):
            with jax.default_matmul_precision(precision):
                return fn(*args)
        return traced

    return wrap


def empty_log(learner: Learner) -> IterateLog:
    """A chunk's iterate log before its first update: room for `iterate_capacity` iterates."""
    cfg = learner.config
    capacity, n_envs, n_state = cfg.iterate_capacity, cfg.num_envs, len(learner.state_columns)
    return IterateLog(jnp.int32(0), jnp.zeros((capacity, n_envs), jnp.float32),
                      jnp.zeros((capacity, n_envs), jnp.float32), jnp.zeros((capacity, n_envs), jnp.int32),
                      jnp.zeros((capacity,), jnp.int32), jnp.zeros((capacity,), jnp.int32),
                      jnp.zeros((capacity,), jnp.float32), jnp.zeros((capacity, len(LOSS_METRICS)), jnp.float32),
                      jnp.zeros((capacity, n_state), jnp.float32))


def run_chunk(learner: Learner, batched: bool, state, h: Hyper, num_updates, step: Callable):
    """`chunk_updates` calls of `step(state, log) -> (state, log, UpdateSummary)` (one update of
    either core), skipping those at or past `num_updates` (a runtime budget). The state needs
    `update`, `iterates`, `algo_state` and `transform_state`."""

    def run(args):
        state, log, summary = step(*args)
        return (state, log), summary

    def skip(args):
        state = args[0]
        return args, UpdateSummary(jnp.float32(0.0), trace_values(learner, state.algo_state, state.transform_state, h)[0])

    def body(carry, _):
        active = carry[0].update < num_updates
        if not batched:
            return jax.lax.cond(active, run, skip, carry)
        # a member past its budget computes the update with its pack-mates and keeps its state
        return jax.tree_util.tree_map(lambda a, b: jnp.where(active, a, b), run(carry), skip(carry))

    (state, log), summaries = jax.lax.scan(body, (state, empty_log(learner)), None,
                                           length=learner.config.chunk_updates)
    state = state._replace(iterates=state.iterates + log.count)
    return state, log, summaries


def evaluate_policy(learner: Learner, policy: Callable, seed, noise_scale, h: Hyper, shield: Callable | None = None):
    """`eval_episodes` fresh-layout episodes of the policy `policy(obs [n, O]) -> (mu, sigma)`;
    noise_scale 1 samples it, 0 acts with its mode tanh(mu). Both settings use the same layouts
    and the same noise draws, so they differ only in the noise. An algorithm's observation
    transform starts fresh for each episode; a `shield(obs, action, env state, key)` gives the
    action the env gets in both settings. Returns (Finished of the episodes, their first
    observations). Both cores evaluate with it."""
    cfg, transform = learner.config, learner.transform
    k_reset, k_noise = jax.random.split(jax.random.fold_in(jax.random.PRNGKey(seed), EVAL_SALT))
    env_state = learner.env_reset(jax.random.split(k_reset, cfg.eval_episodes))

    def step(carry, _):
        env_state, transform_state, pending, key = carry
        key, k_act = jax.random.split(key)
        obs = policy_observation(learner, transform_state, env_state.obs, h)
        mu, sigma = policy(obs)
        action = jnp.tanh(dist.sample_pre_tanh(k_act, mu, sigma, noise_scale))
        if shield is not None:
            action = shield(obs, action, env_state, k_act)
        env_state = learner.env_step(env_state, action)
        transform_state, _ = training_reward(learner, transform_state, env_state, h)
        return (env_state, transform_state, keep_first(pending, builtin_finished(env_state)), key), None

    first_obs = env_state.obs
    transform_state = () if transform is None else transform.init(cfg.eval_episodes, h)
    (_, _, pending, _), _ = jax.lax.scan(step, (env_state, transform_state, no_episodes(cfg.eval_episodes), k_noise),
                                         None, length=cfg.episode_length)
    return pending, first_obs
