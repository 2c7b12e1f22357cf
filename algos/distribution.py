"""The tanh-squashed Gaussian policy distribution, as CRAX (Brax) defines it.

The policy network outputs (mu, raw) per action; sigma = softplus(raw) + 0.001. Actions are
sampled in pre-tanh space z ~ N(mu, sigma) and the env receives tanh(z). The greedy (mode)
action is tanh(mu).
"""
from __future__ import annotations

import jax
import jax.numpy as jnp

MIN_SCALE = 0.001
_LOG_2PI = jnp.log(2.0 * jnp.pi)


def split_output(out):
    """(mu, sigma) from the policy network's output [..., 2A]."""
    mu, raw = jnp.split(out, 2, axis=-1)
    return mu, jax.nn.softplus(raw) + MIN_SCALE


def tanh_log_det_jacobian(z):
    """log |d tanh(z) / dz| summed over actions, in the numerically stable form Brax uses."""
    return jnp.sum(2.0 * (jnp.log(2.0) - z - jax.nn.softplus(-2.0 * z)), axis=-1)


def log_prob(z, mu, sigma):
    """log density of the squashed action tanh(z), given the pre-tanh sample z."""
    gaussian = -0.5 * jnp.square((z - mu) / sigma) - jnp.log(sigma) - 0.5 * _LOG_2PI
    return jnp.sum(gaussian, axis=-1) - tanh_log_det_jacobian(z)


def entropy(key, mu, sigma):
    """Gaussian entropy plus the tanh log-det-Jacobian at one reparameterised sample (Brax)."""
    gaussian = jnp.sum(0.5 + 0.5 * _LOG_2PI + jnp.log(sigma), axis=-1)
    z = mu + sigma * jax.random.normal(key, mu.shape, mu.dtype)
    return gaussian + tanh_log_det_jacobian(z)


def sample_pre_tanh(key, mu, sigma, noise_scale=1.0):
    """z = mu + noise_scale * sigma * eps; noise_scale 0 gives the mode exactly (mu + 0 = mu)."""
    return mu + noise_scale * sigma * jax.random.normal(key, mu.shape, mu.dtype)
