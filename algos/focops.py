"""FOCOPS (Zhang et al. 2020), as CRAX writes it: a cost-weighted advantage, a KL-limited
surrogate, and a cost weight nu that follows the violation.

    A~   = (A - nu * A_C) / (1 + nu)
    loss = -mean(rho * A~) / focops_lam * m,  m = 1 if KL <= focops_eta else focops_eta / KL
           (KL = mean(rho - 1 - log rho), differentiated unless focops_kl_grad = 0)
    nu   <- clip(nu + nu_lr * (c - b), 0, nu_max)

CRAX departs from the paper: no per-state KL term (lam only divides the surrogate), a
batch-level KL early-stop factor m instead of per-state masking, and no ratio clipping.
Notation: algos/ppo.py.
"""
from __future__ import annotations

import jax
import jax.numpy as jnp

from algos.config import Hyper
from algos.interface import LossInputs


def focops_loss(x: LossInputs, h: Hyper):
    combined = (x.adv - x.multiplier * x.cost_adv) / (1.0 + x.multiplier)
    kl = jnp.mean((x.ratio - 1.0) - x.log_ratio)
    factor = jnp.where(kl <= h.focops_eta, 1.0, h.focops_eta / (kl + 1e-8))
    # focops_kl_grad 1: CRAX (the factor is differentiated); 0: the factor is a constant scale
    factor = h.focops_kl_grad * factor + (1.0 - h.focops_kl_grad) * jax.lax.stop_gradient(factor)
    return -jnp.mean(x.ratio * combined) / h.focops_lam * factor


def focops_update(m, violation, h: Hyper):
    return jnp.clip(m + h.nu_lr * violation, 0.0, h.nu_max)
