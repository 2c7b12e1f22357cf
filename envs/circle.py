"""safe_circle_point, Level 1 (CRAX crax/envs/safe_circle.py; docs/envs.md).

No obstacles and no walls: the agent may leave the arena. 5 substeps per step (dt = 0.1 s).
Reset: xy ~ U([-0.8, 0.8]^2), heading ~ U(-pi, pi), qvel ~ U(+-0.1).

reward = 0.1 v_tan / (1 + |rho - 1.5|), rho = |p|, v_tan = (-vx y + vy x) / rho
         (position: MuJoCo's xpos; velocity: qvel after the step, as in CRAX).
cost   = 0.1 * 1[|x| > 1.125] (the Level-1 boundary, an indicator; no y boundary).
obs    = 28: sensors 12, circle lidar 16: ray i at agent-frame angle 2 pi i / 16, value
         (6 - t) / 6 for the first positive hit t <= 6 of the circle of radius 1.5. As in CRAX
         the discriminant is clamped at 0 before the test, so a ray that misses the circle
         reads the distance to its closest approach when that is ahead.

Nothing is simplified here: without contacts the point dynamics are CRAX's exactly.
"""
from __future__ import annotations

import dataclasses
from typing import NamedTuple

import jax
import jax.numpy as jnp

from envs import point, sensing

N_FRAMES = 5
CIRCLE_RADIUS = 1.5
REWARD_FACTOR = 0.1
BOUNDARY_X = 1.125
BOUNDARY_COST = 0.1
LIDAR_RANGE = 6.0
INIT_XY_RANGE = 0.8
RESET_NOISE = 0.1
RAY_ANGLES = jnp.arange(sensing.LIDAR_BINS, dtype=jnp.float32) * (2 * jnp.pi / sensing.LIDAR_BINS)


class CircleState(NamedTuple):
    """The circle task has no layout; an empty state keeps the API uniform."""


def circle_lidar(xy, heading):
    """Distances along 16 agent-frame rays to the circle, as CRAX computes them."""
    centre_rel = sensing.to_agent_frame(-xy, heading)
    dot = jnp.cos(RAY_ANGLES) * centre_rel[0] + jnp.sin(RAY_ANGLES) * centre_rel[1]
    disc = jnp.maximum(dot * dot - (jnp.sum(centre_rel**2) - CIRCLE_RADIUS**2), 0.0)
    root = jnp.sqrt(disc)
    t1, t2 = dot - root, dot + root
    t = jnp.where(t1 > 0.0, t1, jnp.where(t2 > 0.0, t2, jnp.inf))
    return jnp.where(t <= LIDAR_RANGE, jnp.maximum(0.0, LIDAR_RANGE - t) / LIDAR_RANGE, 0.0)


def orbit_reward(xy, qvel):
    radius = jnp.sqrt(jnp.sum(xy**2) + 1e-8)
    tangential = (-qvel[0] * xy[1] + qvel[1] * xy[0]) / radius
    return REWARD_FACTOR * tangential / (1.0 + jnp.abs(radius - CIRCLE_RADIUS))


@dataclasses.dataclass(frozen=True)
class CircleTask:
    # circle has no obstacles: the option exists so that one setting (e.g. a sweep's
    # `env.contact_model`) serves every task, and changes nothing here
    contact_model: str = "mjx"
    observation_size: int = 28

    def init(self, key):
        k_vel, k_xy, k_heading = jax.random.split(key, 3)
        xy = jax.random.uniform(k_xy, (2,), minval=-INIT_XY_RANGE, maxval=INIT_XY_RANGE)
        heading = jax.random.uniform(k_heading, (), minval=-jnp.pi, maxval=jnp.pi)
        qvel = jax.random.uniform(k_vel, (3,), minval=-RESET_NOISE, maxval=RESET_NOISE)
        return point.initial_state(jnp.concatenate([xy, heading[None]]), qvel), CircleState()

    def transition(self, agent, task, action, key):
        agent, _, _ = point.advance(agent, action, N_FRAMES)
        reward = orbit_reward(agent.xpos, agent.qvel)
        cost = BOUNDARY_COST * (jnp.abs(agent.xpos[0]) > BOUNDARY_X)
        return agent, task, reward, cost, jnp.zeros((), bool)

    def observe(self, agent, task):
        return jnp.concatenate([agent.sensors, circle_lidar(agent.xpos, agent.qpos[2])]).astype(jnp.float32)
