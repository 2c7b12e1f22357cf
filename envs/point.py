"""The CRAX "point" body: closed-form substep dynamics and its 12 sensor channels.

CRAX simulates a 3-DOF body (slide x, slide y, hinge z) in MuJoCo XLA with h = 0.02 s and
4 substeps per env step (5 for circle). With no contacts the MuJoCo update reduces to a
small closed form (docs/envs.md, "The tasks"), written out here:

    M(th) = [[m, 0, -e s], [0, m, e c], [-e s, e c, I]]        e = m r_c, I about the hinge
    f     = [F c, F s, tau] - bias - D v,  bias = [-e c w^2, -e s w^2, 0]
    v'    = v + h (M + h D)^-1 f ;  q' = q + h v'                (semi-implicit Euler, eulerdamp)

with thrust F = 0.3 clip(u0, +-0.05) along the heading and yaw torque
tau = 0.3 clip(u1 - 0.3 w, +-0.05). The 3x3 solves use the block structure of M (the two
slide rows are diagonal), so they cost a handful of multiplies instead of a generic solve.

Sensors are MuJoCo's sensordata, evaluated at the start of the last substep (state before
that substep's update, acceleration a_fwd = M^-1 f of that substep); the reset observation
uses the same formulas with zero control (mjx.forward).
"""
from __future__ import annotations

from typing import NamedTuple

import jax
import jax.numpy as jnp

# Constants printed from CRAX's mj_model (point.xml with CRAX's 0.02 s timestep).
MASS = 0.00518879
COM_OFFSET = 0.01927232
INERTIA_COM = 2.64946e-5
INERTIA_HINGE = INERTIA_COM + MASS * COM_OFFSET**2
DAMPING_SLIDE = 0.01
DAMPING_HINGE = 0.005
SUBSTEP = 0.02
THRUST_GEAR = 0.3
YAW_GEAR = 0.3
FORCE_LIMIT = 0.05
GRAVITY = 9.81
MAGNETIC_FIELD_Y = -0.5

SENSOR_SIZE = 12
# The agent's collision shape: the body sphere and the "arrow" box in front of it (box half
# 0.05 centred 0.1 ahead, so it reaches 0.15 forward); envs/contacts.py uses its front corners.
BODY_RADIUS = 0.1
ARROW_OFFSET = 0.1
ARROW_HALF = 0.05


class PointState(NamedTuple):
    """Generalised position (x, y, heading), velocity, MuJoCo's xpos and the last sensor reading.

    `xpos` is the body position MuJoCo reports after a step: kinematics run at the start of the
    last substep, so it lags qpos by that substep. CRAX reads xpos for rewards, costs, lidars
    and compasses and qpos[2] for the heading; the tasks here do the same.
    """

    qpos: jnp.ndarray  # float32 [3]
    qvel: jnp.ndarray  # float32 [3]
    xpos: jnp.ndarray  # float32 [2]
    sensors: jnp.ndarray  # float32 [12]


def solve_mass(alpha, beta, e, c, s, f):
    """Solve [[alpha,0,-e s],[0,alpha,e c],[-e s,e c,beta]] x = f in closed form."""
    f1, f2, f3 = f
    x3 = (f3 + e * (s * f1 - c * f2) / alpha) / (beta - e * e / alpha)
    x1 = (f1 + e * s * x3) / alpha
    x2 = (f2 - e * c * x3) / alpha
    return x1, x2, x3


def _forces(qpos, qvel, ctrl, external=None):
    """Generalised force f (applied - bias - damping + external, e.g. contacts) at the state."""
    c, s = jnp.cos(qpos[2]), jnp.sin(qpos[2])
    w = qvel[2]
    thrust = THRUST_GEAR * jnp.clip(ctrl[0], -FORCE_LIMIT, FORCE_LIMIT)
    torque = YAW_GEAR * jnp.clip(ctrl[1] - YAW_GEAR * w, -FORCE_LIMIT, FORCE_LIMIT)
    e = MASS * COM_OFFSET
    f1 = thrust * c + e * c * w * w - DAMPING_SLIDE * qvel[0]
    f2 = thrust * s + e * s * w * w - DAMPING_SLIDE * qvel[1]
    f3 = torque - DAMPING_HINGE * w
    if external is not None:
        f1, f2, f3 = f1 + external[0], f2 + external[1], f3 + external[2]
    return c, s, (f1, f2, f3)


def forward_acceleration(qpos, qvel, ctrl, external=None):
    """a_fwd = M^-1 f: what the accelerometer sees (and the contact solver's unconstrained a)."""
    c, s, f = _forces(qpos, qvel, ctrl, external)
    return jnp.stack(solve_mass(MASS, INERTIA_HINGE, MASS * COM_OFFSET, c, s, f))


