"""Rigid contacts of the point agent, approximated by projection (the one part CRAX's MuJoCo
soft-contact solver does not reduce to a closed form).

The agent is two discs: the body sphere (r 0.1) and a disc of r 0.05 centred 0.1 ahead, which
stands in for the arrow box (same 0.15 forward reach, so a wall stops the centre at 2.79 in
goal, as in CRAX). After every substep the agent is pushed out of each collidable obstacle
(axis-aligned boxes or discs) along the contact normal, its approaching normal velocity is
reflected (restitution AGENT_RESTITUTION) and its tangential velocity loses Coulomb friction
(AGENT_FRICTION) on that impulse. An obstacle counts as touched in a substep when the agent
overlaps it or lies within TOUCH_TOLERANCE of it (MuJoCo's "dist <= 0").
"""
from __future__ import annotations

import jax.numpy as jnp

from envs.point import ARROW_OFFSET, ARROW_RADIUS, BODY_RADIUS

TOUCH_TOLERANCE = 1e-4
# MuJoCo's soft contacts at CRAX's 0.02 s timestep throw the agent back off a wall almost
# elastically and its friction (mu = 1) takes most of the sliding speed; measured against
# CRAX (docs/envs.md) these two numbers reproduce that, and with it how often contact cost
# is paid (on impact steps, not on every step spent pressing against a wall).
AGENT_RESTITUTION = 1.0
AGENT_FRICTION = 1.0


def agent_discs(qpos):
    """Centres [2, 2] and radii [2] of the agent's two collision discs."""
    c, s = jnp.cos(qpos[2]), jnp.sin(qpos[2])
    body = qpos[:2]
    arrow = body + ARROW_OFFSET * jnp.stack([c, s])
    return jnp.stack([body, arrow]), jnp.array([BODY_RADIUS, ARROW_RADIUS], qpos.dtype)


def box_penetration(points, radii, centres, half):
    """Penetration [m, n] and unit normals [m, n, 2] (pointing from box to disc) of discs vs boxes.

    Computed on separate x and y arrays: a trailing axis of size 2 vectorises badly on the CPU.
    """
    px, py = points[:, 0][:, None], points[:, 1][:, None]
    cx, cy = centres[:, 0][None, :], centres[:, 1][None, :]
    hx, hy = half[:, 0][None, :], half[:, 1][None, :]
    dx = px - jnp.clip(px, cx - hx, cx + hx)
    dy = py - jnp.clip(py, cy - hy, cy + hy)
    dist = jnp.sqrt(dx * dx + dy * dy)
    # A centre inside a box (only after deep penetration) is pushed out along the box-centre
    # direction; the epsilon keeps the normal finite.
    inside = dist <= 1e-9
    dx = jnp.where(inside, px - cx, dx)
    dy = jnp.where(inside, py - cy, dy)
    norm = jnp.sqrt(dx * dx + dy * dy) + 1e-12
    return radii[:, None] - dist, jnp.stack([dx / norm, dy / norm], axis=-1)


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


def push_out(xy, vel, penetration, normal, restitution=0.0, friction=0.0):
    """Project a body out of the obstacles it penetrates and apply a contact impulse.

    penetration [n], normal [n, 2]; an approaching normal velocity v_n becomes
    -restitution * v_n, and the tangential velocity loses up to friction * (1 + restitution)
    * |v_n| (Coulomb friction on that impulse). Corrections of several obstacles add up
    (fine for the well-separated layouts of these tasks).
    """
    active = penetration > 0
    shift = jnp.sum(jnp.where(active[:, None], penetration[:, None] * normal, 0.0), axis=0)
    inward = jnp.sum(vel * normal, axis=-1)  # [n]
    hit = active & (inward < 0)
    impulse = -(1.0 + restitution) * inward  # normal velocity change, >= 0 where hit
    tangent = vel[None, :] - inward[:, None] * normal  # [n, 2]
    speed_t = jnp.sqrt(jnp.sum(tangent**2, axis=-1)) + 1e-12
    slow = jnp.minimum(speed_t, friction * impulse) / speed_t
    change = impulse[:, None] * normal - slow[:, None] * tangent
    return xy + shift, vel + jnp.sum(jnp.where(hit[:, None], change, 0.0), axis=0)


def agent_vs_boxes(qpos, qvel, centres, half):
    """Resolve the agent against fixed boxes; returns (qpos, qvel, touching [n])."""
    discs, radii = agent_discs(qpos)
    pen, normal = deepest(*box_penetration(discs, radii, centres, half))
    xy, vxy = push_out(qpos[:2], qvel[:2], pen, normal, AGENT_RESTITUTION, AGENT_FRICTION)
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
    vx, vy = qvel[0], qvel[1]
    # each wall: bounce the normal velocity, Coulomb friction on the tangential one
    for pen, sign, normal_is_x in ((pen_px, 1.0, True), (pen_nx, -1.0, True), (pen_py, 1.0, False), (pen_ny, -1.0, False)):
        vn, vt = (vx, vy) if normal_is_x else (vy, vx)
        hit = (pen > 0) & (sign * vn > 0)
        impulse = (1.0 + AGENT_RESTITUTION) * jnp.abs(vn)
        vt_new = jnp.sign(vt) * jnp.maximum(jnp.abs(vt) - AGENT_FRICTION * impulse, 0.0)
        vn_new = -AGENT_RESTITUTION * vn
        vn, vt = jnp.where(hit, vn_new, vn), jnp.where(hit, vt_new, vt)
        vx, vy = (vn, vt) if normal_is_x else (vt, vn)
    touching = jnp.stack([pen_px, pen_nx, pen_py, pen_ny]) > -TOUCH_TOLERANCE
    return jnp.stack([x, y, heading]), jnp.stack([vx, vy, qvel[2]]), touching
