"""The recorder for JAX environments stepped under ``vmap``/``scan`` (docs/byo.md).

Inside the jitted program, :func:`record` is a pure function of the recorder state and one
step's finished-episode fields of the N environments (``done``, and the return, cost and
length of the episode that just ended where ``done``). It keeps, per env, the first episode
finished since the last iterate; when every env has one they are written to a fixed-size log
(``capacity`` iterates) carried in the state. The built-in tasks' ``EnvState`` has these fields
(``done``, ``finished_return``, ``finished_cost``, ``finished_length``); for environments that
return only per-step reward, cost and done, :func:`accumulate` produces them.

On the host, after each jitted call, :func:`drain` moves the completed iterates to an
:class:`~recorders.writer.EpisodeWriter` and empties the log (the iterate in progress stays in
the state). Both functions work on one run; ``jax.vmap(record)`` records several runs at once
(drain each with ``jax.tree.map(lambda x: x[i], state)``).

:func:`keep_first` and :func:`advance` are the iterate logic itself; :func:`record` is them on
the recorder's state, and this platform's trainer (algos.core) calls them with its own log,
which keeps the update, losses and multiplier beside each iterate's episodes.
"""
from __future__ import annotations

import functools
from typing import NamedTuple

import jax
import jax.numpy as jnp
import numpy as np

from .engine import FINAL_PHASES
from .writer import EpisodeWriter, RecorderError


class EpisodeSums(NamedTuple):
    """Running sums of the episode in progress, per env (for :func:`accumulate`)."""

    ret: jnp.ndarray  # float32 [N]
    cost: jnp.ndarray  # float32 [N]
    length: jnp.ndarray  # int32 [N]


class Finished(NamedTuple):
    """One step's finished-episode fields; the values matter only where ``done``."""

    done: jnp.ndarray  # bool [N]
    ret: jnp.ndarray  # float32 [N]
    cost: jnp.ndarray  # float32 [N]
    length: jnp.ndarray  # int32 [N]


class IterateRecorder(NamedTuple):
    """Recorder state: the iterate in progress and the log of completed iterates."""

    pending: jnp.ndarray  # bool [N]: env has its episode for the iterate in progress
    ret: jnp.ndarray  # float32 [N]
    cost: jnp.ndarray  # float32 [N]
    length: jnp.ndarray  # int32 [N]
    count: jnp.ndarray  # int32: iterates completed since the last drain (> capacity: overflow)
    log_ret: jnp.ndarray  # float32 [capacity, N]
    log_cost: jnp.ndarray  # float32 [capacity, N]
    log_length: jnp.ndarray  # int32 [capacity, N]


def no_episodes(num_envs: int) -> Finished:
    """Finished fields of N envs none of which has an episode yet."""
    return Finished(jnp.zeros((num_envs,), bool), jnp.zeros((num_envs,), jnp.float32),
                    jnp.zeros((num_envs,), jnp.float32), jnp.zeros((num_envs,), jnp.int32))


def keep_first(held: Finished, step: Finished) -> Finished:
    """Per env, the first episode finished since the iterate began: ``held``'s where it has one
    (``held.done``), else this step's where it ended one. Pure."""
    newly = jnp.asarray(step.done, bool) & ~held.done
    return Finished(held.done | newly,
                    jnp.where(newly, jnp.asarray(step.ret, jnp.float32), held.ret),
                    jnp.where(newly, jnp.asarray(step.cost, jnp.float32), held.cost),
                    jnp.where(newly, jnp.asarray(step.length, jnp.int32), held.length))


def advance(held: Finished, step: Finished, log: tuple, count, extra: tuple = ()):
    """One step of the iterate logic; pure. Returns ``(held, log, count)``.

    :func:`keep_first`; then, once every env has its episode, the iterate's row
    ``(return, cost, length, *extra)`` goes to index ``count`` of ``log`` (a tuple of arrays
    with a leading capacity axis, one per entry of the row; beyond the capacity only ``count``
    grows, so the host can tell an overflow) and the next iterate begins.
    """
    held = keep_first(held, step)
    complete = jnp.all(held.done)
    capacity = log[0].shape[0]
    index = jnp.minimum(count, capacity - 1)
    row = (held.ret, held.cost, held.length, *extra)

    def write(log):
        return tuple(column.at[index].set(value) for column, value in zip(log, row))

    log = jax.lax.cond(complete & (count < capacity), write, lambda log: log, tuple(log))
    return held._replace(done=held.done & ~complete), log, count + complete.astype(jnp.int32)


