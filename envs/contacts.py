"""Rigid contacts of the point agent, approximated by projection (the one part CRAX's MuJoCo
soft-contact solver does not reduce to a closed form).

The agent is two discs: the body sphere (r 0.1) and a disc of r 0.05 centred 0.1 ahead, which
stands in for the arrow box (same 0.15 forward reach, so a wall stops the centre at 2.79 in
goal, as in CRAX). After every substep the agent is pushed out of each collidable obstacle
(axis-aligned boxes or discs) along the contact normal and its inward normal velocity is
removed (a perfectly inelastic, frictionless contact). An obstacle counts as touched when the
penetration after that projection is within TOUCH_TOLERANCE of zero, i.e. the agent rests on
or presses into it; MuJoCo's "dist <= 0" does the same with its soft contacts.
"""
from __future__ import annotations

import jax.numpy as jnp

from envs.point import ARROW_OFFSET, ARROW_RADIUS, BODY_RADIUS

TOUCH_TOLERANCE = 1e-4


def agent_discs(qpos):
    """Centres [2, 2] and radii [2] of the agent's two collision discs."""
    c, s = jnp.cos(qpos[2]), jnp.sin(qpos[2])
    body = qpos[:2]
    arrow = body + ARROW_OFFSET * jnp.stack([c, s])
    return jnp.stack([body, arrow]), jnp.array([BODY_RADIUS, ARROW_RADIUS], qpos.dtype)


def box_penetration(points, radii, centres, half):
    """Penetration [m, n] and unit normals [m, n, 2] (pointing from box to disc) of discs vs boxes."""
    p = points[:, None, :]
    closest = jnp.clip(p, centres[None] - half[None], centres[None] + half[None])
    delta = p - closest
    dist = jnp.sqrt(jnp.sum(delta**2, axis=-1))
    # A centre inside a box (only after deep penetration) is pushed out along the box-centre
    # direction; the epsilon keeps the normal finite.
    fallback = p - centres[None]
    delta = jnp.where((dist > 1e-9)[..., None], delta, fallback)
    norm = jnp.sqrt(jnp.sum(delta**2, axis=-1)) + 1e-12
    return radii[:, None] - dist, delta / norm[..., None]


def disc_penetration(points, radii, centres, obstacle_radii):
    """Penetration [m, n] and unit normals [m, n, 2] of discs vs discs."""
    delta = points[:, None, :] - centres[None]
    dist = jnp.sqrt(jnp.sum(delta**2, axis=-1))
    normal = delta / (dist[..., None] + 1e-12)
    return radii[:, None] + obstacle_radii[None] - dist, normal


def deepest(penetration, normal):
    """Per obstacle, the deepest of the agent's discs: penetration [n], normal [n, 2]."""
    which = penetration[0] >= penetration[1]
    return (
        jnp.where(which, penetration[0], penetration[1]),
        jnp.where(which[:, None], normal[0], normal[1]),
    )


def push_out(xy, vel, penetration, normal):
    """Project a body out of the obstacles it penetrates and drop its inward normal velocity.

    penetration [n], normal [n, 2]; corrections of several obstacles add up (fine for the
    well-separated layouts of these tasks).
    """
    active = penetration > 0
    shift = jnp.sum(jnp.where(active[:, None], penetration[:, None] * normal, 0.0), axis=0)
    inward = jnp.sum(vel * normal, axis=-1)
    cancel = jnp.sum(jnp.where((active & (inward < 0))[:, None], inward[:, None] * normal, 0.0), axis=0)
    return xy + shift, vel - cancel


def agent_vs_boxes(qpos, qvel, centres, half):
    """Resolve the agent against fixed boxes; returns (qpos, qvel, touching [n])."""
    discs, radii = agent_discs(qpos)
    pen, normal = deepest(*box_penetration(discs, radii, centres, half))
    xy, vxy = push_out(qpos[:2], qvel[:2], pen, normal)
    return (
        jnp.concatenate([xy, qpos[2:]]),
        jnp.concatenate([vxy, qvel[2:]]),
        pen > -TOUCH_TOLERANCE,
    )


def agent_vs_square_walls(qpos, qvel, inner):
    """Resolve the agent against the four walls of a square arena, inner faces at +-inner.

    Inside the arena the wall boxes act as half-planes, so this is a clamp per axis, much
    cheaper than the general box test. Returns (qpos, qvel, touching [4]) in the wall order
    +x, -x, +y, -y.
    """
    x, y, heading = qpos[0], qpos[1], qpos[2]
    c, s = jnp.cos(heading), jnp.sin(heading)
    # the farthest point of the agent along each outward normal: body or arrow disc
    reach = lambda along: jnp.maximum(BODY_RADIUS, ARROW_OFFSET * along + ARROW_RADIUS)
    pen_px = x + reach(c) - inner
    pen_nx = -x + reach(-c) - inner
    pen_py = y + reach(s) - inner
    pen_ny = -y + reach(-s) - inner
    x = x - jnp.maximum(pen_px, 0.0) + jnp.maximum(pen_nx, 0.0)
    y = y - jnp.maximum(pen_py, 0.0) + jnp.maximum(pen_ny, 0.0)
    vx = jnp.where(pen_px > 0, jnp.minimum(qvel[0], 0.0), qvel[0])
    vx = jnp.where(pen_nx > 0, jnp.maximum(vx, 0.0), vx)
    vy = jnp.where(pen_py > 0, jnp.minimum(qvel[1], 0.0), qvel[1])
    vy = jnp.where(pen_ny > 0, jnp.maximum(vy, 0.0), vy)
    touching = jnp.stack([pen_px, pen_nx, pen_py, pen_ny]) > -TOUCH_TOLERANCE
    return jnp.stack([x, y, heading]), jnp.stack([vx, vy, qvel[2]]), touching
