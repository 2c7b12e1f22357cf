"""PPO-CVaR: PPO-Lag's loss with a Lagrange multiplier on the tail of the episode cost,
CVaR_beta(C) <= d, beta = cvar_level (0.9: the mean of the costliest 10 % of episodes), the CVaR
constraint of Chow, Ghavamzadeh, Janson and Pavone (2017, JMLR, "Risk-constrained reinforcement
learning with percentile risk criteria"), by dual ascent on sampled episodes.

State: lambda and the latest CVaR estimate. Once per update, from the n episodes that ended
during its rollout (only when n > 0):

    CVaR   = the empirical CVaR: the mean of the top (1 - beta) n costs, the boundary one weighted
             by its fraction (= the Rockafellar-Uryasev minimum over nu of nu + mean((C - nu)+)/(1 - beta))
    lambda = max(0, lambda + cvar_lr * (CVaR - d))

The policy moves along PPO-Lag's direction (the clipped surrogate on A - lambda std(A_C)); Chow
et al. also learn nu and weight the gradient by 1{C > nu}: docs/algos.md.
"""
from __future__ import annotations

from typing import NamedTuple

import jax.numpy as jnp

from algos.ppo_lag import ppo_lag_loss
from algos.interface import Hooks, UpdateStats


class CVaRState(NamedTuple):
    lam: jnp.ndarray  # the Lagrange multiplier
    cvar: jnp.ndarray  # the latest CVaR estimate (NaN before any episode ended)


def empirical_cvar(ended, ended_cost, level):
    """(CVaR at `level` of the ended episodes' costs, how many ended); NaN if none ended.
    The upper tail of weight 1 - level: the top floor(w) costs whole, the next by w - floor(w),
    divided by w = (1 - level) n (at least one episode's weight)."""
    ended = jnp.asarray(ended, bool).reshape(-1)
    costs = jnp.where(ended, jnp.asarray(ended_cost, jnp.float32).reshape(-1), -jnp.inf)
    n = jnp.sum(ended).astype(jnp.float32)
    ranked = -jnp.sort(-costs)  # descending; the episodes that did not end last (-inf)
    w = jnp.clip((1.0 - level) * n, jnp.minimum(n, 1.0), n)
    rank = jnp.arange(ranked.shape[0], dtype=jnp.float32)
    weight = jnp.clip(w - rank, 0.0, 1.0)  # 1 for the top floor(w), the fraction next, then 0
    total = jnp.sum(jnp.where(weight > 0, weight * ranked, 0.0))
    return jnp.where(n > 0, total / jnp.maximum(w, 1e-12), jnp.nan), n


def init(h) -> CVaRState:
    return CVaRState(jnp.asarray(h.cvar_init, jnp.float32), jnp.float32(jnp.nan))


def update(s: CVaRState, stats: UpdateStats, h) -> CVaRState:
    cvar, n = empirical_cvar(stats.ended, stats.ended_cost, h.cvar_level)
    lam = jnp.where(n > 0, jnp.maximum(0.0, s.lam + h.cvar_lr * (cvar - h.bound)), s.lam)
    return CVaRState(lam.astype(jnp.float32), jnp.where(n > 0, cvar, s.cvar).astype(jnp.float32))


def trace(s: CVaRState, transform_state, h):
    return s.lam, s.cvar



def multiplier(s: CVaRState, h):
    """The Lagrange multiplier PPO-Lag's loss weighs the cost advantage by."""
    return s.lam


HOOKS = Hooks(init=init, trace=trace, update=update, loss=ppo_lag_loss, multiplier=multiplier)