def init_sums(num_envs: int) -> EpisodeSums:
    return EpisodeSums(jnp.zeros((num_envs,), jnp.float32), jnp.zeros((num_envs,), jnp.float32),
                       jnp.zeros((num_envs,), jnp.int32))


def accumulate(sums: EpisodeSums, reward, cost, done) -> tuple[EpisodeSums, Finished]:
    """Add one step's reward and cost (every step, the last one included); pure.

    Returns the new sums (zero where ``done``: the next step starts a new episode) and the
    step's :class:`Finished` fields, for environments that do not keep episode sums themselves.
    """
    done = jnp.asarray(done, bool)
    ret = sums.ret + jnp.asarray(reward, jnp.float32)
    total_cost = sums.cost + jnp.asarray(cost, jnp.float32)
    length = sums.length + 1
    zero = jnp.zeros_like(ret)
    new = EpisodeSums(jnp.where(done, zero, ret), jnp.where(done, zero, total_cost), jnp.where(done, 0, length))
    return new, Finished(done, ret, total_cost, length)


def init_recorder(num_envs: int, capacity: int) -> IterateRecorder:
    """An empty recorder for N envs whose log holds ``capacity`` iterates between drains."""
    for name, value in (("num_envs", num_envs), ("capacity", capacity)):
        if isinstance(value, bool) or not isinstance(value, (int, np.integer)) or value < 1:
            raise RecorderError(f"init_recorder: {name} must be an integer >= 1, got {value!r}")
    n, c = int(num_envs), int(capacity)
    return IterateRecorder(*no_episodes(n), jnp.int32(0), jnp.zeros((c, n), jnp.float32),
                           jnp.zeros((c, n), jnp.float32), jnp.zeros((c, n), jnp.int32))


def record(rec: IterateRecorder, done, finished_return, finished_cost, finished_length) -> IterateRecorder:
    """One step of the recorder; pure, so it runs inside jit, scan and vmap.

    ``done`` marks the envs whose episode ended at this step; the other three give that
    episode's return, cost and length (other entries are ignored).
    """
    held = Finished(rec.pending, rec.ret, rec.cost, rec.length)
    step = Finished(done, finished_return, finished_cost, finished_length)
    held, logs, count = advance(held, step, (rec.log_ret, rec.log_cost, rec.log_length), rec.count)
    return IterateRecorder(*held, count, *logs)


def record_finished(rec: IterateRecorder, finished: Finished) -> IterateRecorder:
    """:func:`record` with the fields of :func:`accumulate`."""
    return record(rec, finished.done, finished.ret, finished.cost, finished.length)


def completed(rec: IterateRecorder) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """The completed iterates in the log as host arrays (return, cost, length), each [k, N].

    Raises if more iterates completed than the log holds (episodes shorter than the capacity
    was sized for): nothing is returned then, since the extra iterates were not kept.
    """
    if np.ndim(rec.count) != 0:
        raise RecorderError(f"completed/drain take one run's recorder; this one has leading axes "
                            f"{np.shape(rec.count)} (select a run with jax.tree.map(lambda x: x[i], rec))")
    count, capacity = int(rec.count), rec.log_ret.shape[0]
    if count > capacity:
        raise RecorderError(f"recorder log overflow: {count} iterates completed between drains but the log holds "
                            f"{capacity}; drain more often or pass a larger capacity to init_recorder")
    return (np.asarray(rec.log_ret[:count]), np.asarray(rec.log_cost[:count]), np.asarray(rec.log_length[:count]))


def clear_log(rec: IterateRecorder) -> IterateRecorder:
    """The same recorder with an empty log; the iterate in progress is kept. Pure."""
    return rec._replace(count=jnp.zeros_like(rec.count))


def drain(rec: IterateRecorder, writer: EpisodeWriter, trainer_step: int | None = None) -> IterateRecorder:
    """Host side: append the completed iterates to ``writer`` and return the recorder with an empty log.

    ``trainer_step`` labels them with the loop's own epoch or step count (default: ``writer.trainer_step``)."""
    ret, cost, length = completed(rec)
    writer.append_iterates(ret, cost, length, trainer_step=trainer_step)
    return clear_log(rec)


