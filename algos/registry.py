"""The algorithm table: every algorithm the trainer knows, in one place.

Everything else is derived from it: `algos.config.ALGOS`, the trainer's `--algo` choices,
the runtime fields of `TrainConfig` and `Hyper` (each algorithm's scalars become `--set`
fields), whether a cost critic is trained, and the sweep configuration's allowed `algos`.
Adding an algorithm is one entry here plus its loss and update functions (in `hooks.py`, or
any importable module).

This module imports no JAX, so the workflow can read the names cheaply; the hook functions
are named as "module:function" and imported when training starts.
"""
from __future__ import annotations

import dataclasses
import functools
import importlib
from typing import Callable


@dataclasses.dataclass(frozen=True)
class Algorithm:
    """One algorithm as hooks on the PPO core (docs/algos.md).

    loss:   "module:function", `f(x: hooks.LossInputs, h: Hyper) -> scalar policy loss`
    update: "module:function", `f(multiplier, violation, h) -> new multiplier`, called once per
            update with the per-step violation c - d/T; None keeps the multiplier fixed
    multiplier_init: the scalar whose value starts the multiplier; None means the algorithm has
            no multiplier (it stays 0 and the trace records NaN)
    scalars: the algorithm's own runtime values (name -> default); names must be unique over
            the table, since each becomes a `TrainConfig` field and a `--set` key
    """

    label: str  # display name in tables and figures
    uses_cost_critic: bool
    loss: str
    update: str | None = None
    multiplier_init: str | None = None
    scalars: dict = dataclasses.field(default_factory=dict)

    @property
    def has_multiplier(self) -> bool:
        return self.multiplier_init is not None

    @property
    def loss_fn(self) -> Callable:
        return _load(self.loss)

    @property
    def update_fn(self) -> Callable | None:
        return None if self.update is None else _load(self.update)


ALGORITHMS: dict[str, Algorithm] = {
    "ppo": Algorithm(
        label="PPO", uses_cost_critic=False,  # CRAX's PPO has no cost critic
        loss="algos.hooks:ppo_loss"),
    "ppo_lag": Algorithm(
        label="PPO-Lag", uses_cost_critic=True,
        loss="algos.hooks:ppo_lag_loss", update="algos.hooks:ppo_lag_update",
        multiplier_init="lagrangian_init",
        scalars={"lagrangian_lr": 3.0, "lagrangian_init": 0.0}),
    "p3o": Algorithm(
        label="P3O", uses_cost_critic=True,
        loss="algos.hooks:p3o_loss", update="algos.hooks:p3o_update",
        multiplier_init="kappa_init",
        scalars={"kappa_init": 0.01, "kappa_factor": 1.1, "kappa_decay": 0.9, "kappa_max": 50.0}),
    "focops": Algorithm(
        label="FOCOPS", uses_cost_critic=True,
        loss="algos.hooks:focops_loss", update="algos.hooks:focops_update",
        multiplier_init="nu_init",
        # focops_kl_grad 1: CRAX differentiates FOCOPS's KL factor; 0: stop-gradient
        scalars={"nu_init": 0.1, "nu_lr": 1.0, "nu_max": 100.0, "focops_lam": 1.5, "focops_eta": 0.02,
                 "focops_kl_grad": 1.0}),
}

ALGOS: tuple[str, ...] = tuple(ALGORITHMS)


def get(name: str) -> Algorithm:
    try:
        return ALGORITHMS[name]
    except KeyError:
        raise ValueError(f"unknown algo {name!r}; known: {', '.join(ALGOS)}") from None


def algorithm_scalars() -> dict[str, float]:
    """Every algorithm's scalars (name -> default) in table order; names must not repeat."""
    out: dict[str, float] = {}
    for name, algo in ALGORITHMS.items():
        for scalar, default in algo.scalars.items():
            if scalar in out:
                raise ValueError(f"algos.registry: scalar {scalar!r} of {name!r} is already another "
                                 f"algorithm's; scalar names must be unique")
            out[scalar] = float(default)
        if algo.multiplier_init is not None and algo.multiplier_init not in algo.scalars:
            raise ValueError(f"algos.registry: {name!r} multiplier_init {algo.multiplier_init!r} "
                             f"is not one of its scalars {sorted(algo.scalars)}")
    return out


@functools.cache
def _load(ref: str) -> Callable:
    module, _, attr = ref.partition(":")
    return getattr(importlib.import_module(module), attr)
