"""safe_button_point, Level 1, as pip crax-bench 0.1.0 defines it (docs/envs.md, "Which button").

Which variant: CRAX's repository ("mirror") and its PyPI release differ materially for this
task. We follow the PyPI release, for three reasons: (1) it is what the CRAX backend of this
package (and so the paper preset) actually runs, so both backends agree; (2) its episodes
never terminate, so every task has fixed-length episodes that finish in lockstep, as the
paper's logging (one iterate per 2048 finished episodes) assumes; (3) the mirror's cube
proximity cost can never fire (the cubes stop the agent before d < 0.2), so its cost would
come from gremlins and wrong buttons alone.

Arena (extents +-2.0, no walls): 4 buttons (spheres r 0.1, collidable), 4 cubes (half 0.2,
collidable; CRAX converts the "cylinders" to cubes for MJX), 4 gremlins (boxes half 0.1) that
circle their centres: centre + 0.35 (sin phi, cos phi), phi = 0.08 * (steps so far), all in
phase, moved before each physics step. Placement: max-min slack with the largest keepouts
first (gremlins sqrt(2) 0.1 + 0.35, cubes sqrt(2) 0.2, buttons 0.2; agent keepout 0.16);
CRAX redraws the whole layout until every slack is >= 0, we draw LAYOUT_ATTEMPTS layouts at
once and keep the first valid one (the last when none is).

reward = (last d - d) + 1 while the agent touches the active button; d = |agent - active|.
         On a touch a new active button is drawn (uniformly, possibly the same one), the button
         lidar is hidden and wrong-button cost is off for the next 10 steps.
cost   = 3 per cube or gremlin touched + 1 for touching a non-active button (when not off).
obs    = 62: sensors 12, button lidar 16 (all buttons; zero while hidden), active-button
         compass 2, hazard lidar 16 (cubes, gremlins), compasses to the 8 hazards 16.

Contacts (cubes, gremlins, buttons) follow MJX's soft-contact rows and solver for the sphere
and the arrow's front corners (envs/contacts.py); gremlins are kinematic (zero velocity in the contact, as
MuJoCo's mocap bodies). Touches are counted at any substep, as crax-bench does.
"""
from __future__ import annotations

import dataclasses
from typing import ClassVar, NamedTuple

import jax
import jax.numpy as jnp
import numpy as np

from envs import contacts, point, sensing
from envs.goal import agent_reset_state
from envs.lazy import lazy_where, step_key
from envs.placement import PLACEMENT_CANDIDATES, PLACEMENT_MARGIN

N_FRAMES = 4
DT = N_FRAMES * point.SUBSTEP
EXTENT = 2.0
N_BUTTONS = 4
N_CUBES = 4
N_GREMLINS = 4
BUTTON_RADIUS = 0.1
CUBE_HALF = 0.2
GREMLIN_HALF = 0.1
GREMLIN_TRAVEL = 0.35
AGENT_KEEPOUT = 0.16
BUTTON_KEEPOUT = BUTTON_RADIUS + 0.1
CUBE_KEEPOUT = float(jnp.sqrt(2.0) * CUBE_HALF)
GREMLIN_KEEPOUT = float(jnp.sqrt(2.0) * GREMLIN_HALF + GREMLIN_TRAVEL)
COLLISION_COST = 3.0
WRONG_BUTTON_COST = 1.0
RESAMPLING_DELAY = 10
LIDAR_RANGE = 3.0
RESET_NOISE = 0.005
LAYOUT_ATTEMPTS = 4
# objects in layout order: buttons, cubes, gremlin centres
KEEPOUTS = (BUTTON_KEEPOUT,) * N_BUTTONS + (CUBE_KEEPOUT,) * N_CUBES + (GREMLIN_KEEPOUT,) * N_GREMLINS
HAZARD_HALF = jnp.array([[CUBE_HALF] * 2] * N_CUBES + [[GREMLIN_HALF] * 2] * N_GREMLINS, jnp.float32)


class ButtonState(NamedTuple):
    buttons: jnp.ndarray  # [4, 2]
    cubes: jnp.ndarray  # [4, 2]
    gremlin_centres: jnp.ndarray  # [4, 2]
    gremlins: jnp.ndarray  # [4, 2] current positions
    active: jnp.ndarray  # int32 index of the active button
    timer: jnp.ndarray  # int32 steps left with the button lidar hidden and wrong-button cost off
    steps: jnp.ndarray  # int32 steps since the reset (gremlin phase)
    last_dist: jnp.ndarray


def gremlin_positions(centres, steps):
    phase = steps.astype(jnp.float32) * DT
    return centres + GREMLIN_TRAVEL * jnp.stack([jnp.sin(phase), jnp.cos(phase)])


LAYOUT_ORDER = tuple(sorted(range(len(KEEPOUTS)), key=lambda i: -KEEPOUTS[i]))  # stable, like CRAX's argsort


