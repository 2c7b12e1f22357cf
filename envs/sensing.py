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


def _contributions(rx, ry, max_dist, bins):
    """Per-object lidar contributions [n, bins] from agent-frame offsets.

    With p = angle / binsize and d = p - k wrapped to [-bins/2, bins/2), CRAX's aliasing
    (value in bin floor(p), frac * value in the next bin, (1 - frac) * value in the previous
    one) is value * clip(min(d + 1, 2 - d), 0, 1) for bin k: a trapezoid in d, which needs no
    integer bin index, no modulo and no gather.
    """
    dist = jnp.sqrt(rx * rx + ry * ry)
    angle = jnp.arctan2(ry, rx)
    angle = jnp.where(angle < 0, angle + 2 * jnp.pi, angle)
    position = angle * (bins / (2 * jnp.pi))
    value = jnp.where(dist > max_dist, 0.0, jnp.maximum(0.0, (max_dist - dist) / max_dist))
    d = position[:, None] - jnp.arange(bins, dtype=position.dtype)[None, :]
    d = jnp.where(d < -bins / 2, d + bins, jnp.where(d >= bins / 2, d - bins, d))
    return value[:, None] * jnp.clip(jnp.minimum(d + 1.0, 2.0 - d), 0.0, 1.0)


def lidar(agent_xy, heading, objects_xy, max_dist, mask=None, bins=LIDAR_BINS):
    """Aliased lidar over objects [n, 2] (centre-to-centre distance); mask [n] hides objects."""
    return lidars(agent_xy, heading, objects_xy, (objects_xy.shape[0],), max_dist, mask, bins)[0]


def lidars(agent_xy, heading, objects_xy, group_sizes, max_dist, mask=None, bins=LIDAR_BINS):
    """Several lidars in one pass: objects [n, 2] are consecutive groups of group_sizes."""
    return scan_objects(agent_xy, heading, objects_xy, group_sizes, max_dist, mask, bins)[0]


def compass(agent_xy, heading, target_xy):
    """Unit vector towards one target [2] in the agent frame (rel / (|rel| + 1e-8))."""
    rx, ry = _relative(agent_xy, heading, target_xy[None])
    norm = jnp.sqrt(rx * rx + ry * ry) + 1e-8
    return jnp.concatenate([rx / norm, ry / norm])


def nearest_compasses(agent_xy, heading, objects_xy, k=8):
    """Compasses to the k nearest objects, nearest first, zero-padded, as a flat [2k] vector."""
    return nearest_from_offsets(*_relative(agent_xy, heading, objects_xy), k)


def nearest_from_offsets(rx, ry, k=8):
    """nearest_compasses from agent-frame offsets rx, ry [n].

    The ranking is a dense count (rank_i = number of objects strictly nearer, ties by index,
    like a stable argsort), which vectorises where a sort or a gather would not.
    """
    n = rx.shape[0]
    d2 = rx * rx + ry * ry
    index = jnp.arange(n)
    nearer = (d2[None, :] < d2[:, None]) | ((d2[None, :] == d2[:, None]) & (index[None, :] < index[:, None]))
    rank = jnp.sum(nearer, axis=1)
    norm = jnp.sqrt(d2) + 1e-8
    slots = rank[None, :] == jnp.arange(k)[:, None]  # [k, n]
    ux = jnp.sum(jnp.where(slots, (rx / norm)[None, :], 0.0), axis=1)
    uy = jnp.sum(jnp.where(slots, (ry / norm)[None, :], 0.0), axis=1)
    return jnp.stack([ux, uy], axis=1).reshape(-1)


def scan_objects(agent_xy, heading, objects_xy, group_sizes, max_dist, mask=None, bins=LIDAR_BINS):
    """Lidars of consecutive object groups and the agent-frame offsets (rx, ry), in one pass."""
    rx, ry = _relative(agent_xy, heading, objects_xy)
    contribution = _contributions(rx, ry, max_dist, bins)
    if mask is not None:
        contribution = jnp.where(mask[:, None], contribution, 0.0)
    out, start = [], 0
    for size in group_sizes:
        out.append(jnp.max(contribution[start : start + size], axis=0))
        start += size
    return out, rx, ry


def unit(rx, ry):
    norm = jnp.sqrt(rx * rx + ry * ry) + 1e-8
    return jnp.stack([rx / norm, ry / norm])
