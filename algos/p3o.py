"""P3O (Zhang et al. 2022), as CRAX writes it: the reward surrogate plus an exact penalty on the
clipped cost surrogate, weighted by an adaptive penalty factor kappa.

    loss  = L_R + kappa * [relu(S_C + (1 - gamma) * Delta) + 0.1 * relu(Delta)]
    S_C   = mean(max(rho A_C, clip(rho) A_C)),  Delta = c - b of the *previous* update
    kappa <- min(kappa_factor * kappa, kappa_max) on violation, else max(kappa_decay * kappa, kappa_init)

CRAX departs from the paper by using the per-step violation (not J_C - d) in the penalty, by
the extra 0.1 * relu(Delta) term, and by adapting kappa instead of keeping it fixed.
Notation: algos/ppo.py.
"""
from __future__ import annotations

import jax
import jax.numpy as jnp

from algos.config import Hyper
from algos.interface import LossInputs
from algos.ppo import clipped_surrogate


def p3o_loss(x: LossInputs, h: Hyper):
    reward_loss = clipped_surrogate(x.ratio, x.adv, h.clip_eps)
    clipped = jnp.clip(x.ratio, 1.0 - h.clip_eps, 1.0 + h.clip_eps)
    cost_surrogate = jnp.mean(jnp.maximum(x.ratio * x.cost_adv, clipped * x.cost_adv))
    delta = x.state.last_violation
    penalty = jax.nn.relu(cost_surrogate + (1.0 - h.discount) * delta) + 0.1 * jax.nn.relu(delta)
    return reward_loss + x.multiplier * penalty


def p3o_update(m, violation, h: Hyper):
    return jnp.where(violation > 0, jnp.minimum(h.kappa_factor * m, h.kappa_max),
                     jnp.maximum(h.kappa_decay * m, h.kappa_init))
