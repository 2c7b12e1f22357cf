"""The functional environment API (docs/api-contracts.md, envs section) around a task.

A task supplies three pure functions: `init(key) -> (point, task_state)`,
`transition(point, task_state, action, key) -> (point, task_state, reward, cost, terminated)`
and `observe(point, task_state) -> obs`. `Env` adds fixed-length episodes with auto-reset and
the episode bookkeeping every algorithm needs, so the tasks stay small.

Keys: `reset(key)` splits key into (episode key, next-reset key); the state keeps the
next-reset key in `state.key`, so an auto-reset gives exactly `env.reset(state.key)`; the
randomness inside an episode (goal respawns) is `fold_in(state.key, t)`; a task with
`lazy_step_key = True` gets it as an unfolded `envs.lazy.StepKey` and folds it where it draws.
"""
from __future__ import annotations

import dataclasses
from typing import Any, NamedTuple

import jax
import jax.numpy as jnp

from envs.lazy import StepKey, lazy_where


class EnvState(NamedTuple):
    obs: jnp.ndarray
    reward: jnp.ndarray
    cost: jnp.ndarray
    done: jnp.ndarray
    truncated: jnp.ndarray
    terminal_obs: jnp.ndarray
    t: jnp.ndarray
    episode_return: jnp.ndarray
    episode_cost: jnp.ndarray
    finished_return: jnp.ndarray
    finished_cost: jnp.ndarray
    finished_length: jnp.ndarray
    key: jnp.ndarray
    point: Any  # physics state (envs.point.PointState, or the CRAX pipeline state)
    task: Any  # task-specific pytree (layout, last distances, ...)


@dataclasses.dataclass(frozen=True)
class Env:
    """A task behind the common API; immutable and hashable, so jax.jit can close over it."""

    task: Any
    episode_length: int
    name: str = ""
    backend: str = "builtin"

    @property
    def observation_size(self) -> int:
        return self.task.observation_size

    @property
    def action_size(self) -> int:
        return getattr(self.task, "action_size", 2)  # the built-in point robot's 2; a CRAX task gives its own

    def reset(self, key) -> EnvState:
        episode_key, next_key = jax.random.split(key)
        point, task_state = self.task.init(episode_key)
        obs = self.task.observe(point, task_state)
        zero = jnp.zeros((), jnp.float32)
        return EnvState(
            obs=obs,
            reward=zero,
            cost=zero,
            done=jnp.zeros((), bool),
            truncated=jnp.zeros((), bool),
            terminal_obs=obs,
            t=jnp.zeros((), jnp.int32),
            episode_return=zero,
            episode_cost=zero,
            finished_return=zero,
            finished_cost=zero,
            finished_length=jnp.zeros((), jnp.int32),
            key=next_key,
            point=point,
            task=task_state,
        )

    def step(self, state: EnvState, action) -> EnvState:
        action = jnp.asarray(action, jnp.float32)
        if getattr(self.task, "lazy_step_key", False):
            step_key = StepKey(state.key, state.t)
        else:
            step_key = jax.random.fold_in(state.key, state.t)
        point, task_state, reward, cost, terminated = self.task.transition(
            state.point, state.task, action, step_key
        )
        # Materialise the new physics and task state once: without the barrier XLA fuses the
        # whole substep chain into every consumer (observation pieces, reward, cost, the
        # auto-reset select) and recomputes it in each, which made steps several times slower.
        point, task_state = jax.lax.optimization_barrier((point, task_state))
        reward = jnp.asarray(reward, jnp.float32)
        cost = jnp.asarray(cost, jnp.float32)
        t = state.t + 1
        timeout = t >= self.episode_length
        done = terminated | timeout
        episode_return = state.episode_return + reward
        episode_cost = state.episode_cost + cost
        terminal_obs = self.task.observe(point, task_state)
        # The next episode's first state where done (the old state elsewhere, never selected);
        # under vmap the reset runs only on steps where some environment finished.
        fresh = lazy_where(self.reset)(done, state.key, state)
        zero = jnp.zeros((), jnp.float32)
        return EnvState(
            obs=jnp.where(done, fresh.obs, terminal_obs),
            reward=reward,
            cost=cost,
            done=done,
            truncated=timeout & ~terminated,
            terminal_obs=terminal_obs,
            t=jnp.where(done, 0, t).astype(jnp.int32),
            episode_return=jnp.where(done, zero, episode_return),
            episode_cost=jnp.where(done, zero, episode_cost),
            finished_return=jnp.where(done, episode_return, state.finished_return),
            finished_cost=jnp.where(done, episode_cost, state.finished_cost),
            finished_length=jnp.where(done, t, state.finished_length).astype(jnp.int32),
            key=jnp.where(done, fresh.key, state.key),
            point=jax.tree_util.tree_map(lambda a, b: jnp.where(done, a, b), fresh.point, point),
            task=jax.tree_util.tree_map(lambda a, b: jnp.where(done, a, b), fresh.task, task_state),
        )
