"""Rewards and costs of the built-in tasks on hand-built states (CRAX's formulas as docs/envs.md states them):
costs appear only where the definitions say and are zero elsewhere; rewards move as defined."""
import functools

import jax
import jax.numpy as jnp
import numpy as np
import pytest

import envs
from envs import button, goal, point, push

STILL = jnp.zeros(2)


@functools.lru_cache(maxsize=None)
def compiled(task, **options):
    env = envs.make(task, episode_length=1000, **options)
    return env, jax.jit(env.step)


def at(task, xy, heading=0.0, vel=(0.0, 0.0, 0.0), options=(), **fields):
    """A state of `task` with the agent at xy (at rest unless vel) and task fields replaced."""
    env, step = compiled(task, **dict(options))
    state = env.reset(jax.random.PRNGKey(0))
    agent = point.initial_state(jnp.array([xy[0], xy[1], heading], jnp.float32), jnp.array(vel, jnp.float32))
    return state._replace(point=agent, task=state.task._replace(**fields)), step


# ---- goal ---------------------------------------------------------------------------------
FAR_HAZARDS = jnp.stack([jnp.full(12, -2.1), jnp.linspace(-2.1, 2.1, 12)], axis=1)
FAR_GOALS = jnp.array([[2.0, 2.0], [2.0, -2.0]])


@pytest.mark.parametrize("d, expected", [(0.1, 1.5), (0.2, 1.0), (0.3, 0.5), (0.39, 0.05), (0.41, 0.0), (1.0, 0.0)])
def test_goal_hazard_cost_is_proximity_inside_the_radius_only(d, expected):
    hazards = FAR_HAZARDS.at[0].set(jnp.array([0.5 + d, 0.3]))
    state, step = at("goal", (0.5, 0.3), hazards=hazards, goals=FAR_GOALS)
    state = step(state, STILL)
    np.testing.assert_allclose(state.cost, expected, atol=1e-5)  # 2 (1 - d / 0.4)
    assert float(state.reward) == 0.0


def test_goal_sparse_reward_pays_one_on_reach_and_respawns_the_goal():
    goals = FAR_GOALS.at[0].set(jnp.array([0.1, 0.0]))
    state, step = at("goal", (0.0, 0.0), hazards=FAR_HAZARDS, goals=goals)
    state = step(state, STILL)
    assert float(state.reward) == 1.0 and float(state.cost) == 0.0
    new_goal = state.task.goals[0]
    assert float(jnp.linalg.norm(new_goal - jnp.array([0.1, 0.0]))) >= 0.2  # moved away
    assert float(jnp.linalg.norm(new_goal)) > 0.3  # clear of the agent (0.1 + goal 0.2)
    assert float(jnp.min(jnp.linalg.norm(FAR_HAZARDS - new_goal, axis=1))) > 0.6  # clear of hazards
    np.testing.assert_array_equal(state.task.goals[1], FAR_GOALS[1])
    state = step(state, STILL)
    assert float(state.reward) == 0.0


def test_goal_shaping_after_a_reach_measures_from_the_reach_steps_distance():
    """As CRAX: the reach step stores its distance (0) as the last distance, so the next step
    pays -(distance to the nearest goal boundary then) instead of ~0."""
    goals = FAR_GOALS.at[0].set(jnp.array([0.1, 0.0]))
    state, step = at("goal", (0.0, 0.0), hazards=FAR_HAZARDS, goals=goals, options=(("reward_distance_scale", 1.0),))
    state = step(state._replace(task=state.task._replace(last_dist=jnp.float32(0.0))), STILL)
    assert float(state.task.last_dist) == 0.0
    state = step(state, STILL)
    dist = float(jnp.min(jnp.linalg.norm(state.task.goals - state.point.xpos, axis=1))) - 0.2
    assert dist > 0.05
    np.testing.assert_allclose(state.reward, -dist, atol=1e-5)


def test_goal_shaping_rewards_progress_towards_the_nearest_goal():
    goals = FAR_GOALS.at[0].set(jnp.array([1.5, 0.0]))
    state, step = at("goal", (0.0, 0.0), hazards=FAR_HAZARDS, goals=goals, options=(("reward_distance_scale", 1.0),))
    state = state._replace(task=state.task._replace(last_dist=jnp.float32(1.3)))  # boundary distance
    for _ in range(5):
        before = float(state.task.last_dist)
        state = step(state, jnp.array([1.0, 0.0]))
        after = float(jnp.linalg.norm(state.point.xpos - goals[0])) - 0.2
        np.testing.assert_allclose(state.reward, before - after, atol=1e-5)
        assert float(state.reward) > 0
    away, _ = at("goal", (0.0, 0.0), heading=np.pi, hazards=FAR_HAZARDS, goals=goals, options=(("reward_distance_scale", 1.0),))
    away = step(away._replace(task=away.task._replace(last_dist=jnp.float32(1.3))), jnp.array([1.0, 0.0]))
    assert float(away.reward) < 0
    sparse_state, sparse_step = at("goal", (0.0, 0.0), hazards=FAR_HAZARDS, goals=goals)
    assert float(sparse_step(sparse_state, jnp.array([1.0, 0.0])).reward) == 0.0


