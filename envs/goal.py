"""safe_goal_point, Level 1 (CRAX crax/envs/safe_goal.py; docs/envs.md).

Arena: 2 goal discs (r 0.2), 12 hazard discs (r 0.4, not collidable) placed by max-min slack
in [-2.5, 2.5]^2, and 4 wall boxes centred at (+-3, 0), (0, +-3) (half 0.06 x 3.0).

reward = 1 per goal reached (|p - g| <= 0.2; that goal respawns at once, by rejection
         sampling) + reward_distance_scale * (last distance - distance) to the nearest goal
         boundary. CRAX's default scale is 0.0 (sparse); Safety-Gym-style shaping is 1.0.
         As in CRAX, the step that reaches a goal stores its (old, zero) distance as the last
         distance, so the next step's shaping pays -(distance to the nearest goal then).
cost   = sum over hazards of 2 max(0, 1 - d / 0.4) + 3 per wall touched.
obs    = 62: sensors 12, goal lidar 16 (both goals), hazard lidar 16 (hazards and wall
         centres, range 3), compass to goal 0 (2), compasses to the 8 nearest hazards (16).

Simplifications against CRAX: wall contacts follow MJX's soft-contact rows and solver for the
sphere and the arrow's front corners (envs/contacts.py), and a respawn draws
placement.RESPAWN_TRIES = 32 candidates instead of 100 (the chance that all fail is below 1e-8
on this layout; CRAX's fallback, the agent's position, is kept).
"""
from __future__ import annotations

import dataclasses
from typing import ClassVar, NamedTuple

import jax
import jax.numpy as jnp

from envs import contacts, point, sensing
from envs.lazy import lazy_where, step_key
from envs.placement import RESPAWN_TRIES, place_layout, rejection_sample, square_walls

N_FRAMES = 4
EXTENT = 2.5
GOAL_RADIUS = 0.2
HAZARD_RADIUS = 0.4
N_GOALS = 2
N_HAZARDS = 12
HAZARD_COST = 2.0
WALL_COST = 3.0
LIDAR_RANGE = 3.0
RESET_NOISE = 0.005
WALL_CENTRES, WALL_HALF, WALL_INNER = square_walls(3.0, 0.06)
# What a respawned goal must keep clear of: the agent, the hazards, the other goal, its old spot.
RESPAWN_RADII = jnp.array([0.1] + [HAZARD_RADIUS] * N_HAZARDS + [GOAL_RADIUS, 0.0], jnp.float32)


class GoalState(NamedTuple):
    goals: jnp.ndarray  # [2, 2]
    hazards: jnp.ndarray  # [12, 2]
    last_dist: jnp.ndarray  # distance to the nearest goal boundary before this step


def _distances(xy, centres):
    """|centres - xy| [n] from separate x and y (a reduction over a size-2 trailing axis
    became a slow library fusion on XLA's CPU backend)."""
    dx, dy = centres[:, 0] - xy[0], centres[:, 1] - xy[1]
    return jnp.sqrt(dx * dx + dy * dy)


def wall_contact(model: str):
    def contact(qpos, qvel, ctrl, extra, warm):
        con = contacts.square_wall_contacts(qpos, WALL_INNER)
        force, touching = contacts.agent_force(qpos, qvel, ctrl, con, warm, model)
        return force, extra, touching

    return contact


def _respawn(args):
    """Goals after a reach: the reached one moves to a uniform clear spot (rejection sampling).

    Goals are >= 0.4 apart, so at most one is reached per step and one draw serves both.
    CRAX keeps the old goal's slot with radius 0, so a respawn lands >= 0.2 from it.
    """
    key, xy, goals, hazards, reached = args
    staying = jnp.where(reached[0], goals[1], goals[0])
    leaving = jnp.where(reached[0], goals[0], goals[1])
    obstacles = jnp.concatenate([xy[None], hazards, staying[None], leaving[None]])
    new, _ = rejection_sample(
        step_key(key), RESPAWN_TRIES, -EXTENT + 0.01, EXTENT - 0.01, obstacles, RESPAWN_RADII,
        WALL_CENTRES, WALL_HALF, GOAL_RADIUS, xy,
    )
    return jnp.where(reached[:, None], new, goals)


# Under vmap the respawn work runs only on steps where some environment reached a goal.
respawn_where = lazy_where(_respawn)


def agent_reset_state(key, noise):
    """Agent at the origin with heading ~0: qpos, qvel ~ U(+-noise)."""
    kp, kv = jax.random.split(key)
    qpos = jax.random.uniform(kp, (3,), minval=-noise, maxval=noise)
    qvel = jax.random.uniform(kv, (3,), minval=-noise, maxval=noise)
    return point.initial_state(qpos, qvel)


@dataclasses.dataclass(frozen=True)
class GoalTask:
    reward_distance_scale: float = 0.0
    contact_model: str = "mjx"
    observation_size: int = 62
    lazy_step_key: ClassVar[bool] = True  # the key is folded only inside the respawn branch

    def init(self, key):
        k_agent, k_layout = jax.random.split(key)
        agent = agent_reset_state(k_agent, RESET_NOISE)
        keepouts = (GOAL_RADIUS,) * N_GOALS + (HAZARD_RADIUS,) * N_HAZARDS
        layout = place_layout(k_layout, agent.xpos, point.BODY_RADIUS, keepouts, -EXTENT, EXTENT)
        goals, hazards = layout[:N_GOALS], layout[N_GOALS:]
        # CRAX starts last_dist at the nearest goal *centre* but steps with the boundary
        # distance, so with shaping on the first step earns an extra 0.2 * scale; kept as is.
        centre = jnp.min(jnp.sqrt(jnp.sum((goals - agent.xpos) ** 2, axis=-1) + 1e-8))
        return agent, GoalState(goals, hazards, centre)

    def transition(self, agent, task: GoalState, action, key):
        agent, _, wall_touch = point.advance(agent, action, N_FRAMES, wall_contact(self.contact_model))
        xy = agent.xpos
        hazard_dist = _distances(xy, task.hazards)
        # a chain of adds: as a reduction this was a slow library fusion on XLA's CPU backend
        cost = HAZARD_COST * sensing.fold_rows(jnp.add, jnp.maximum(0.0, 1.0 - hazard_dist / HAZARD_RADIUS))
        cost = cost + WALL_COST * jnp.sum(wall_touch)

        goal_dist = _distances(xy, task.goals)
        reached = goal_dist <= GOAL_RADIUS
        dist = jnp.maximum(0.0, jnp.min(goal_dist) - GOAL_RADIUS)
        reward = jnp.sum(reached) + self.reward_distance_scale * (task.last_dist - dist)

        goals = respawn_where(jnp.any(reached), (key, xy, task.goals, task.hazards, reached), task.goals)
        return agent, GoalState(goals, task.hazards, dist), reward, cost, jnp.zeros((), bool)

    def observe(self, agent, task: GoalState):
        objects = jnp.concatenate([task.goals, task.hazards, WALL_CENTRES])
        (goal_lidar, hazard_lidar), rx, ry = sensing.scan_objects(
            agent.xpos, agent.qpos[2], objects, (N_GOALS, N_HAZARDS + 4), LIDAR_RANGE
        )
        return jnp.concatenate(
            [
                agent.sensors,
                goal_lidar,
                hazard_lidar,
                sensing.unit(rx[0], ry[0]),
                sensing.nearest_from_offsets(rx[N_GOALS:], ry[N_GOALS:], 8),
            ]
        ).astype(jnp.float32)
