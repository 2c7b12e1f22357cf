"""CRPO (Xu, Liang and Lan 2021), as CRAX writes it (`training/agents/crpo/`).

State: the regime, 1 (optimise the reward) or 0 (optimise the cost), initially 1. Once per
update, from the batch's mean per-step cost c: regime = 0 if c - d/T > crpo_eta else 1; the
next update's SGD epochs then minimise one objective only, each with PPO's clipped surrogate:

    regime 1:  -mean(min(rho A, clip(rho) A))          A   = standardised reward advantage
    regime 0:  -mean(min(rho (-A_C), clip(rho) (-A_C)))  A_C = standardised cost advantage

The critics are fitted in both regimes. The trace's multiplier is 1 - regime (1 when the update
minimised the cost). Departures from the paper: docs/algos.md.
"""
from __future__ import annotations

from typing import NamedTuple

import jax.numpy as jnp

from algos.ppo import clipped_surrogate, standardise
from algos.interface import Hooks, LossInputs, UpdateStats


class CRPOState(NamedTuple):
    regime: jnp.ndarray  # 1.0: reward step, 0.0: cost step


def init(h) -> CRPOState:
    return CRPOState(jnp.float32(1.0))  # CRAX: the constraint starts out satisfied


def update(s: CRPOState, stats: UpdateStats, h) -> CRPOState:
    return CRPOState(jnp.where(stats.violation > h.crpo_eta, 0.0, 1.0).astype(jnp.float32))


def loss(x: LossInputs, h):
    reward_loss = clipped_surrogate(x.ratio, x.adv, h.clip_eps)
    cost_loss = clipped_surrogate(x.ratio, -standardise(x.cost_adv), h.clip_eps)
    return jnp.where(x.state.regime > 0.5, reward_loss, cost_loss)


def trace(s: CRPOState, transform_state, h):
    return (1.0 - s.regime,)


HOOKS = Hooks(init=init, trace=trace, update=update, loss=loss)
