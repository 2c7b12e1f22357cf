"""Observation primitives shared by the tasks: CRAX's 16-bin lidar and unit compasses.

Lidar (crax-brief section 4): each object at agent-frame angle a (in [0, 2 pi)) and centre
distance d adds max(0, (L - d) / L) to bin floor(a / binsize), frac * value to the next bin and
(1 - frac) * value to the previous one (aliasing), bins wrap, objects combine with max.
Everything is written as dense comparisons over (objects, bins), with no gathers, so the
vmapped step stays a few fused element-wise loops.
"""
from __future__ import annotations

import jax.numpy as jnp

LIDAR_BINS = 16


def to_agent_frame(rel, heading):
    """Rotate world-frame offsets rel [..., 2] into the agent frame (x forward)."""
    c, s = jnp.cos(heading), jnp.sin(heading)
    return jnp.stack([c * rel[..., 0] + s * rel[..., 1], -s * rel[..., 0] + c * rel[..., 1]], axis=-1)


def lidar(agent_xy, heading, objects_xy, max_dist, mask=None, bins=LIDAR_BINS):
    """Aliased lidar over objects [n, 2] (centre-to-centre distance); mask [n] hides objects."""
    rel = to_agent_frame(objects_xy - agent_xy, heading)
    dist = jnp.sqrt(rel[:, 0] ** 2 + rel[:, 1] ** 2)
    angle = jnp.mod(jnp.arctan2(rel[:, 1], rel[:, 0]), 2 * jnp.pi)
    position = angle / (2 * jnp.pi / bins)
    bin_index = jnp.clip(jnp.floor(position), 0, bins - 1)
    frac = position - bin_index
    value = jnp.where(dist > max_dist, 0.0, jnp.maximum(0.0, (max_dist - dist) / max_dist))
    if mask is not None:
        value = jnp.where(mask, value, 0.0)
    offset = jnp.mod(jnp.arange(bins, dtype=bin_index.dtype)[None, :] - bin_index[:, None], bins)
    v, f = value[:, None], frac[:, None]
    contribution = jnp.where(
        offset == 0, v, jnp.where(offset == 1, f * v, jnp.where(offset == bins - 1, (1 - f) * v, 0.0))
    )
    return jnp.max(contribution, axis=0)


def compass(agent_xy, heading, target_xy):
    """Unit vector towards target in the agent frame (rel / (|rel| + 1e-8))."""
    rel = to_agent_frame(target_xy - agent_xy, heading)
    return rel / (jnp.sqrt(jnp.sum(rel**2, axis=-1, keepdims=True)) + 1e-8)


def nearest_compasses(agent_xy, heading, objects_xy, k=8):
    """Compasses to the k nearest objects, nearest first, zero-padded, as a flat [2k] vector.

    The ranking is a dense count (rank_i = number of objects strictly nearer, ties by index),
    which vectorises where a sort would not.
    """
    n = objects_xy.shape[0]
    d2 = jnp.sum((objects_xy - agent_xy) ** 2, axis=-1)
    index = jnp.arange(n)
    nearer = (d2[None, :] < d2[:, None]) | ((d2[None, :] == d2[:, None]) & (index[None, :] < index[:, None]))
    rank = jnp.sum(nearer, axis=1)
    units = compass(agent_xy, heading, objects_xy)  # [n, 2]
    slots = (rank[None, :] == jnp.arange(k)[:, None]).astype(units.dtype)  # [k, n]
    return (slots @ units).reshape(-1)