# ---- final evaluation ----------------------------------------------------------------
def final_rollout(reset, step, policy, reset_keys, noise_key, num_steps: int, noise_scale) -> IterateRecorder:
    """Pure: one episode per reset key under ``policy``, recorded as one iterate (jit it).

    ``reset(key) -> (state, obs)`` and ``step(state, action) -> (state, obs, reward, cost, done)``
    act on ONE env (they are vmapped here; the env may auto-reset, only each env's first
    episode counts); ``policy(obs, key, noise_scale) -> action`` acts on the batch of
    observations and scales its noise by ``noise_scale`` (0: the greedy action). The per-step
    keys come from ``noise_key`` alone, so two calls that differ only in ``noise_scale`` get the
    same layouts and the same noise draws. The result's ``count`` is 0 if some episode did not
    end within ``num_steps``.
    """
    n = reset_keys.shape[0]
    state, obs = jax.vmap(reset)(reset_keys)

    def body(carry, _):
        state, obs, sums, held, key = carry
        key, k_act = jax.random.split(key)
        state, obs, reward, cost, done = jax.vmap(step)(state, policy(obs, k_act, noise_scale))
        sums, finished = accumulate(sums, reward, cost, done)
        return (state, obs, sums, keep_first(held, finished), key), None

    carry = (state, obs, init_sums(n), no_episodes(n), noise_key)
    (_, _, _, held, _), _ = jax.lax.scan(body, carry, None, length=num_steps)
    # each env's first episode only (envs that auto-reset may finish more): one iterate or none
    complete = jnp.all(held.done)
    return IterateRecorder(held.done & ~complete, held.ret, held.cost, held.length, complete.astype(jnp.int32),
                           held.ret[None], held.cost[None], held.length[None])


def evaluate_final(writer: EpisodeWriter, reset, step, policy, reset_keys, noise_key, num_steps: int) -> dict:
    """Host side: run :func:`final_rollout` with noise (scale 1) and greedily (scale 0) and
    record them as the two final phases. Returns ``{phase: {"return", "cost", "length"}}``."""
    if writer.final_written:
        raise RecorderError(f"{writer.folder}: the final evaluation is recorded already")
    reset_keys = jnp.asarray(reset_keys)
    if reset_keys.ndim < 1 or reset_keys.shape[0] < 1:
        raise RecorderError(f"evaluate_final: reset_keys must hold one key per episode, got shape {reset_keys.shape}")
    if isinstance(num_steps, bool) or not isinstance(num_steps, (int, np.integer)) or num_steps < 1:
        raise RecorderError(f"evaluate_final: num_steps must be an integer >= 1, got {num_steps!r}")
    phases = {}
    for phase, scale in zip(FINAL_PHASES, (1.0, 0.0)):
        rec = _final_rollout_jit(reset, step, policy, reset_keys, noise_key, int(num_steps), jnp.float32(scale))
        if int(rec.count) < 1:
            raise RecorderError(f"evaluate_final: {phase}: {int(np.sum(~np.asarray(rec.pending)))} of "
                                f"{reset_keys.shape[0]} episodes did not end within num_steps={num_steps}")
        ret, cost, length = (x[0] for x in completed(rec))
        phases[phase] = {"return": ret, "cost": cost, "length": length}
    writer.write_final(*(phases[phase] for phase in FINAL_PHASES))
    return phases


# one compiled program per (reset, step, policy, num_steps, shapes): both phases and every seed share it
_final_rollout_jit = jax.jit(final_rollout, static_argnums=(0, 1, 2, 5))


@functools.lru_cache(maxsize=None)
def builtin_env_functions(env):
    """``(reset, step)`` for :func:`final_rollout` from one of this platform's ``envs.Env`` tasks
    (the same pair for the same env, so that its compiled evaluation is reused)."""

    def reset(key):
        state = env.reset(key)
        return state, state.obs

    def step(state, action):
        state = env.step(state, action)
        return state, state.obs, state.reward, state.cost, state.done

    return reset, step


def builtin_finished(state) -> Finished:
    """The finished-episode fields of a built-in task's (batched) ``EnvState``."""
    return Finished(state.done, state.finished_return, state.finished_cost, state.finished_length)