def substep(qpos, qvel, ctrl, external=None):
    """One MuJoCo Euler substep with implicit joint damping; returns (qpos', qvel', a_fwd).

    `external` [3] is a generalised force added for this substep (the contact forces)."""
    c, s, f = _forces(qpos, qvel, ctrl, external)
    e = MASS * COM_OFFSET
    a_fwd = jnp.stack(solve_mass(MASS, INERTIA_HINGE, e, c, s, f))
    a_imp = jnp.stack(
        solve_mass(MASS + SUBSTEP * DAMPING_SLIDE, INERTIA_HINGE + SUBSTEP * DAMPING_HINGE, e, c, s, f)
    )
    qvel_new = qvel + SUBSTEP * a_imp
    qpos_new = qpos + SUBSTEP * qvel_new
    return qpos_new, qvel_new, a_fwd


def sensor_reading(heading, qvel, a_fwd):
    """Accelerometer, velocimeter, gyro, magnetometer (12 values) in the body frame."""
    c, s = jnp.cos(heading), jnp.sin(heading)
    zero = jnp.zeros_like(heading)
    return jnp.stack(
        [
            c * a_fwd[0] + s * a_fwd[1],
            -s * a_fwd[0] + c * a_fwd[1],
            zero + GRAVITY,
            c * qvel[0] + s * qvel[1],
            -s * qvel[0] + c * qvel[1],
            zero,
            zero,
            zero,
            qvel[2],
            MAGNETIC_FIELD_Y * s,  # world field (0, -0.5, 0) in the body frame
            MAGNETIC_FIELD_Y * c,
            zero,
        ]
    )


def initial_state(qpos, qvel) -> PointState:
    """State right after a reset: sensors from mjx.forward with zero control."""
    a_fwd = forward_acceleration(qpos, qvel, jnp.zeros(2, qpos.dtype))
    return PointState(qpos, qvel, qpos[:2], sensor_reading(qpos[2], qvel, a_fwd))


def advance(state: PointState, action, n_frames, contact=None, extra=None):
    """One env step: n_frames substeps, each preceded by `contact` (if given).

    contact(qpos, qvel, ctrl, extra, warm) -> (force [3], extra, touching) runs MuJoCo's
    collision detection and constraint solve on the positions before the substep (warm: the
    previous substep's acceleration, MuJoCo's solver warm start): it returns the
    generalised contact force on the agent for that substep, advances whatever `extra` holds
    (e.g. the push block) over the substep, and flags the obstacles in contact [n], OR-ed
    over the substeps as pip crax-bench counts contacts (accumulate_contacts).
    Returns (PointState, extra, touching or None).
    """
    ctrl = control(action)
    # The substeps are a loop, not unrolled Python: XLA then compiles the substep (contact
    # detection and solve included) once instead of n_frames times, which about halves the
    # compilation of a step with contacts (docs/envs.md).
    warm = last_acceleration(state) if contact is not None else None
    touching = None
    if contact is not None:
        shape = jax.eval_shape(contact, state.qpos, state.qvel, ctrl, extra, warm)[2]
        touching = jnp.zeros(shape.shape, shape.dtype)

    def body(carry, _):
        qpos, qvel, extra, touching, warm, _, _ = carry
        force = None
        if contact is not None:
            force, extra, touch = contact(qpos, qvel, ctrl, extra, warm)
            touching = touching | touch
        new_qpos, new_qvel, a_fwd = substep(qpos, qvel, ctrl, force)
        # the last substep's start (qpos, qvel) and a_fwd are what the sensors read
        return (new_qpos, new_qvel, extra, touching, a_fwd, qpos, qvel), None

    zeros = jnp.zeros_like(state.qvel)
    carry = (state.qpos, state.qvel, extra, touching, warm if warm is not None else zeros, state.qpos, state.qvel)
    (qpos, qvel, extra, touching, a_fwd, qpos_before, qvel_before), _ = jax.lax.scan(body, carry, None,
                                                                                      length=n_frames)
    sensors = sensor_reading(qpos_before[2], qvel_before, a_fwd)
    return PointState(qpos, qvel, qpos_before[:2], sensors), extra, touching


def last_acceleration(state: PointState):
    """The acceleration a_fwd of the last substep of the previous step (MuJoCo's qacc, which
    the next solve starts from), recovered from the state: the velocimeter and gyro hold the
    velocity at that substep's start, qvel the velocity after it, and the damped update
    v' = v + h (M + h D)^-1 M a_fwd is inverted. After a reset it is 0, as MuJoCo's is."""
    heading = state.qpos[2] - SUBSTEP * state.qvel[2]
    c, s = jnp.cos(heading), jnp.sin(heading)
    vx, vy = state.sensors[3], state.sensors[4]
    before = jnp.stack([c * vx - s * vy, s * vx + c * vy, state.sensors[8]])
    a_imp = (state.qvel - before) / SUBSTEP
    damp = solve_mass(MASS, INERTIA_HINGE, MASS * COM_OFFSET, c, s,
                      (DAMPING_SLIDE * a_imp[0], DAMPING_SLIDE * a_imp[1], DAMPING_HINGE * a_imp[2]))
    return a_imp + SUBSTEP * jnp.stack(damp)


def control(action):
    """Actions are clipped to [-1, 1] (MuJoCo ctrlrange)."""
    return jnp.clip(action, -1.0, 1.0)
