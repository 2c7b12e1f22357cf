"""PPO-Lag (Ray et al. 2019), as CRAX writes it: PPO's clipped surrogate on a Lagrangian
advantage, and a multiplier that grows while the batch's per-step cost exceeds the bound.

    A'     = A - lambda * standardise(A_C)
    loss   = -mean(min(rho A', clip(rho, 1 +- eps) A'))
    lambda <- max(0, lambda + lagrangian_lr * (c - b))      once per update, after the epochs

CRAX departs from the usual form by not dividing A' by (1 + lambda) and by comparing the
per-step batch cost c with b = d / T instead of episode costs with d. Notation: algos/ppo.py.
"""
from __future__ import annotations

import jax.numpy as jnp

from algos.config import Hyper
from algos.interface import LossInputs
from algos.ppo import clipped_surrogate, standardise


def ppo_lag_loss(x: LossInputs, h: Hyper):
    return clipped_surrogate(x.ratio, x.adv - x.multiplier * standardise(x.cost_adv), h.clip_eps)


def ppo_lag_update(m, violation, h: Hyper):
    return jnp.maximum(0.0, m + h.lagrangian_lr * violation)
