"""The CRAX backend: `crax.envs.get_environment(...)` behind the same API as the built-in tasks.

Needs the optional extra (`pip install -e ".[crax]"`, PyPI crax-bench, import name crax, which
pins mujoco and mujoco-mjx 3.11). The CRAX state (its brax `State`, holding the MJX data, obs,
reward, info['cost']) is kept in `EnvState.point`; rewards and costs are CRAX's own, per step,
unscaled. Episodes follow this package's semantics rather than CRAX's training wrappers:
fixed length T with a fresh layout from `state.key` at every auto-reset (CRAX's
AutoResetWrapper instead replays each env's first layout), and the episode totals include
every step (CRAX's EpisodeWrapper drops the first step of later episodes). Task options are
passed to CRAX's constructor unchanged (e.g. reward_distance_scale for goal).

Expect from half a minute (walkers) to several (navigation) of XLA compilation per jitted step
on a 2-core CPU and a few thousand steps/s (docs/cluster.md lists them); the built-in tasks are
the fast path.
"""
from __future__ import annotations

import dataclasses
import inspect
import types
from typing import Any

import jax
import jax.numpy as jnp

from envs.base import Env


def _strong(leaf):
    array = jnp.asarray(leaf)
    return array.astype(array.dtype)  # drops the weak type of Python scalars


@dataclasses.dataclass(frozen=True)
class CraxTask:
    """Wraps one CRAX environment; equality and hashing use the name, level and options."""

    name: str
    level: int
    options: tuple
    observation_size: int
    action_size: int
    crax_env: Any = dataclasses.field(compare=False, hash=False, repr=False)

    def init(self, key):
        # CRAX's reset leaves Python scalars in `info` (step_count = 0, ...) that its step turns
        # into int32/float32 arrays; strong-typed arrays from the start keep the state's types
        # fixed, so jitted steps and scans do not retrace.
        return jax.tree_util.tree_map(_strong, self.crax_env.reset(key)), ()

    def transition(self, crax_state, task_state, action, key):
        nxt = self.crax_env.step(crax_state, action)
        cost = nxt.info["cost"]
        return nxt, task_state, nxt.reward, cost, nxt.done > 0

    def observe(self, crax_state, task_state):
        return jnp.asarray(crax_state.obs, jnp.float32)


def _old_clip(arr, a_min=None, a_max=None, *, min=None, max=None):  # noqa: A002 (jnp.clip's names)
    return jnp.clip(arr, min=a_min if min is None else min, max=a_max if max is None else max)


def patch_fluid_clip() -> None:
    """crax-bench 0.1.0's fluid drag (crax/fluid.py: swimmer) calls `jnp.clip(x, a_min=...)`, a
    keyword JAX 0.10 removed, so safe_velocity_swimmer's step raised TypeError. Its module gets a
    `jp` whose clip also takes a_min / a_max (the same op: no other module or value changes)."""
    from crax import fluid

    if isinstance(fluid.jp, types.SimpleNamespace) or "a_min" in inspect.signature(jnp.clip).parameters:
        return
    fluid.jp = types.SimpleNamespace(**{**{k: getattr(jnp, k) for k in dir(jnp) if not k.startswith("__")},
                                        "clip": _old_clip})


def make_crax(task: str, level: int = 1, episode_length: int = 2000, **task_kwargs) -> Env:
    """Any CRAX safe task at any level it has (envs.crax_registry); `task` is a built-in alias
    (goal) or CRAX's name (safe_velocity_hopper). The sizes come from the environment itself."""
    try:
        from crax.envs import difficulty, get_environment
    except ImportError as err:
        raise ImportError(
            "envs.make(backend='crax') needs the optional crax extra (PyPI crax-bench): "
            "pip install -e '.[crax]'  (" + str(err) + ")"
        ) from err
    from envs import crax_registry

    patch_fluid_clip()
    try:
        crax_name = crax_registry.check(task, level, crax_registry.scan())
    except ValueError as err:
        raise ValueError(f"envs.make({task!r}, backend='crax', level={level!r}): {err}") from None
    # a task without a difficulty entry has only CRAX's defaults (level 1): no level to apply
    crax_level = level if difficulty.supports_difficulty(crax_name) else None
    crax_env = get_environment(crax_name, level=crax_level, **task_kwargs)
    reset_shape = jax.eval_shape(crax_env.reset, jax.ShapeDtypeStruct((2,), jnp.uint32))
    wrapped = CraxTask(
        name=task,
        level=level,
        options=tuple(sorted(task_kwargs.items())),
        observation_size=int(reset_shape.obs.shape[-1]),
        action_size=int(crax_env.action_size),
        crax_env=crax_env,
    )
    return Env(task=wrapped, episode_length=episode_length, name=task, backend="crax")
