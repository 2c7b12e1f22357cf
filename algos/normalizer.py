"""Running observation normalisation (Welford over every observation of a batch), as in CRAX/Brax."""
from __future__ import annotations

from typing import NamedTuple

import jax.numpy as jnp

STD_MIN, STD_MAX = 1e-6, 1e6


class Normalizer(NamedTuple):
    count: jnp.ndarray  # float32 scalar
    mean: jnp.ndarray  # [obs]
    summed_var: jnp.ndarray  # [obs], sum of squared deviations
    std: jnp.ndarray  # [obs]


def init_normalizer(obs_size: int) -> Normalizer:
    return Normalizer(jnp.zeros((), jnp.float32), jnp.zeros((obs_size,), jnp.float32),
                      jnp.zeros((obs_size,), jnp.float32), jnp.ones((obs_size,), jnp.float32))


def update_normalizer(norm: Normalizer, batch) -> Normalizer:
    """Fold a batch [..., obs] into the statistics (Chan/Welford batch update)."""
    x = batch.reshape(-1, batch.shape[-1])
    count = norm.count + x.shape[0]
    diff = x - norm.mean
    mean = norm.mean + jnp.sum(diff, axis=0) / count
    summed_var = norm.summed_var + jnp.sum(diff * (x - mean), axis=0)
    std = jnp.clip(jnp.sqrt(jnp.maximum(summed_var, 0.0) / count), STD_MIN, STD_MAX)
    return Normalizer(count, mean, summed_var, std)


def normalize(norm: Normalizer, obs, enabled: bool = True):
    return (obs - norm.mean) / norm.std if enabled else obs
