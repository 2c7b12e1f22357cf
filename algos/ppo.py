"""PPO (CRAX's): the clipped surrogate on the reward advantage, no cost critic, no multiplier.

Notation of the algorithm modules: rho is the probability ratio pi/pi_old, A the reward
advantage standardised per minibatch, A_C the raw cost advantage, c the batch's mean per-step
cost and b = d / T the per-step bound. A multiplier is updated once per update, after the SGD
epochs, from c - b.

    loss = -mean(min(rho A, clip(rho, 1 +- eps) A))
"""
from __future__ import annotations

import jax.numpy as jnp

from algos.config import Hyper
from algos.interface import LossInputs


def standardise(x):
    return (x - jnp.mean(x)) / (jnp.std(x) + 1e-8)


def clipped_surrogate(ratio, adv, clip_eps):
    """-mean(min(rho A, clip(rho, 1 +- eps) A)): PPO's loss for maximising A."""
    return -jnp.mean(jnp.minimum(ratio * adv, jnp.clip(ratio, 1.0 - clip_eps, 1.0 + clip_eps) * adv))


def ppo_loss(x: LossInputs, h: Hyper):
    return clipped_surrogate(x.ratio, x.adv, h.clip_eps)
