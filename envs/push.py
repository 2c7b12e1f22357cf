"""safe_push_point, Level 1 (CRAX crax/envs/safe_push.py; docs/envs.md).

Arena: 6 pillars (boxes, half 0.2, collidable), 6 hazard squares (half 0.3, not collidable),
placed after the goal square (half 0.2) by max-min slack in [-2.5, 2.5]^2; 4 walls centred at
(+-3.5, 0), (0, +-3.5) (half 0.1 x 3.5); a block (box half 0.1, mass 0.0012 kg, slide damping
0.015) starting at (0.5, 0.5) + U(+-0.005), not considered by the placement (as in CRAX).

reward = (last d_bg - d_bg) + 0.1 (last d_ab - d_ab) + 1 per step the block centre is inside
         the goal square (the goal then respawns and the last d_bg restarts from the new goal),
         with d_bg = |block - goal|, d_ab = |agent - block|. Options: reward_distance_scale
         (default 1.0) and reward_agent_block_scale (default 0.1), CRAX's names and defaults.
cost   = 3 per touched pillar or wall + sum over hazard squares of 2 max(0, 1 - d / 0.3)
         (radial, as CRAX's cube proximity); the block touching anything is free.
obs    = 68: sensors 12, goal lidar 16, hazard lidar 16 (pillars, squares, wall centres),
         goal compass 2, compasses to the 8 nearest hazards 16, agent->block compass 2,
         block->goal compass 2 (agent frame), |agent - block| / 3, |block - goal| / 3.

Contacts (envs/contacts.py): the agent meets pillars and walls through MJX's soft rows and
solver (warm-started CG, 4 iterations); the agent-block contact (one point, soft rows) couples
both bodies (agent inertia plus the block's mass), the block meets pillars and walls as a box
(least-overlap axis, free of cost). Goal respawns draw placement.RESPAWN_TRIES candidates (CRAX: 100).
"""
from __future__ import annotations

import dataclasses
from typing import ClassVar, NamedTuple

import jax
import jax.numpy as jnp

from envs import contacts, point, sensing
from envs.goal import agent_reset_state
from envs.lazy import lazy_where, step_key
from envs.placement import RESPAWN_TRIES, place_layout, rejection_sample, square_walls

N_FRAMES = 4
EXTENT = 2.5
GOAL_HALF = 0.2
PILLAR_HALF = 0.2
SQUARE_HALF = 0.3
N_PILLARS = 6
N_SQUARES = 6
BLOCK_HALF = 0.1
BLOCK_MASS = 0.2**3 * 0.15
BLOCK_DAMPING = 0.015
BLOCK_START = jnp.array([0.5, 0.5], jnp.float32)
PROXIMITY_COST = 2.0
COLLISION_COST = 3.0
LIDAR_RANGE = 3.0
RESET_NOISE = 0.005
WALL_CENTRES, WALL_HALF, WALL_INNER = square_walls(3.5, 0.1)
GOAL_KEEPOUT = float(jnp.sqrt(2.0) * GOAL_HALF)
PILLAR_KEEPOUT = float(jnp.sqrt(2.0) * PILLAR_HALF)
SQUARE_KEEPOUT = float(jnp.sqrt(2.0) * SQUARE_HALF)


class Block(NamedTuple):
    xy: jnp.ndarray  # [2]
    vel: jnp.ndarray  # [2]


class PushState(NamedTuple):
    goal: jnp.ndarray  # [2]
    pillars: jnp.ndarray  # [6, 2]
    squares: jnp.ndarray  # [6, 2]
    block: Block
    block_xpos: jnp.ndarray  # block position as MuJoCo's xpos reports it (start of last substep)
    last_dist_goal: jnp.ndarray
    last_dist_block: jnp.ndarray


def _box_vs_boxes(xy, half, centres, halves):
    """Minimum-axis penetration of an axis-aligned box against boxes: (pen [n], normal [n, 2])."""
    delta = xy - centres
    overlap = half + halves - jnp.abs(delta)  # [n, 2]
    along_x = overlap[:, 0] <= overlap[:, 1]
    sign = jnp.where(delta >= 0, 1.0, -1.0)
    normal = jnp.where(along_x[:, None], jnp.stack([sign[:, 0], 0 * sign[:, 0]], -1), jnp.stack([0 * sign[:, 1], sign[:, 1]], -1))
    pen = jnp.where(jnp.all(overlap > 0, axis=-1), jnp.min(overlap, axis=-1), -1.0)
    return pen, normal