def sample_layout(key, agent_xy):
    """crax-bench's layout: max-min slack, largest keepouts first; (positions [12, 2], valid).

    A scan over the objects in placement order (unrolled, the pairwise slacks made the reset
    the slowest part of button's compilation); same draws and the same float operations."""
    n = len(LAYOUT_ORDER)
    keepout64 = np.asarray([KEEPOUTS[i] for i in LAYOUT_ORDER])
    keepout = jnp.asarray(keepout64, jnp.float32)
    low, high = jnp.asarray(-EXTENT + keepout64, jnp.float32), jnp.asarray(EXTENT - keepout64, jnp.float32)
    keys = jax.random.split(key, n)

    def place(carry, rank):
        placed, valid = carry  # placed [n, 2] in placement order; rows >= rank not yet placed
        k = keepout[rank]
        cand = jax.random.uniform(keys[rank], (PLACEMENT_CANDIDATES, 2), minval=low[rank], maxval=high[rank])
        slack = jnp.sqrt(jnp.sum((cand - agent_xy) ** 2, -1)) - k - AGENT_KEEPOUT - PLACEMENT_MARGIN
        gaps = jnp.sqrt(jnp.sum((cand[:, None, :] - placed[None]) ** 2, -1)) - k - keepout[None] - PLACEMENT_MARGIN
        slack = jnp.minimum(slack, jnp.min(jnp.where(jnp.arange(n)[None] < rank, gaps, jnp.inf), axis=1))
        best = jnp.argmax(slack)
        return (placed.at[rank].set(cand[best]), valid & (slack[best] >= 0)), None

    (placed, valid), _ = jax.lax.scan(place, (jnp.zeros((n, 2), jnp.float32), jnp.array(True)), jnp.arange(n))
    return placed[np.argsort(LAYOUT_ORDER)], valid


def place_buttons(key, agent_xy):
    layouts, valid = jax.vmap(sample_layout, in_axes=(0, None))(jax.random.split(key, LAYOUT_ATTEMPTS), agent_xy)
    first = valid & (jnp.cumsum(valid) == 1)
    first = jnp.where(jnp.any(valid), first, jnp.arange(LAYOUT_ATTEMPTS) == LAYOUT_ATTEMPTS - 1)
    return jnp.sum(jnp.where(first[:, None, None], layouts, 0.0), axis=0)


# A new active button where one was touched; under vmap drawn only on steps where some env did.
_draw_active = lazy_where(lambda key: jax.random.randint(step_key(key), (), 0, N_BUTTONS))


def _dist(a, b):
    return jnp.sqrt(jnp.sum((a - b) ** 2) + 1e-8)


def _active_xy(buttons, active):
    return jnp.sum(jnp.where((jnp.arange(N_BUTTONS) == active)[:, None], buttons, 0.0), axis=0)


@dataclasses.dataclass(frozen=True)
class ButtonTask:
    contact_model: str = "mjx"
    observation_size: int = 62
    lazy_step_key: ClassVar[bool] = True  # the key is folded only when a button is touched

    def init(self, key):
        k_agent, k_layout, k_active = jax.random.split(key, 3)
        agent = agent_reset_state(k_agent, RESET_NOISE)
        layout = place_buttons(k_layout, agent.xpos)
        buttons, cubes, centres = layout[:N_BUTTONS], layout[N_BUTTONS : N_BUTTONS + N_CUBES], layout[N_BUTTONS + N_CUBES :]
        active = jax.random.randint(k_active, (), 0, N_BUTTONS)
        zero = jnp.zeros((), jnp.int32)
        state = ButtonState(
            buttons, cubes, centres, gremlin_positions(centres, zero), active, zero, zero,
            _dist(_active_xy(buttons, active), agent.xpos),
        )
        return agent, state

    def transition(self, agent, task: ButtonState, action, key):
        steps = task.steps + 1
        gremlins = gremlin_positions(task.gremlin_centres, steps)
        boxes = jnp.concatenate([task.cubes, gremlins])

        def contact(qpos, qvel, ctrl, extra, warm):
            con = contacts.concat(
                contacts.box_contacts(qpos, boxes, HAZARD_HALF),
                contacts.disc_contacts(qpos, task.buttons, jnp.full((N_BUTTONS,), BUTTON_RADIUS)),
            )
            force, touching = contacts.agent_force(qpos, qvel, ctrl, con, warm, self.contact_model)
            return force, extra, touching

        agent, _, touching = point.advance(agent, action, N_FRAMES, contact)
        hazard_touch, button_touch = touching[: N_CUBES + N_GREMLINS], touching[N_CUBES + N_GREMLINS :]
        is_active = jnp.arange(N_BUTTONS) == task.active
        success = jnp.any(button_touch & is_active)
        wrong = jnp.any(button_touch & ~is_active)
        cost = COLLISION_COST * jnp.sum(hazard_touch) + WRONG_BUTTON_COST * (wrong & (task.timer == 0))

        xy = agent.xpos
        dist = _dist(_active_xy(task.buttons, task.active), xy)
        reward = (task.last_dist - dist) + success

        active = _draw_active(success, key, task.active)
        timer = jnp.where(success, RESAMPLING_DELAY, jnp.maximum(0, task.timer - 1)).astype(jnp.int32)
        last_dist = jnp.where(success, _dist(_active_xy(task.buttons, active), xy), dist)
        new = task._replace(gremlins=gremlins, active=active, timer=timer, steps=steps, last_dist=last_dist)
        return agent, new, reward, cost, jnp.zeros((), bool)

    def observe(self, agent, task: ButtonState):
        xy, heading = agent.xpos, agent.qpos[2]
        objects = jnp.concatenate([task.buttons, task.cubes, task.gremlins, _active_xy(task.buttons, task.active)[None]])
        shown = jnp.concatenate([jnp.broadcast_to(task.timer == 0, (N_BUTTONS,)), jnp.ones(N_CUBES + N_GREMLINS + 1, bool)])
        (button_lidar, hazard_lidar, _), rx, ry = sensing.scan_objects(
            xy, heading, objects, (N_BUTTONS, N_CUBES + N_GREMLINS, 1), LIDAR_RANGE, mask=shown
        )
        return jnp.concatenate(
            [
                agent.sensors,
                button_lidar,
                sensing.unit(rx[-1], ry[-1]),
                hazard_lidar,
                sensing.nearest_from_offsets(rx[N_BUTTONS:-1], ry[N_BUTTONS:-1], 8),
            ]
        ).astype(jnp.float32)
