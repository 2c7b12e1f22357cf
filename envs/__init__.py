"""Safe navigation tasks behind one functional JAX API: built-in pure-JAX tasks and a CRAX adapter.

    env = envs.make("goal", backend="builtin", level=1, episode_length=2000)
    state = env.reset(key); state = env.step(state, action)     # pure, jit/vmap-able

See docs/envs.md for the tasks, their options and every simplification against CRAX.
"""
from __future__ import annotations

from envs.base import Env, EnvState

TASKS = ("goal", "circle", "push", "button")
BACKENDS = ("builtin", "crax")
LEVELS = (1,)
DEFAULT_EPISODE_LENGTH = 2000


def _builtin_task(task: str, **task_kwargs):
    if task == "goal":
        from envs.goal import GoalTask as cls
    elif task == "circle":
        from envs.circle import CircleTask as cls
    elif task == "push":
        from envs.push import PushTask as cls
    else:
        from envs.button import ButtonTask as cls
    import dataclasses

    known = {f.name for f in dataclasses.fields(cls) if f.name != "observation_size"}
    unknown = sorted(set(task_kwargs) - known)
    if unknown:
        raise ValueError(
            f"envs.make({task!r}): unknown option(s) {unknown}; this task accepts {sorted(known) or 'none'}"
        )
    return cls(**task_kwargs)


def make(task: str, backend: str = "builtin", level: int = 1, episode_length: int = DEFAULT_EPISODE_LENGTH, **task_kwargs) -> Env:
    """Build a task. task in TASKS, backend in BACKENDS, level 1 only; options per docs/envs.md."""
    if task not in TASKS:
        raise ValueError(f"envs.make: unknown task {task!r}; known tasks: {', '.join(TASKS)}")
    if backend not in BACKENDS:
        raise ValueError(f"envs.make: unknown backend {backend!r}; known backends: {', '.join(BACKENDS)}")
    if level not in LEVELS:
        raise ValueError(f"envs.make: level {level!r} is not available; only level 1 is implemented")
    if not isinstance(episode_length, int) or isinstance(episode_length, bool) or episode_length < 1:
        raise ValueError(f"envs.make: episode_length must be a positive int, got {episode_length!r}")
    if backend == "crax":
        from envs.crax_adapter import make_crax

        return make_crax(task, level=level, episode_length=episode_length, **task_kwargs)
    return Env(task=_builtin_task(task, **task_kwargs), episode_length=episode_length, name=task, backend=backend)


__all__ = ["TASKS", "BACKENDS", "LEVELS", "Env", "EnvState", "make"]
