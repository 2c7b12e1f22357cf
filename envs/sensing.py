"""Observation primitives shared by the tasks: CRAX's 16-bin lidar and unit compasses.

Lidar (as CRAX computes it): each object at agent-frame angle a (in [0, 2 pi)) and centre
distance d adds max(0, (L - d) / L) to bin floor(a / binsize), frac * value to the next bin and
(1 - frac) * value to the previous one (aliasing), bins wrap, objects combine with max.
Everything is written as dense comparisons over (objects, bins), with no gathers, so the
vmapped step stays a few fused element-wise loops. The bin angle uses `_angle`, a polynomial
arctan2 that XLA's CPU backend vectorises (its own atan2 is a scalar library call per element,
which was the largest single cost of a goal step).
"""
from __future__ import annotations

import functools

import jax.numpy as jnp

LIDAR_BINS = 16


def fold_rows(op, x):
    """op-reduce x [n, ...] over its leading axis as a chain of element-wise ops. XLA's CPU
    backend hands small reductions to a library fusion that costs several ns per element;
    under vmap the chain is a few vectorised loops over the batch."""
    return functools.reduce(op, [x[i] for i in range(x.shape[0])])


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


# Cephes' single-precision arctan on [0, tan(pi/8)] (max error about 1 ulp in float32).
_ATAN_COEFFS = (8.05374449538e-2, -1.38776856032e-1, 1.99777106478e-1, -3.33329491539e-1)


def _angle(ry, rx):
    """arctan2(ry, rx) mapped to [0, 2 pi), as element-wise arithmetic and selects.

    The ratio min/max of |rx|, |ry| lies in [0, 1]; above tan(pi/8) it is reduced with
    atan(t) = pi/4 + atan((t - 1) / (t + 1)), then the octant is restored from the signs.
    Agrees with jnp.arctan2 to a few float32 ulps (tests/test_envs_sensing.py).
    """
    ax, ay = jnp.abs(rx), jnp.abs(ry)
    hi, lo = jnp.maximum(ax, ay), jnp.minimum(ax, ay)
    t = lo / jnp.where(hi > 0, hi, 1.0)
    big = t > 0.4142135623730950
    t = jnp.where(big, (t - 1.0) / (t + 1.0), t)
    z = t * t
    poly = _ATAN_COEFFS[0]
    for c in _ATAN_COEFFS[1:]:
        poly = poly * z + c
    a = poly * z * t + t + jnp.where(big, jnp.pi / 4, 0.0)
    a = jnp.where(ay > ax, jnp.pi / 2 - a, a)  # first-quadrant angle
    a = jnp.where(rx < 0, jnp.pi - a, a)
    return jnp.where(ry < 0, 2 * jnp.pi - a, a)


def _contributions(rx, ry, max_dist, bins):
    """Per-object lidar contributions [n, bins] from agent-frame offsets.

    With p = angle / binsize and d = p - k wrapped to [-bins/2, bins/2), CRAX's aliasing
    (value in bin floor(p), frac * value in the next bin, (1 - frac) * value in the previous
    one) is value * clip(min(d + 1, 2 - d), 0, 1) for bin k: a trapezoid in d, which needs no
    integer bin index, no modulo and no gather.
    """
    dist = jnp.sqrt(rx * rx + ry * ry)
    position = _angle(ry, rx) * (bins / (2 * jnp.pi))
    value = jnp.where(dist > max_dist, 0.0, jnp.maximum(0.0, (max_dist - dist) / max_dist))
    d = position[:, None] - jnp.arange(bins, dtype=position.dtype)[None, :]
    d = jnp.where(d < -bins / 2, d + bins, jnp.where(d >= bins / 2, d - bins, d))
    return value[:, None] * jnp.clip(jnp.minimum(d + 1.0, 2.0 - d), 0.0, 1.0)


def nearest_from_offsets(rx, ry, k=8):
    """Unit vectors to the k nearest objects from agent-frame offsets rx, ry [n], nearest
    first, zero-padded, as a flat [2k] vector.

    The ranking is a dense count (rank_i = number of objects strictly nearer, ties by index,
    like a stable argsort), which vectorises where a sort or a gather would not. Both
    reductions run over the leading axis (the vmapped batch stays outermost, the result axis
    contiguous), which XLA's CPU backend vectorises; over the trailing axis they were
    horizontal reductions and the largest part of an observation.
    """
    n = rx.shape[0]
    d2 = rx * rx + ry * ry
    index = jnp.arange(n)
    # nearer[j, i]: object j ranks before object i (nearer, or as near with a lower index)
    nearer = jnp.where(index[:, None] < index[None, :], d2[:, None] <= d2[None, :], d2[:, None] < d2[None, :])
    rank = jnp.sum(nearer, axis=0, dtype=jnp.int32)
    norm = jnp.sqrt(d2) + 1e-8
    slots = rank[:, None] == jnp.arange(k)[None, :]  # [n, k]: one object per slot, so sums are exact
    ux = jnp.sum(jnp.where(slots, (rx / norm)[:, None], 0.0), axis=0)
    uy = jnp.sum(jnp.where(slots, (ry / norm)[:, None], 0.0), axis=0)
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
