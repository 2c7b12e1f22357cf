"""Safe RL algorithms in JAX on two cores side by side, on-policy (core.py) and off-policy
(offpolicy.py), sharing learning.py; algos/registry.py's table lists them (docs/algos.md).

Importing the package imports no JAX. A module is loaded on its first use as an attribute
(`algos.ppo_pid`), so the registry names each algorithm's code as `lambda: algos.ppo_pid.HOOKS`
and the workflow reads the table without loading any of it.
"""
from __future__ import annotations

import importlib
from pathlib import Path


def __getattr__(name: str):
    if (Path(__file__).parent / f"{name}.py").is_file():
        return importlib.import_module(f"{__name__}.{name}")
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