# ---- circle -------------------------------------------------------------------------------
@pytest.mark.parametrize("x, y, expected", [(1.2, 0.0, 0.1), (-1.3, 0.5, 0.1), (1.0, 0.0, 0.0), (0.0, 4.0, 0.0), (1.12, -2.0, 0.0)])
def test_circle_cost_is_the_boundary_indicator(x, y, expected):
    state, step = at("circle", (x, y))
    np.testing.assert_allclose(step(state, STILL).cost, expected, atol=1e-7)


@pytest.mark.parametrize("direction", [1.0, -1.0])
def test_circle_reward_is_the_tangential_speed_weighted_by_radial_error(direction):
    state, step = at("circle", (1.4, 0.0), heading=direction * np.pi / 2, vel=(0.0, direction * 1.2, 0.0))
    state = step(state, jnp.array([1.0, 0.0]))
    (x, y), (vx, vy) = np.asarray(state.point.xpos), np.asarray(state.point.qvel[:2])
    rho = np.hypot(x, y)
    expected = 0.1 * (-vx * y + vy * x) / rho / (1 + abs(rho - 1.5))
    np.testing.assert_allclose(state.reward, expected, rtol=1e-4)
    assert np.sign(float(state.reward)) == direction


# ---- push ---------------------------------------------------------------------------------
def push_fields(**overrides):
    fields = dict(
        pillars=jnp.stack([jnp.full(6, -2.2), jnp.linspace(-2.2, 2.2, 6)], axis=1),
        squares=jnp.stack([jnp.full(6, 2.2), jnp.linspace(-2.2, 2.2, 6)], axis=1),
        goal=jnp.array([0.0, 2.0]),
        block=push.Block(jnp.array([0.0, -2.0]), jnp.zeros(2)),
        block_xpos=jnp.array([0.0, -2.0]),
    )
    fields.update(overrides)
    return fields


@pytest.mark.parametrize("d", [0.0, 0.15, 0.29, 0.31, 0.5])
def test_push_hazard_squares_cost_radial_proximity(d):
    expected = 2 * max(0.0, 1 - np.sqrt(d * d + 1e-8) / 0.3)  # CRAX's distance carries a 1e-8
    squares = push_fields()["squares"].at[2].set(jnp.array([0.3 + d, 0.4]))
    state, step = at("push", (0.3, 0.4), **push_fields(squares=squares))
    np.testing.assert_allclose(step(state, STILL).cost, expected, atol=1e-5)


def test_push_pillar_contact_costs_three_and_blocks_the_agent():
    pillars = push_fields()["pillars"].at[0].set(jnp.array([1.0, 0.0]))
    state, step = at("push", (0.0, 0.0), **push_fields(pillars=pillars))
    costs, inside = [], []
    for _ in range(25):
        state = step(state, jnp.array([1.0, 0.0]))
        costs.append(float(state.cost))
        x, y = float(state.point.qpos[0]), float(state.point.qpos[1])
        inside.append(0.8 - 0.1 + 0.03 < x < 1.2 + 0.1 - 0.03 and abs(y) < 0.2 + 0.1 - 0.03)
    assert costs[0] == 0.0 and 3.0 in costs and set(costs) <= {0.0, 3.0}
    # the soft contact lets the body sphere in by at most one substep's travel (0.03 m at
    # 1.5 m/s) before it pushes it out: the agent never passes into the pillar
    assert not any(inside)


