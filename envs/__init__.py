"""Safe navigation tasks behind one functional JAX API: built-in pure-JAX tasks and a CRAX adapter.

    env = envs.make("goal", backend="builtin", level=1, episode_length=2000)
    state = env.reset(key); state = env.step(state, action)     # pure, jit/vmap-able
    vec = envs.make_vec("goal", num_envs=16)   # the same as a Gymnasium vector env (envs/gym_vec.py)

`TASK_TABLE` is the one list of tasks: a new task is its module plus an entry there (the
trainer, the sweep configuration's allowed `tasks` and the CRAX adapter read it). Importing
this package imports no JAX; `make` does: an entry names its class as
`lambda: envs.goal.GoalTask`, and a module of the package loads on its first use
(`__getattr__`). envs imports no other package of this project; the tools around the tasks
(rendering, the CRAX fidelity suite) are in `tools/`. See docs/envs.md for the tasks, their
options and every simplification against CRAX.
"""
from __future__ import annotations

import dataclasses
import importlib
from pathlib import Path
from typing import Callable

import envs  # this package itself, for the table's `lambda: envs.goal.GoalTask`


@dataclasses.dataclass(frozen=True)
class Task:
    """One task: where its built-in implementation lives and what CRAX calls it.

    builtin: a function of no arguments that returns the class: a frozen dataclass with
             `observation_size` and the pure functions init / transition / observe
             (envs/base.py); its fields are the task's options
    crax_name: CRAX's environment of the same task (backend="crax"); None if there is none.
             The built-in observation mirrors CRAX's layout, so the sizes agree.
    """

    builtin: Callable[[], type]
    crax_name: str | None = None


TASK_TABLE: dict[str, Task] = {
    "goal": Task(lambda: envs.goal.GoalTask, "safe_goal_point"),
    "circle": Task(lambda: envs.circle.CircleTask, "safe_circle_point"),
    "push": Task(lambda: envs.push.PushTask, "safe_push_point"),
    "button": Task(lambda: envs.button.ButtonTask, "safe_button_point"),
}
TASKS = tuple(TASK_TABLE)
BACKENDS = ("builtin", "crax")
LEVELS = (1,)
DEFAULT_EPISODE_LENGTH = 2000


def task_class(task: str):
    """The built-in implementation of a task (a frozen dataclass)."""
    return TASK_TABLE[task].builtin()


def check_task_options(task: str, names) -> None:
    """Refuse option names the built-in task does not have (the sweep's config check calls
    this up front, so a misspelt `train.set: {env.NAME: ...}` fails before any job starts)."""
    known = {f.name for f in dataclasses.fields(task_class(task)) if f.name != "observation_size"}
    unknown = sorted(set(names) - known)
    if unknown:
        raise ValueError(
            f"envs.make({task!r}): unknown option(s) {unknown}; this task accepts {sorted(known) or 'none'}"
        )


def _builtin_task(task: str, **task_kwargs):
    check_task_options(task, task_kwargs)
    if "contact_model" in task_kwargs:
        from envs.contacts import check_contact_model

        check_contact_model(task, task_kwargs["contact_model"])
    return task_class(task)(**task_kwargs)


def make(task: str, backend: str = "builtin", level: int = 1, episode_length: int = DEFAULT_EPISODE_LENGTH, **task_kwargs):
    """Build a task (an `Env`); options per docs/envs.md. backend "builtin": a task of TASKS at
    level 1 (LEVELS). backend "crax": a task of TASKS (its CRAX counterpart) or any CRAX safe task
    by CRAX's name, at any level CRAX has for it (envs.crax_registry; refused with the choices)."""
    if backend not in BACKENDS:
        raise ValueError(f"envs.make: unknown backend {backend!r}; known backends: {', '.join(BACKENDS)}")
    if backend == "builtin" and task not in TASKS:
        raise ValueError(f"envs.make: unknown task {task!r}; known tasks: {', '.join(TASKS)} "
                         "(backend='crax' also has CRAX's safe tasks by CRAX's name)")
    if backend == "builtin" and level not in LEVELS:
        raise ValueError(f"envs.make: level {level!r} is not available for the built-in tasks; only level 1 "
                         "(backend='crax' has levels 1-3)")
    if not isinstance(episode_length, int) or isinstance(episode_length, bool) or episode_length < 1:
        raise ValueError(f"envs.make: episode_length must be a positive int, got {episode_length!r}")
    if backend == "crax":
        from envs.crax_adapter import make_crax

        return make_crax(task, level=level, episode_length=episode_length, **task_kwargs)
    from envs.base import Env

    return Env(task=_builtin_task(task, **task_kwargs), episode_length=episode_length, name=task, backend=backend)


def __getattr__(name: str):
    # Env, EnvState and the modules are imported on first use, so `import envs` stays free of JAX
    if name in ("Env", "EnvState"):
        from envs import base

        return getattr(base, name)
    if name == "make_vec":  # Gymnasium and JAX only when asked for
        from envs.gym_vec import make_vec

        return make_vec
    if (Path(__file__).parent / f"{name}.py").is_file():
        return importlib.import_module(f"{__name__}.{name}")
    raise AttributeError(f"module 'envs' has no attribute {name!r}")


__all__ = ["TASKS", "TASK_TABLE", "Task", "BACKENDS", "LEVELS", "Env", "EnvState", "make", "make_vec"]