WALL_OUT = jnp.array([[1.0, 0.0], [-1.0, 0.0], [0.0, 1.0], [0.0, -1.0]], jnp.float32)


def _block_obstacle_rows(b_xy, pillars):
    """Block vs pillars and walls (box against boxes, least-overlap axis): dist [10] and
    normals [10, 2] pointing towards the block."""
    pillar_half = jnp.full((N_PILLARS, 2), PILLAR_HALF, jnp.float32)
    pen, normal = _box_vs_boxes(b_xy, BLOCK_HALF, pillars, pillar_half)
    wall_dist = WALL_INNER - BLOCK_HALF - WALL_OUT @ b_xy
    return jnp.concatenate([-pen, wall_dist]), jnp.concatenate([normal, -WALL_OUT])


def make_contact(pillars, model: str):
    """Substep contact solve of the agent, the block and the fixed obstacles (MuJoCo's soft
    rows, envs/contacts.py), and the block's substep. extra = (Block, block xy before)."""
    pillar_half = jnp.full((N_PILLARS, 2), PILLAR_HALF, jnp.float32)
    block_half = jnp.full((1, 2), BLOCK_HALF, jnp.float32)

    def contact(qpos, qvel, ctrl, extra, warm):
        block, _ = extra
        fixed = contacts.concat(
            contacts.box_contacts(qpos, pillars, pillar_half), contacts.square_wall_contacts(qpos, WALL_INNER)
        )
        force_fixed, touching = contacts.agent_force(qpos, qvel, ctrl, fixed, warm, model)
        a_unc = point.forward_acceleration(qpos, qvel, ctrl, force_fixed)

        # agent vs block: one contact, both bodies in its rows (block: mass only, MuJoCo's M)
        con = contacts.deepest(contacts.box_contacts(qpos, block.xy[None], block_half))
        jn, jt, vn, vt, an, at, a_nn, a_tt, a_nt = contacts.agent_rows(qpos, qvel, a_unc, con)
        b_acc = -BLOCK_DAMPING * block.vel / BLOCK_MASS
        n = jnp.stack([con.nx[0], con.ny[0]])
        t = jnp.stack([-con.ny[0], con.nx[0]])
        vn = vn - jnp.dot(n, block.vel)
        vt = vt - jnp.dot(t, block.vel)
        an = an - jnp.dot(n, b_acc)
        at = at - jnp.dot(t, b_acc)
        inv_b = 1.0 / BLOCK_MASS
        fn, ft = contacts.solve_rows(vn, vt, an, at, a_nn + inv_b, a_tt + inv_b, a_nt, con.dist)
        force = force_fixed + contacts.generalised(jn, jt, fn, ft)
        b_force = -(fn[0] * n + ft[0] * t)

        # block vs pillars and walls (free of cost)
        dist, normal = _block_obstacle_rows(block.xy, pillars)
        b_acc = b_acc + b_force * inv_b
        tangent = jnp.stack([-normal[:, 1], normal[:, 0]], -1)
        zero = jnp.zeros_like(dist)
        bn, bt = contacts.solve_rows(
            normal @ block.vel, tangent @ block.vel, normal @ b_acc, tangent @ b_acc,
            zero + inv_b, zero + inv_b, zero, dist,
        )
        b_force = b_force + sensing.fold_rows(jnp.add, bn[:, None] * normal + bt[:, None] * tangent)

        # the block's substep: Euler with implicit damping, like the agent's joints
        b_vel = block.vel + point.SUBSTEP * (b_force - BLOCK_DAMPING * block.vel) / (
            BLOCK_MASS + point.SUBSTEP * BLOCK_DAMPING
        )
        b_xy = block.xy + point.SUBSTEP * b_vel
        return force, (Block(b_xy, b_vel), block.xy), touching

    return contact


def _respawn(args):
    """A new goal square: uniform and clear of the agent, the pillars, squares and walls (each
    expanded by the goal's keepout) and the old goal's spot (radius 0), as CRAX checks it."""
    key, xy, task = args
    obstacles = jnp.concatenate([xy[None], task.goal[None]])
    boxes = jnp.concatenate([task.pillars, task.squares, WALL_CENTRES])
    halves = jnp.concatenate(
        [jnp.full((N_PILLARS, 2), PILLAR_HALF), jnp.full((N_SQUARES, 2), SQUARE_HALF), WALL_HALF]
    ).astype(jnp.float32)
    new_goal, _ = rejection_sample(
        step_key(key), RESPAWN_TRIES, -EXTENT + 0.01, EXTENT - 0.01, obstacles,
        jnp.array([point.BODY_RADIUS, 0.0], jnp.float32), boxes, halves, GOAL_KEEPOUT, xy,
    )
    return new_goal


