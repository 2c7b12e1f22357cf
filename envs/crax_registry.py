"""Which CRAX safe tasks exist and at which levels: read from CRAX's own registry, never copied.

Importing this module imports no JAX. `scan()` imports crax (and so JAX, about 2-4 s) and lists
every registered environment named `safe_*` (the `safe_velocity` factory aside, which needs an
agent argument) with the levels `crax.envs.difficulty.get_supported_levels` gives it. CRAX's
difficulty table has a "velocity" entry (level L tightens the speed threshold), but its
env-to-task map lacks the six `safe_velocity_*` names, so `get_environment(..., level=L)` would
drop the level with a printed warning: `register_velocity_levels()` adds that mapping through
CRAX's public `register_env_task_mapping`. A task with no difficulty entry (safe_lift_humanoid)
has level 1 only: CRAX's own defaults.

`catalogue()` is what the sweep's config check reads: the scan's result cached as JSON per CRAX
version next to the JAX compilation cache, written by a subprocess on a miss, so Snakemake's
process never imports JAX. `sizes()` does the same for the observation and action sizes of the
tasks a size-limited algorithm (algos/registry.py, max_sizes) would train.

A run names a task by its built-in alias (goal -> safe_goal_point) or by CRAX's name.
"""
from __future__ import annotations

import difflib
import json
import os
import subprocess
import sys
from importlib import metadata

import envs

DISTRIBUTION = "crax-bench"
VELOCITY_FACTORY = "safe_velocity"  # a factory taking an `agent` argument, not a task
NO_LEVELS = [1]  # a task without a difficulty entry: CRAX's defaults, called level 1 here


def crax_version() -> str | None:
    """The installed CRAX's version (no import of crax); None when the extra is not installed."""
    try:
        return metadata.version(DISTRIBUTION)
    except metadata.PackageNotFoundError:
        return None


def crax_name(task: str) -> str:
    """CRAX's name of a task: a built-in alias's counterpart, else the name itself."""
    entry = envs.TASK_TABLE.get(task)
    return entry.crax_name if entry is not None and entry.crax_name else task


def register_velocity_levels() -> None:
    """Map each registered velocity-constrained class to CRAX's "velocity" difficulty entry."""
    import crax.envs as crax_envs
    from crax.envs import difficulty, safe_velocity

    for name, cls in crax_envs._envs.items():
        if isinstance(cls, type) and issubclass(cls, safe_velocity.SafeVelocityBase) \
                and difficulty.get_task_for_env(name) is None:
            difficulty.register_env_task_mapping(name, "velocity")


def scan() -> dict[str, list[int]]:
    """{CRAX name: its levels} of every safe task CRAX registers (imports crax and JAX)."""
    import crax.envs as crax_envs
    from crax.envs import difficulty

    register_velocity_levels()
    return {name: difficulty.get_supported_levels(name) or NO_LEVELS
            for name in sorted(crax_envs._envs) if name.startswith("safe_") and name != VELOCITY_FACTORY}


def default_cache_dir() -> str:
    """The JAX compilation cache's folder (workflow/jobenv.py's choice), where the catalogue lives."""
    return os.environ.get("JAX_COMPILATION_CACHE_DIR") or os.path.abspath(".jax_cache")


def catalogue(cache_dir: str | None = None) -> dict[str, list[int]]:
    """scan()'s result, cached in `<cache_dir>/crax_tasks-<version>.json`; a miss runs the scan in
    a subprocess (so this process stays free of JAX) and writes the file atomically."""
    version = crax_version()
    if version is None:
        raise ImportError("backend 'crax' needs the optional crax extra (PyPI crax-bench): pip install -e '.[crax]'")
    path = os.path.join(cache_dir or default_cache_dir(), f"crax_tasks-{version}.json")
    try:
        with open(path) as f:
            return {k: list(v) for k, v in json.load(f).items()}
    except (OSError, ValueError):
        pass
    os.makedirs(os.path.dirname(path), exist_ok=True)
    subprocess.run([sys.executable, "-m", "envs.crax_registry", path], check=True,
                   cwd=os.path.dirname(os.path.dirname(os.path.abspath(__file__))), stdout=subprocess.DEVNULL)
    with open(path) as f:
        return {k: list(v) for k, v in json.load(f).items()}


def measure_sizes(tasks) -> dict[str, dict[str, list[int]]]:
    """{name: {level: [observation size, action size]}} of each (name, level) in `tasks`, from
    the environment (imports crax and JAX; envs.make traces one reset, compiles nothing)."""
    out: dict = {}
    for name, level in tasks:
        env = envs.make(name, backend="crax", level=int(level), episode_length=1)
        out.setdefault(name, {})[str(level)] = [env.observation_size, env.action_size]
    return out


def sizes(tasks, cache_dir: str | None = None) -> dict[tuple[str, int], tuple[int, int]]:
    """{(name, level): (observation size, action size)} of each (name, level) in `tasks`: what
    measure_sizes gives, cached in `<cache_dir>/crax_sizes-<version>.json` beside the catalogue;
    those missing are measured in a subprocess (this process stays free of JAX; a few seconds
    per task) and added to the file atomically."""
    version = crax_version()
    if version is None:
        raise ImportError("backend 'crax' needs the optional crax extra (PyPI crax-bench): pip install -e '.[crax]'")
    path = os.path.join(cache_dir or default_cache_dir(), f"crax_sizes-{version}.json")
    missing = [(n, lv) for n, lv in tasks if str(lv) not in _read(path).get(n, {})]
    if missing:
        os.makedirs(os.path.dirname(path), exist_ok=True)
        subprocess.run([sys.executable, "-m", "envs.crax_registry", "--sizes", path,
                        *(str(v) for pair in missing for v in pair)], check=True,
                       cwd=os.path.dirname(os.path.dirname(os.path.abspath(__file__))), stdout=subprocess.DEVNULL)
    known = _read(path)
    return {(n, lv): tuple(known[n][str(lv)]) for n, lv in tasks}


def _read(path: str) -> dict:
    try:
        with open(path) as f:
            return json.load(f)
    except (OSError, ValueError):
        return {}


def check(task: str, level: int, tasks: dict[str, list[int]]) -> str:
    """CRAX's name of `task` if CRAX has it at `level`; else ValueError naming the closest valid
    names, or the levels the task has."""
    name = crax_name(task)
    if name not in tasks:
        choices = sorted(tasks) + sorted(t for t, e in envs.TASK_TABLE.items() if e.crax_name)
        close = difflib.get_close_matches(task, choices, n=3, cutoff=0.5)
        hint = f"closest: {', '.join(close)}; " if close else ""
        raise ValueError(f"unknown CRAX task {task!r}; {hint}CRAX's safe tasks: {', '.join(sorted(tasks))}")
    if level not in tasks[name]:
        raise ValueError(f"CRAX task {name!r} has no level {level!r}; its levels: "
                         f"{', '.join(str(v) for v in tasks[name])}")
    return name


def _write(path: str, table: dict) -> None:
    tmp = f"{path}.{os.getpid()}.tmp"
    with open(tmp, "w") as f:
        json.dump(table, f, indent=1, sort_keys=True)
    os.replace(tmp, path)


if __name__ == "__main__":
    if sys.argv[1] == "--sizes":  # --sizes PATH NAME LEVEL [NAME LEVEL ...]: add their sizes to PATH
        table, args = _read(sys.argv[2]), sys.argv[3:]
        for name, levels in measure_sizes(zip(args[::2], args[1::2])).items():
            table[name] = {**table.get(name, {}), **levels}
        _write(sys.argv[2], table)
    else:
        _write(sys.argv[1], scan())
