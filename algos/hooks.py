"""The paper's four algorithms as hooks on the PPO core: a policy loss and a multiplier/penalty
update (the registry's simple form; algos/interface.py adapts it to the general `Hooks`).

The table in `algos/registry.py` names each algorithm's functions here. Each follows CRAX's variant.
Notation: rho is the probability ratio pi/pi_old, A the reward advantage standardised per
minibatch, A_C the raw cost advantage, c the batch's mean per-step cost and b = d / T the
per-step bound. The multiplier is updated once per update, after the SGD epochs, from c - b.

* PPO: -mean(min(rho A, clip(rho) A)). No cost critic.
* PPO-Lag (Ray et al. 2019): A' = A - lambda * standardise(A_C), clipped surrogate on A';
  lambda <- max(0, lambda + lr * (c - b)). CRAX departs from the usual form by not dividing
  A' by (1 + lambda) and by comparing the per-step batch cost with d / T instead of episode
  costs with d.
* P3O (Zhang et al. 2022): L_R + kappa * [relu(S_C + (1 - gamma) * Delta) + 0.1 * relu(Delta)]
  with S_C = mean(max(rho A_C, clip(rho) A_C)) and Delta = c - b of the *previous* update;
  kappa <- min(factor * kappa, kappa_max) on violation, else max(decay * kappa, kappa_init).
  CRAX departs from the paper by using the per-step violation (not J_C - d) in the penalty, by
  the extra 0.1 * relu(Delta) term, and by adapting kappa instead of keeping it fixed.
* FOCOPS (Zhang et al. 2020): A~ = (A - nu * A_C) / (1 + nu); loss
  -mean(rho * A~) / lam * m with m = 1 if KL <= eta else eta / KL (KL = mean(rho - 1 - log rho),
  not stop-gradient); nu <- clip(nu + nu_lr * (c - b), 0, nu_max). CRAX departs from the
  paper: no per-state KL term (lam only divides the surrogate), a batch-level KL early-stop
  factor m instead of per-state masking, and no ratio clipping.
"""
from __future__ import annotations

import jax
import jax.numpy as jnp

from algos.config import Hyper
from algos.interface import LossInputs


def standardise(x):
    return (x - jnp.mean(x)) / (jnp.std(x) + 1e-8)


def clipped_surrogate(ratio, adv, clip_eps):
    """-mean(min(rho A, clip(rho, 1 +- eps) A)): PPO's loss for maximising A."""
    return -jnp.mean(jnp.minimum(ratio * adv, jnp.clip(ratio, 1.0 - clip_eps, 1.0 + clip_eps) * adv))


# ---- the algorithms' hooks (named in algos/registry.py) ---------------------------------

def ppo_loss(x: LossInputs, h: Hyper):
    return clipped_surrogate(x.ratio, x.adv, h.clip_eps)


def ppo_lag_loss(x: LossInputs, h: Hyper):
    return clipped_surrogate(x.ratio, x.adv - x.multiplier * standardise(x.cost_adv), h.clip_eps)


def ppo_lag_update(m, violation, h: Hyper):
    return jnp.maximum(0.0, m + h.lagrangian_lr * violation)


def p3o_loss(x: LossInputs, h: Hyper):
    reward_loss = clipped_surrogate(x.ratio, x.adv, h.clip_eps)
    clipped = jnp.clip(x.ratio, 1.0 - h.clip_eps, 1.0 + h.clip_eps)
    cost_surrogate = jnp.mean(jnp.maximum(x.ratio * x.cost_adv, clipped * x.cost_adv))
    delta = x.last_violation
    penalty = jax.nn.relu(cost_surrogate + (1.0 - h.discount) * delta) + 0.1 * jax.nn.relu(delta)
    return reward_loss + x.multiplier * penalty


def p3o_update(m, violation, h: Hyper):
    return jnp.where(violation > 0, jnp.minimum(h.kappa_factor * m, h.kappa_max),
                     jnp.maximum(h.kappa_decay * m, h.kappa_init))


def focops_loss(x: LossInputs, h: Hyper):
    combined = (x.adv - x.multiplier * x.cost_adv) / (1.0 + x.multiplier)
    kl = jnp.mean((x.ratio - 1.0) - x.log_ratio)
    factor = jnp.where(kl <= h.focops_eta, 1.0, h.focops_eta / (kl + 1e-8))
    # focops_kl_grad 1: CRAX (the factor is differentiated); 0: the factor is a constant scale
    factor = h.focops_kl_grad * factor + (1.0 - h.focops_kl_grad) * jax.lax.stop_gradient(factor)
    return -jnp.mean(x.ratio * combined) / h.focops_lam * factor


def focops_update(m, violation, h: Hyper):
    return jnp.clip(m + h.nu_lr * violation, 0.0, h.nu_max)
