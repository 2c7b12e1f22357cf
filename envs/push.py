"""safe_push_point, Level 1 (CRAX crax/envs/safe_push.py; crax-brief section 7).

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

Simplifications against CRAX (MuJoCo soft contacts): the agent and the block collide as
rigid bodies (envs/contacts.py): agent discs against the block's box with a perfectly
inelastic, frictionless normal impulse after each substep; the block is pushed out of walls
and pillars along the shallower axis. Because each body is damped on its own before the
impulse, the pair settles at 0.667 m/s under full thrust instead of the ideal coupled
0.015 / (0.01 + 0.015) = 0.6 m/s (about 10 % faster pushing). Agent-block friction is ignored, so a block pushed off-centre slides away
sideways, as it also does in CRAX. Goal respawns draw RESPAWN_TRIES candidates (CRAX: 100).
"""
from __future__ import annotations

import dataclasses
from typing import NamedTuple

import jax
import jax.numpy as jnp

from envs import contacts, point, sensing
from envs.goal import agent_reset_state
from envs.lazy import lazy_where
from envs.placement import place_layout, rejection_sample

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
RESPAWN_TRIES = 32
WALL_CENTRES = jnp.array([[3.5, 0.0], [-3.5, 0.0], [0.0, 3.5], [0.0, -3.5]], jnp.float32)
WALL_HALF = jnp.array([[0.1, 3.5], [0.1, 3.5], [3.5, 0.1], [3.5, 0.1]], jnp.float32)
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


WALL_INNER = 3.5 - 0.1


def make_contact(pillars):
    pillar_half = jnp.full((N_PILLARS, 2), PILLAR_HALF, jnp.float32)

    def contact(qpos, qvel, block: Block):
        # the block slides freely (implicit damping, like the agent's joints)
        b_vel = block.vel * (BLOCK_MASS / (BLOCK_MASS + point.SUBSTEP * BLOCK_DAMPING))
        b_xy = block.xy + point.SUBSTEP * b_vel

        # agent vs block: split the overlap by mass, inelastic normal impulse
        discs, radii = contacts.agent_discs(qpos)
        pen, normal = contacts.deepest(
            *contacts.box_penetration(discs, radii, b_xy[None], jnp.full((1, 2), BLOCK_HALF, jnp.float32))
        )
        pen, normal = pen[0], normal[0]
        hit = pen > 0
        total = point.MASS + BLOCK_MASS
        a_xy = qpos[:2] + jnp.where(hit, pen * BLOCK_MASS / total, 0.0) * normal
        b_xy = b_xy - jnp.where(hit, pen * point.MASS / total, 0.0) * normal
        approach = jnp.sum((qvel[:2] - b_vel) * normal)
        impulse = jnp.where(hit & (approach < 0), -approach * point.MASS * BLOCK_MASS / total, 0.0)
        a_vel = qvel[:2] + impulse / point.MASS * normal
        b_vel = b_vel - impulse / BLOCK_MASS * normal

        # block vs pillars and walls (free of cost; inelastic)
        b_pen, b_normal = _box_vs_boxes(b_xy, BLOCK_HALF, pillars, pillar_half)
        b_xy, b_vel = contacts.push_out(b_xy, b_vel, b_pen, b_normal)
        limit = WALL_INNER - BLOCK_HALF
        b_vel = jnp.where(jnp.abs(b_xy) > limit, jnp.where(b_xy * b_vel > 0, 0.0, b_vel), b_vel)
        b_xy = jnp.clip(b_xy, -limit, limit)

        # agent vs pillars and walls (cost 3 each)
        qpos = jnp.concatenate([a_xy, qpos[2:]])
        qvel = jnp.concatenate([a_vel, qvel[2:]])
        qpos, qvel, pillar_touch = contacts.agent_vs_boxes(qpos, qvel, pillars, pillar_half)
        qpos, qvel, wall_touch = contacts.agent_vs_square_walls(qpos, qvel, WALL_INNER)
        return qpos, qvel, Block(b_xy, b_vel), jnp.concatenate([pillar_touch, wall_touch])

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
        key, RESPAWN_TRIES, -EXTENT + 0.01, EXTENT - 0.01, obstacles,
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
    observation_size: int = 68

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
        contact = make_contact(task.pillars)
        block_before = task.block

        def contact_tracking(qpos, qvel, extra):
            block, _ = extra
            qpos, qvel, new_block, touching = contact(qpos, qvel, block)
            return qpos, qvel, (new_block, block.xy), touching

        agent, (block, block_xpos), touching = point.advance(
            agent, action, N_FRAMES, contact_tracking, (block_before, block_before.xy)
        )
        xy = agent.xpos
        square_dist = jnp.sqrt(jnp.sum((task.squares - xy) ** 2, axis=-1) + 1e-8)
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
