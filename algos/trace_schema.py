"""The trace schema: what the trainer logs per iterate, from the compiled program to trace.parquet.

One place names the logged fields, their shapes and dtypes and the trace's columns; the
program (algos.core: the metrics vector, IterateLog), the host log between chunks and in
checkpoints (runs.pack.HostLog), and the run folder writer (runs.train, runs.runfolder)
read it. A new logged scalar of the losses is one name in LOSS_METRICS; an algorithm's own
state columns come from its registry entry. No JAX here (the workflow reads the columns).
"""
from __future__ import annotations

import numpy as np

# The losses of an update, in the order of the program's metrics vector (means over minibatches).
# action_std: the policy's mean pre-tanh sigma over the minibatch's states and action dims (how
# much exploration noise the policy still adds; its greedy action drops it).
LOSS_METRICS = ("policy_loss", "value_loss", "cost_value_loss", "entropy", "approx_kl", "action_std")
# What an algorithm's own policy step (algos.interface.Hooks.policy_step) reports, in this order.
POLICY_STEP_METRICS = ("policy_loss", "entropy", "approx_kl")

# Per logged iterate, copied off the device after each chunk: field -> (shape after the iterate
# axis, dtype). "envs" is N (each env's episode), "metrics" LOSS_METRICS, "state" the
# algorithm's state columns. wall_time is added on the host.
HOST_FIELDS = {
    "update": ((), np.int32),  # the update during whose rollout the iterate completed
    "step": ((), np.int32),  # the rollout step within that update
    "ret": (("envs",), np.float32),
    "cost": (("envs",), np.float32),
    "length": (("envs",), np.int32),
    "multiplier": ((), np.float32),
    "metrics": (("metrics",), np.float32),
    "state": (("state",), np.float32),
    "wall_time": ((), np.float64),
}
DEVICE_FIELDS = tuple(name for name in HOST_FIELDS if name != "wall_time")

# trace.parquet: these columns (float64 but the first three), then the algorithm's state columns.
TRACE_COLUMNS = ("iteration", "update", "env_steps", "wall_time", "multiplier", *LOSS_METRICS,
                 "mean_return", "mean_cost")


def field_shape(name: str, num_envs: int, num_state: int) -> tuple:
    sizes = {"envs": num_envs, "metrics": len(LOSS_METRICS), "state": num_state}
    return tuple(sizes[axis] for axis in HOST_FIELDS[name][0])


def empty_field(name: str, num_envs: int, num_state: int) -> np.ndarray:
    """No iterates yet: a (0, ...) array of the field's shape and dtype."""
    return np.zeros((0, *field_shape(name, num_envs, num_state)), HOST_FIELDS[name][1])


def trace_columns(arrays: dict, rollout_steps: int, num_envs: int, has_multiplier: bool,
                  state_columns=()) -> dict:
    """The trace's columns (TRACE_COLUMNS, then `state_columns`) from a run's host log;
    `rollout_steps`: steps per env in one update's rollout."""
    J = len(arrays["update"])
    steps = arrays["update"].astype(np.int64) * rollout_steps + arrays["step"] + 1  # per env
    return {
        "iteration": np.arange(J), "update": arrays["update"].astype(np.int64), "env_steps": steps * num_envs,
        "wall_time": arrays["wall_time"],
        "multiplier": arrays["multiplier"].astype(np.float64) if has_multiplier else np.full(J, np.nan),
        **{name: arrays["metrics"][:, i].astype(np.float64) for i, name in enumerate(LOSS_METRICS)},
        "mean_return": arrays["ret"].mean(axis=1).astype(np.float64) if J else np.zeros(0),
        "mean_cost": arrays["cost"].mean(axis=1).astype(np.float64) if J else np.zeros(0),
        # the algorithm's own state at the same points (its registry entry's state_columns)
        **{name: arrays["state"][:, i].astype(np.float64) for i, name in enumerate(state_columns)},
    }
