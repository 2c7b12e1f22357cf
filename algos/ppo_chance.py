"""PPO-Chance: PPO-Lag's loss with a Lagrange multiplier on the violation rate P(C > d) <= alpha,
the chance constraint of Chow, Ghavamzadeh, Janson and Pavone (2017, JMLR, "Risk-constrained
reinforcement learning with percentile risk criteria"), by dual ascent on sampled episodes.

State: lambda, the latest estimate of the rate and the number of episodes it came from. Once per
update, from the episodes that ended during its rollout (n of them, k with cost C > d):

    rate   = k / n
    lambda = max(0, lambda + chance_lr * (rate - chance_alpha))     (only when n > 0)

The policy moves along PPO-Lag's direction (the clipped surrogate on A - lambda std(A_C)): the
multiplier targets the violation rate, the cost advantage stands in for the indicator's gradient
(docs/algos.md says how this departs from Chow et al.).
"""
from __future__ import annotations

from typing import NamedTuple

import jax.numpy as jnp

from algos.ppo_lag import ppo_lag_loss
from algos.interface import Hooks, UpdateStats


class ChanceState(NamedTuple):
    lam: jnp.ndarray  # the Lagrange multiplier
    rate: jnp.ndarray  # the latest estimate of P(C > d) (NaN before any episode ended)
    episodes: jnp.ndarray  # how many ended episodes it came from (0: none in that update)


def violation_rate(ended, ended_cost, bound):
    """(share of the ended episodes with cost > bound, how many ended); the share is NaN if none."""
    ended = jnp.asarray(ended, bool)
    n = jnp.sum(ended).astype(jnp.float32)
    k = jnp.sum(ended & (ended_cost > bound)).astype(jnp.float32)
    return jnp.where(n > 0, k / jnp.maximum(n, 1.0), jnp.nan), n


def init(h) -> ChanceState:
    return ChanceState(jnp.asarray(h.chance_init, jnp.float32), jnp.float32(jnp.nan), jnp.float32(0.0))


def update(s: ChanceState, stats: UpdateStats, h) -> ChanceState:
    rate, n = violation_rate(stats.ended, stats.ended_cost, h.bound)
    moved = jnp.maximum(0.0, s.lam + h.chance_lr * (rate - h.chance_alpha))
    lam = jnp.where(n > 0, moved, s.lam)
    return ChanceState(lam.astype(jnp.float32), jnp.where(n > 0, rate, s.rate).astype(jnp.float32), n)


def trace(s: ChanceState, transform_state, h):
    return s.lam, s.rate, s.episodes



def multiplier(s: ChanceState, h):
    """The Lagrange multiplier PPO-Lag's loss weighs the cost advantage by."""
    return s.lam


HOOKS = Hooks(init=init, trace=trace, update=update, loss=ppo_lag_loss, multiplier=multiplier)