# Under vmap the respawn work runs only on steps where some environment scored.
respawn_where = lazy_where(_respawn)


def _dist(a, b):
    return jnp.sqrt(jnp.sum((a - b) ** 2) + 1e-8)


@dataclasses.dataclass(frozen=True)
class PushTask:
    reward_distance_scale: float = 1.0
    reward_agent_block_scale: float = 0.1
    contact_model: str = "mjx"
    observation_size: int = 68
    lazy_step_key: ClassVar[bool] = True  # the key is folded only inside the respawn branch

    def init(self, key):
        k_agent, k_block, k_layout = jax.random.split(key, 3)
        agent = agent_reset_state(k_agent, RESET_NOISE)
        kp, kv = jax.random.split(k_block)
        block = Block(
            BLOCK_START + jax.random.uniform(kp, (2,), minval=-RESET_NOISE, maxval=RESET_NOISE),
            jax.random.uniform(kv, (2,), minval=-RESET_NOISE, maxval=RESET_NOISE),
        )
        keepouts = (GOAL_KEEPOUT,) + (PILLAR_KEEPOUT,) * N_PILLARS + (SQUARE_KEEPOUT,) * N_SQUARES
        layout = place_layout(k_layout, agent.xpos, point.BODY_RADIUS, keepouts, -EXTENT, EXTENT)
        goal, pillars, squares = layout[0], layout[1 : 1 + N_PILLARS], layout[1 + N_PILLARS :]
        state = PushState(
            goal, pillars, squares, block, block.xy, _dist(goal, block.xy), _dist(agent.xpos, block.xy)
        )
        return agent, state

    def transition(self, agent, task: PushState, action, key):
        block_before = task.block
        agent, (block, block_xpos), touching = point.advance(
            agent, action, N_FRAMES, make_contact(task.pillars, self.contact_model), (block_before, block_before.xy)
        )
        xy = agent.xpos
        # separate x and y: a reduction over a size-2 trailing axis is a slow CPU fusion
        dx, dy = task.squares[:, 0] - xy[0], task.squares[:, 1] - xy[1]
        square_dist = jnp.sqrt(dx * dx + dy * dy + 1e-8)
        cost = COLLISION_COST * jnp.sum(touching) + PROXIMITY_COST * jnp.sum(
            jnp.maximum(0.0, 1.0 - square_dist / SQUARE_HALF)
        )

        dist_goal = _dist(task.goal, block_xpos)
        dist_block = _dist(xy, block_xpos)
        reached = jnp.all(jnp.abs(block_xpos - task.goal) <= GOAL_HALF)
        reward = (
            self.reward_distance_scale * (task.last_dist_goal - dist_goal)
            + self.reward_agent_block_scale * (task.last_dist_block - dist_block)
            + reached
        )

        goal = respawn_where(reached, (key, xy, task), task.goal)
        new_state = PushState(
            goal, task.pillars, task.squares, block, block_xpos, _dist(goal, block_xpos), dist_block
        )
        return agent, new_state, reward, cost, jnp.zeros((), bool)

    def observe(self, agent, task: PushState):
        xy, heading = agent.xpos, agent.qpos[2]
        block = task.block_xpos
        objects = jnp.concatenate([task.goal[None], task.pillars, task.squares, WALL_CENTRES])
        (goal_lidar, hazard_lidar), rx, ry = sensing.scan_objects(
            xy, heading, objects, (1, N_PILLARS + N_SQUARES + 4), LIDAR_RANGE
        )
        to_goal = sensing.to_agent_frame(task.goal - block, heading)
        to_block = sensing.to_agent_frame(block - xy, heading)
        return jnp.concatenate(
            [
                agent.sensors,
                goal_lidar,
                hazard_lidar,
                sensing.unit(rx[0], ry[0]),
                sensing.nearest_from_offsets(rx[1:], ry[1:], 8),
                sensing.unit(to_block[0], to_block[1]),
                sensing.unit(to_goal[0], to_goal[1]),
                jnp.stack([_dist(xy, block), _dist(block, task.goal)]) / LIDAR_RANGE,
            ]
        ).astype(jnp.float32)
