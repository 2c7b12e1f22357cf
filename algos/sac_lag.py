"""SAC, SAC-Lag and SAC-PID: the algorithms of the off-policy core (algos/offpolicy.py), as CRAX
writes them (`training/agents/sac/`, `sac_lag/`, `sac_pid/`).

The core owns what the three share (the critics, the temperature, the replay buffer); an
algorithm owns only its multiplier lambda, which weighs the cost critic in the actor's loss
(alpha log pi - min Q + lambda min Q_C). It moves once per gradient step, from the sampled
batch's mean per-step cost c against the per-step bound d/T (`UpdateStats`):

* SAC: no multiplier and no cost critic.
* SAC-Lag: lambda <- min(relu(lambda + (lr / T) (c - d/T)), lambda_max). CRAX divides its rate
  by T so that `sac_lagrangian_lr` sits on PPO-Lag's per-episode scale.
* SAC-PID: PPO-PID's controller (algos/ppo_pid.py), once per gradient step.
"""
from __future__ import annotations

from typing import NamedTuple

import jax
import jax.numpy as jnp

from algos import ppo_pid
from algos.interface import Hooks, UpdateStats


class LagState(NamedTuple):
    lam: jnp.ndarray  # the Lagrange multiplier


def lag_init(h) -> LagState:
    return LagState(jnp.asarray(h.sac_lambda_init, jnp.float32))


def lag_update(s: LagState, stats: UpdateStats, h) -> LagState:
    step = h.sac_lagrangian_lr / jnp.maximum(stats.episode_length, 1.0)
    lam = jnp.minimum(jax.nn.relu(s.lam + step * stats.violation), h.sac_lambda_max)
    return LagState(lam.astype(jnp.float32))


def no_multiplier_init(h) -> LagState:
    return LagState(jnp.float32(0.0))


HOOKS = Hooks(init=lag_init, update=lag_update, trace=lambda s, transform_state, h: (s.lam,),
              multiplier=lambda s, h: s.lam)
SAC_HOOKS = Hooks(init=no_multiplier_init, trace=lambda s, transform_state, h: (s.lam,))
PID_HOOKS = Hooks(init=ppo_pid.init, update=ppo_pid.update, trace=ppo_pid.trace, multiplier=ppo_pid.multiplier)
