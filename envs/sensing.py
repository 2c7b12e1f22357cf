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


def _relative(agent_xy, heading, objects_xy):
    """Agent-frame offsets as separate x and y arrays [n] (no trailing size-2 axis, which
    vectorises badly on the CPU)."""
    c, s = jnp.cos(heading), jnp.sin(heading)
    dx, dy = objects_xy[:, 0] - agent_xy[0], objects_xy[:, 1] - agent_xy[1]
    return c * dx + s * dy, -s * dx + c * dy


def lidar(agent_xy, heading, objects_xy, max_dist, mask=None, bins=LIDAR_BINS):
    """Aliased lidar over objects [n, 2] (centre-to-centre distance); mask [n] hides objects."""
    rx, ry = _relative(agent_xy, heading, objects_xy)
    dist = jnp.sqrt(rx * rx + ry * ry)
    angle = jnp.mod(jnp.arctan2(ry, rx), 2 * jnp.pi)
    position = angle / (2 * jnp.pi / bins)
    bin_index = jnp.clip(jnp.floor(position), 0, bins - 1)
    frac = position - bin_index
    value = jnp.where(dist > max_dist, 0.0, jnp.maximum(0.0, (max_dist - dist) / max_dist))
    if mask is not None:
        value = jnp.where(mask, value, 0.0)
    offset = jnp.mod(jnp.arange(bins, dtype=bin_index.dtype)[None, :] - bin_index[:, None], bins)  # [n, bins]
    v, f = value[:, None], frac[:, None]
    contribution = jnp.where(
        offset == 0, v, jnp.where(offset == 1, f * v, jnp.where(offset == bins - 1, (1 - f) * v, 0.0))
    )
    return jnp.max(contribution, axis=0)


def compass(agent_xy, heading, target_xy):
    """Unit vector towards one target [2] in the agent frame (rel / (|rel| + 1e-8))."""
    rx, ry = _relative(agent_xy, heading, target_xy[None])
    norm = jnp.sqrt(rx * rx + ry * ry) + 1e-8
    return jnp.concatenate([rx / norm, ry / norm])


def nearest_compasses(agent_xy, heading, objects_xy, k=8):
    """Compasses to the k nearest objects, nearest first, zero-padded, as a flat [2k] vector.

    The ranking is a dense count (rank_i = number of objects strictly nearer, ties by index,
    like a stable argsort), which vectorises where a sort or a gather would not.
    """
    n = objects_xy.shape[0]
    rx, ry = _relative(agent_xy, heading, objects_xy)
    d2 = rx * rx + ry * ry
    index = jnp.arange(n)
    nearer = (d2[None, :] < d2[:, None]) | ((d2[None, :] == d2[:, None]) & (index[None, :] < index[:, None]))
    rank = jnp.sum(nearer, axis=1)
    norm = jnp.sqrt(d2) + 1e-8
    slots = rank[None, :] == jnp.arange(k)[:, None]  # [k, n]
    ux = jnp.sum(jnp.where(slots, (rx / norm)[None, :], 0.0), axis=1)
    uy = jnp.sum(jnp.where(slots, (ry / norm)[None, :], 0.0), axis=1)
    return jnp.stack([ux, uy], axis=1).reshape(-1)
