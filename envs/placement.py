"""Layout sampling as CRAX does it (docs/envs.md).

Initial placement is sequential "max-min slack": each object draws 100 uniform candidates in
[lo + k, hi - k]^2 (k its keepout) and keeps the one maximising
min_j(|p - p_j| - (k_j + k + 0.01)) over the objects already placed (the agent first); a
negative best slack moves it away from its nearest neighbour by the missing clearance + 1e-3,
then it is clipped to its range. Respawns (goal, push) are uniform rejection sampling. The
fixed walls of a square arena (goal, push) are `square_walls`.
"""
from __future__ import annotations

from typing import NamedTuple

import jax
import jax.numpy as jnp

PLACEMENT_CANDIDATES = 100
PLACEMENT_MARGIN = 0.01
# A respawn's draws (CRAX: 100); all 32 fail with probability below 1e-8 on goal's and push's layouts.
RESPAWN_TRIES = 32


class SquareWalls(NamedTuple):
    centres: jnp.ndarray  # [4, 2], in the order +x, -x, +y, -y (contacts.square_wall_contacts')
    half: jnp.ndarray  # [4, 2] half extents
    inner: float  # the inner faces lie at +-inner


def square_walls(distance: float, half_thickness: float) -> SquareWalls:
    """The four walls of a square arena, centred `distance` from the origin, each as long as
    the arena is wide: lidar objects, respawn keep-outs and the agent's contact faces."""
    d, t = distance, half_thickness
    centres = jnp.array([[d, 0.0], [-d, 0.0], [0.0, d], [0.0, -d]], jnp.float32)
    half = jnp.array([[t, d], [t, d], [d, t], [d, t]], jnp.float32)
    return SquareWalls(centres, half, d - t)


def _place_one(key, placed, placed_keepout, placed_mask, keepout, lo, hi, candidates):
    low, high = lo + keepout, hi - keepout
    cand = jax.random.uniform(key, (candidates, 2), minval=low, maxval=high)
    gap = jnp.sqrt(jnp.sum((cand[:, None, :] - placed[None]) ** 2, axis=-1))
    slack_all = gap - (placed_keepout[None] + keepout + PLACEMENT_MARGIN)
    slack_all = jnp.where(placed_mask[None], slack_all, jnp.inf)
    slack = jnp.min(slack_all, axis=1)
    best = jnp.argmax(slack)
    pos, best_slack = cand[best], slack[best]
    nearest = jnp.argmin(slack_all[best])
    away = pos - placed[nearest]
    away = away / (jnp.sqrt(jnp.sum(away**2)) + 1e-8)
    moved = pos + away * (-best_slack + 1e-3)
    pos = jnp.where(best_slack < 0, moved, pos)
    return jnp.clip(pos, low, high)


def place_layout(key, agent_xy, agent_keepout, keepouts, lo, hi, candidates=PLACEMENT_CANDIDATES):
    """Positions [n, 2] of objects with keepouts (a static tuple), placed after the agent."""
    keepouts = jnp.asarray(keepouts, jnp.float32)
    n = keepouts.shape[0]
    placed = jnp.zeros((n + 1, 2), jnp.float32).at[0].set(agent_xy)
    placed_keepout = jnp.concatenate([jnp.array([agent_keepout], jnp.float32), keepouts])
    keys = jax.random.split(key, n)

    def body(placed, i):
        mask = jnp.arange(n + 1) <= i
        pos = _place_one(keys[i], placed, placed_keepout, mask, keepouts[i], lo, hi, candidates)
        return placed.at[i + 1].set(pos), None

    placed, _ = jax.lax.scan(body, placed, jnp.arange(n))
    return placed[1:]


def rejection_sample(key, tries, lo, hi, disc_centres, disc_radii, box_centres, box_half, keepout, fallback):
    """First of `tries` uniform draws in [lo, hi]^2 clear of discs and boxes expanded by keepout.

    Returns (position, found); when no draw is clear the position is `fallback` (CRAX puts a
    goal on the agent then).
    """
    cand = jax.random.uniform(key, (tries, 2), minval=lo, maxval=hi)
    gap = jnp.sqrt(jnp.sum((cand[:, None, :] - disc_centres[None]) ** 2, axis=-1))
    ok = jnp.all(gap > disc_radii[None] + keepout, axis=1)
    if box_centres.shape[0]:
        outside = jnp.any(jnp.abs(cand[:, None, :] - box_centres[None]) > box_half[None] + keepout, axis=-1)
        ok = ok & jnp.all(outside, axis=1)
    # One-hot of the first clear draw instead of an index, which would be a gather under vmap.
    first = ok & (jnp.cumsum(ok) == 1)
    found = jnp.any(ok)
    chosen = jnp.sum(jnp.where(first[:, None], cand, 0.0), axis=0)
    return jnp.where(found, chosen, fallback), found