def test_push_block_moves_towards_the_goal_and_rewards_follow_the_distances():
    fields = push_fields(goal=jnp.array([2.0, 0.0]), block=push.Block(jnp.array([0.5, 0.0]), jnp.zeros(2)), block_xpos=jnp.array([0.5, 0.0]))
    state, step = at("push", (0.0, 0.0), **fields)
    state = state._replace(task=state.task._replace(last_dist_goal=jnp.float32(1.5), last_dist_block=jnp.float32(0.5)))
    total = 0.0
    for _ in range(30):
        before_goal, before_block = float(state.task.last_dist_goal), float(state.task.last_dist_block)
        state = step(state, jnp.array([1.0, 0.0]))
        b, a = np.asarray(state.task.block_xpos), np.asarray(state.point.xpos)
        expected = (before_goal - np.linalg.norm(b - [2.0, 0.0])) + 0.1 * (before_block - np.linalg.norm(a - b))
        np.testing.assert_allclose(state.reward, expected, atol=1e-5)
        total += float(state.reward)
        assert float(state.cost) == 0.0  # touching the block is free
    assert float(state.task.block.xy[0]) > 1.0 and total > 0.4
    # pushed together the pair settles near the coupled speed: 0.6 m/s ideally (CRAX), 0.667 m/s
    # with this substep scheme (docs/envs.md)
    assert 0.6 < float(state.point.qvel[0]) < 0.68


# ---- button -------------------------------------------------------------------------------
def button_fields(**overrides):
    far = jnp.array([[-1.8, -1.8], [-1.8, 1.8], [1.8, -1.8], [1.8, 1.8]])
    fields = dict(
        buttons=far, cubes=far * 0.5 + jnp.array([0.0, 0.9]), gremlin_centres=jnp.full((4, 2), 30.0),
        gremlins=jnp.full((4, 2), 30.0), active=jnp.int32(0), timer=jnp.int32(0),
    )
    fields.update(overrides)
    return fields


def test_button_cube_contact_costs_three_and_proximity_is_free():
    cubes = button_fields()["cubes"].at[0].set(jnp.array([0.6, 0.0]))
    state, step = at("button", (0.0, 0.0), **button_fields(cubes=cubes))
    near = step(state._replace(point=point.initial_state(jnp.array([0.2, 0.0, 0.0]), jnp.zeros(3))), STILL)
    assert float(near.cost) == 0.0  # arrow tip 0.05 from the face: no contact
    costs = []
    for _ in range(15):
        state = step(state, jnp.array([1.0, 0.0]))
        costs.append(float(state.cost))
        # the soft contact lets the arrow in by at most one substep's travel (0.03 m)
        assert float(state.point.qpos[0]) <= 0.6 - 0.2 - 0.15 + 0.03  # never through the face
    assert costs[0] == 0.0 and 3.0 in costs and set(costs) <= {0.0, 3.0}


def test_button_active_touch_pays_one_and_wrong_touch_costs_one():
    buttons = button_fields()["buttons"].at[0].set(jnp.array([0.3, 0.0])).at[1].set(jnp.array([0.0, 0.3]))
    state, step = at("button", (0.0, 0.0), **button_fields(buttons=buttons, last_dist=jnp.float32(0.3)))
    # active button 0 straight ahead: the arrow (reach 0.15) touches it (r 0.1) after 0.05 m
    rewards = []
    for _ in range(6):
        state = step(state, jnp.array([1.0, 0.0]))
        rewards.append(float(state.reward))
        if float(state.reward) > 0.5:
            break
    assert rewards[-1] > 1.0 and all(r < 0.5 for r in rewards[:-1])
    assert float(state.cost) == 0.0 and int(state.task.timer) == button.RESAMPLING_DELAY
    # wrong button (1 is not active): heading +y into it
    wrong, step = at("button", (0.0, 0.0), heading=np.pi / 2, **button_fields(buttons=buttons, active=jnp.int32(2)))
    costs = []
    for _ in range(6):
        wrong = step(wrong, jnp.array([1.0, 0.0]))
        costs.append(float(wrong.cost))
    assert 1.0 in costs and set(costs) <= {0.0, 1.0}
    # while the timer runs, wrong-button cost is off and the button lidar reads zero
    timed, _ = at("button", (0.0, 0.0), heading=np.pi / 2, **button_fields(buttons=buttons, active=jnp.int32(2), timer=jnp.int32(10)))
    for _ in range(6):
        timed = step(timed, jnp.array([1.0, 0.0]))
        assert float(timed.cost) == 0.0
        np.testing.assert_array_equal(timed.obs[12:28], 0.0)


def test_button_gremlins_circle_their_centres():
    state, step = at("button", (0.0, 0.0), **button_fields(gremlin_centres=jnp.full((4, 2), 1.5)))
    for k in range(1, 4):
        state = step(state, STILL)
        phase = 0.08 * k
        np.testing.assert_allclose(state.task.gremlins[0], [1.5 + 0.35 * np.sin(phase), 1.5 + 0.35 * np.cos(phase)], atol=1e-6)
