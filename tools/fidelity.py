"""Cross-backend fidelity suite: the same policies on the built-in and the CRAX tasks, from the
same layouts and initial poses, compared per task on episode cost, return, contact steps and
the violation rate V at the bounds 15 / 25 / 50.

    # record the CRAX side (needs crax-bench; slow: MJX runs a few thousand steps/s on a CPU)
    python -m tools.fidelity --record tools/fidelity_reference.npz --episodes 64
    # compare the built-in tasks against the recorded reference (fast; any environment)
    python -m tools.fidelity --reference tools/fidelity_reference.npz [--figure docs/img/fidelity.png]
    # the pushed block's speed: record CRAX's (about 2 min), compare the built-in one
    python -m tools.fidelity --record-block-speed tools/fidelity_reference.npz
    python -m tools.fidelity --reference tools/fidelity_reference.npz --block-speed

Recording resets CRAX `episodes` times per task (keys from --seed), converts each initial CRAX
state (agent pose and velocity, layout, block, buttons, gremlin phase) into the built-in task's
state, and stores those initial states together with CRAX's per-episode results, so the
built-in side can be replayed from the same starts without CRAX installed.

Every policy reads the same things on both backends (agent position, heading, the task's
objects; the trained policy reads the observation), so one compiled rollout per task and
backend serves all policies (`lax.switch` on a runtime policy index). A "contact step" is a
step that pays collision cost (>= 3: walls, pillars, cubes, gremlins); proximity costs stay
below 2 per step on these layouts, and a wrong button costs 1.
"""
from __future__ import annotations

import argparse
import os
import sys
import time

import jax
import jax.numpy as jnp
import numpy as np

import envs
from envs import button, goal, point, push

TASKS = ("goal", "push", "button")
POLICIES = {
    "goal": ("random", "wall_pusher", "hazard_crosser", "goal_seeker", "trained"),
    "push": ("random", "wall_pusher", "pillar_pusher", "hazard_crosser", "block_pusher"),
    "button": ("random", "pillar_pusher", "hazard_crosser", "button_presser"),
}
SCRIPTED = ("wall_pusher", "pillar_pusher", "hazard_crosser", "goal_seeker", "button_presser", "block_pusher")
BOUNDS = (15.0, 25.0, 50.0)
CONTACT_COST = 2.999
EPISODE_LENGTH = 1000
ACTIVATION = "swish"  # the trainer's default (algos/config.py)
# The stored CRAX reference (the default of every command in the module doc).
REFERENCE = os.path.join(os.path.dirname(os.path.abspath(__file__)), "fidelity_reference.npz")


# ---------------------------------------------------------------------------- states


def crax_bodies(task: str):
    """(agent body, block body) indices of the CRAX model (block: push only, else -1)."""
    crax_env = make_env(task, "crax").task.crax_env
    return int(crax_env._agent_body), int(getattr(crax_env, "_block_body", -1))


def crax_to_builtin(task: str, crax_state, initial: bool, bodies=(1, -1)):
    """The built-in (PointState, task state) equal to a CRAX state (one environment).

    At a reset the sensors are recomputed as the built-in reset does (mjx.forward at zero
    control); mid-episode only positions matter (policies read xpos, heading, objects).
    """
    data, info = crax_state.pipeline_state, crax_state.info
    qpos, qvel = jnp.asarray(data.qpos[:3]), jnp.asarray(data.qvel[:3])
    if initial:
        agent = point.initial_state(qpos, qvel)
    else:
        agent = point.PointState(qpos, qvel, jnp.asarray(data.xpos[bodies[0], :2]), jnp.zeros(point.SENSOR_SIZE))
    if task == "goal":
        state = goal.GoalState(
            info["goal_positions"][:, :2], info["hazard_positions"][: goal.N_HAZARDS, :2], info["last_dist_goal"]
        )
    elif task == "push":
        hz = info["hazard_positions"][:, :2]
        block_xy = jnp.asarray(data.xpos[bodies[1], :2])
        block = push.Block(block_xy, jnp.asarray(data.qvel[3:5]))
        state = push.PushState(
            info["goal_positions"][0, :2], hz[: push.N_PILLARS], hz[push.N_PILLARS : push.N_PILLARS + push.N_SQUARES],
            block, block_xy, info["last_dist_goal"], info["last_dist_block"],
        )
    else:
        hz = info["hazard_positions"][:, :2]
        state = button.ButtonState(
            info["button_positions"][:, :2], hz[: button.N_CUBES], info["gremlin_center_positions"][:, :2],
            hz[button.N_CUBES :], jnp.asarray(info["active_button_idx"], jnp.int32),
            jnp.asarray(info["button_timer"], jnp.int32), jnp.asarray(info["step_count"], jnp.int32),
            jnp.asarray(info["last_dist_goal"], jnp.float32),
        )
    return agent, state


# ---------------------------------------------------------------------------- policies


def _unit(v):
    return v / (jnp.sqrt(jnp.sum(v * v)) + 1e-8)


def steer(xy, heading, target):
    """Turn towards target, full thrust once roughly aligned.

    The yaw actuator does nothing below |a1| = 0.5, so turns use at least 0.6.
    """
    rel = target - xy
    error = jnp.arctan2(rel[1], rel[0]) - heading
    error = jnp.arctan2(jnp.sin(error), jnp.cos(error))
    yaw = jnp.where(jnp.abs(error) < 0.05, 0.0, jnp.sign(error) * jnp.clip(0.6 + jnp.abs(error), 0.0, 1.0))
    return jnp.stack([jnp.where(jnp.abs(error) < 0.4, 1.0, 0.0), yaw])


def _cycle(objects, t, period):
    """The object visited at step t when each is visited for `period` steps in turn."""
    return objects[(t // period) % objects.shape[0]]


def targets(task: str, name: str, agent, state, t):
    """The scripted policy's target point (world frame)."""
    xy = agent.xpos
    if task == "goal":
        if name == "wall_pusher":  # far outside, in the direction of the first hazard: walls at an angle
            return 10.0 * _unit(state.hazards[0])
        if name == "hazard_crosser":
            return _cycle(state.hazards, t, 100)
        d = jnp.sum((state.goals - xy) ** 2, axis=-1)
        return jnp.where(d[0] <= d[1], state.goals[0], state.goals[1])  # goal_seeker
    if task == "push":
        if name == "wall_pusher":
            return 10.0 * _unit(state.pillars[0])
        if name == "pillar_pusher":
            return _cycle(state.pillars, t, 200)
        if name == "hazard_crosser":
            return _cycle(state.squares, t, 150)
        # block_pusher: get behind the block (seen from the goal), then push through it
        block = state.block_xpos
        u = _unit(state.goal - block)
        behind = block - 0.3 * u
        along = jnp.sum((block - xy) * u)
        lateral = jnp.abs((block - xy)[0] * u[1] - (block - xy)[1] * u[0])
        return jnp.where((along > 0.1) & (lateral < 0.08), block + 0.5 * u, behind)
    if name == "pillar_pusher":
        return _cycle(state.cubes, t, 200)
    if name == "hazard_crosser":
        return _cycle(state.gremlin_centres, t, 150)
    return jnp.sum(jnp.where((jnp.arange(button.N_BUTTONS) == state.active)[:, None], state.buttons, 0.0), axis=0)


def trained_action(params, obs, key):
    """The trained policy (this repo's networks and normaliser), sampling as in training."""
    from algos import distribution, networks, normalizer

    x = normalizer.normalize(params["normalizer"], obs)
    mu, sigma = distribution.split_output(networks.apply_mlp(params["policy"], x, ACTIVATION))
    return jnp.tanh(distribution.sample_pre_tanh(key, mu, sigma))


def act(task: str, index, agent, state, obs, t, key, params):
    """Action of policy POLICIES[task][index] (a runtime index: one compiled program)."""

    def branch(name):
        def f(_):
            if name == "random":
                return jax.random.uniform(key, (2,), minval=-1.0, maxval=1.0)
            if name == "trained":
                if params is None:
                    return jnp.zeros(2)
                return trained_action(params, obs, key).astype(jnp.float32)
            return steer(agent.xpos, agent.qpos[2], targets(task, name, agent, state, t)).astype(jnp.float32)

        return f

    return jax.lax.switch(index, [branch(n) for n in POLICIES[task]], None)


# ---------------------------------------------------------------------------- rollouts


# The built-in side's contact model (the tasks' `contact_model` option); --contact-model sets it.
CONTACT_MODEL = "mjx"


def make_env(task: str, backend: str):
    # episode_length only matters for auto-reset, which rollouts never reach (they call the task)
    extra = {"contact_model": CONTACT_MODEL} if backend == "builtin" else {}
    return envs.make(task, backend=backend, episode_length=EPISODE_LENGTH + 1, **task_kwargs(task), **extra)


def rollout_fn(task: str, backend: str, length: int):
    """jit(batched rollout): (agent0, state0, keys [n], policy index, params) -> per-episode sums.

    Returns (cost [n], return [n], contact steps [n]). The built-in side starts from
    (agent0, state0); the CRAX side starts from its own reset states (passed as agent0, with
    state0 ignored), converted to the built-in view each step for the scripted policies.
    """
    env = make_env(task, backend)
    tsk = env.task
    bodies = crax_bodies(task) if backend == "crax" else None

    def one(start, key, index, params):
        def body(carry, t):
            sim, cost_sum, ret_sum, contacts = carry
            if backend == "crax":
                agent, state = crax_to_builtin(task, sim[0], initial=False, bodies=bodies)
                obs = sim[0].obs
            else:
                agent, state = sim
                obs = tsk.observe(agent, state)
            k_act, k_step = jax.random.split(jax.random.fold_in(key, t))
            action = act(task, index, agent, state, obs, t, k_act, params)
            new_point, new_task, reward, cost, _ = tsk.transition(sim[0], sim[1], action, k_step)
            cost = jnp.asarray(cost, jnp.float32)
            carry = ((new_point, new_task), cost_sum + cost, ret_sum + reward, contacts + (cost >= CONTACT_COST))
            return carry, None

        zero = jnp.zeros((), jnp.float32)
        init = (start, zero, zero, jnp.zeros((), jnp.int32))
        (_, cost, ret, contacts), _ = jax.lax.scan(body, init, jnp.arange(length))
        return cost, ret, contacts

    return jax.jit(jax.vmap(one, in_axes=(0, 0, None, None)))


def crax_starts(task: str, keys):
    """CRAX reset states for the keys, and the equal built-in initial states."""
    env = make_env(task, "crax")
    bodies = crax_bodies(task)
    crax0 = jax.jit(jax.vmap(lambda k: env.task.init(k)[0]))(keys)
    agent0, state0 = jax.jit(jax.vmap(lambda s: crax_to_builtin(task, s, initial=True, bodies=bodies)))(crax0)
    return crax0, (agent0, state0)


def summarise(cost, ret, contacts):
    cost = np.asarray(cost, np.float64)
    row = {
        "episodes": int(cost.size),
        "cost": float(np.mean(cost)),
        "return": float(np.mean(ret)),
        "contacts": float(np.mean(contacts)),
    }
    for b in BOUNDS:
        row[f"V{b:g}"] = float(np.mean(cost > b))
    return row


# ---------------------------------------------------------------------------- block speed

# The push test. The agent's arrow touches the block's rear face, heading through the block
# along an axis, and both already move at the coupled terminal speed thrust / (agent + block
# damping) = 0.6 m/s, so the pair starts settled; the agent then thrusts straight ahead.
# Neither backend holds the block on the arrow for long: MJX's box-box contacts jostle it
# sideways until it slides off the arrow (after 0.2-1 m), so the figure is the block's mean
# speed along the push over the steps while it is still in front of the arrow (its centre
# within the block's half width of the agent's line, ahead of the agent), pooled over starts.
# Pillars and the goal are moved out of the way; the run stays clear of the walls.
BLOCK_SPEED_HEADINGS = (0.0, 0.5 * np.pi, np.pi, 1.5 * np.pi)
BLOCK_SPEED_OFFSETS = (-0.04, -0.03, -0.02, -0.01, 0.0, 0.01, 0.02, 0.03, 0.04)  # agent beside the block's line (m)
BLOCK_SPEED_STEPS = 30
FAR = 20.0


def block_speed_starts():
    """(agent qpos [n, 3], block xy [n, 2], push direction [n, 2]) of the block-speed test."""
    starts = [(h, o) for h in BLOCK_SPEED_HEADINGS for o in BLOCK_SPEED_OFFSETS]
    heading = np.array([h for h, _ in starts])
    u = np.stack([np.cos(heading), np.sin(heading)], -1)
    lateral = np.stack([-u[:, 1], u[:, 0]], -1) * np.array([o for _, o in starts])[:, None]
    block = -1.2 * u
    agent = block - (push.BLOCK_HALF + point.ARROW_OFFSET + point.ARROW_HALF) * u + lateral
    qpos = np.concatenate([agent, heading[:, None]], -1)
    return jnp.asarray(qpos, jnp.float32), jnp.asarray(block, jnp.float32), jnp.asarray(u, jnp.float32)


def coupled_speed():
    """Terminal speed of agent and block pushed together: full thrust over both dampings."""
    return point.THRUST_GEAR * point.FORCE_LIMIT / (point.DAMPING_SLIDE + push.BLOCK_DAMPING)


def _builtin_block_start(qpos, block_xy, vel):
    agent = point.initial_state(qpos, jnp.concatenate([vel, jnp.zeros(1, jnp.float32)]))
    _, template = builtin_template("push")
    far = FAR + jnp.arange(push.N_PILLARS, dtype=jnp.float32)[:, None] * jnp.ones(2)
    block = push.Block(block_xy, vel)
    return agent, template._replace(goal=jnp.full(2, -FAR), pillars=far, block=block, block_xpos=block_xy)


def _crax_block_start(env, qpos, block_xy, vel, key):
    crax_env = env.task.crax_env
    state, _ = env.task.init(key)
    data = state.pipeline_state
    body = int(crax_env._block_body)
    # the block's slide joints hold its offset from the body position in the model
    offset = jnp.asarray(crax_env.sys.mj_model.body_pos[body, :2], jnp.float32)
    pos = data.qpos.at[:3].set(qpos).at[3:5].set(block_xy - offset)
    qvel = jnp.zeros_like(data.qvel).at[:2].set(vel).at[3:5].set(vel)
    ids = jnp.asarray(list(crax_env._hazard_mocap_ids[: push.N_PILLARS]) + list(crax_env._goal_mocap_ids))
    mocap = data.mocap_pos.at[ids, :2].set(FAR + jnp.arange(ids.shape[0], dtype=jnp.float32)[:, None])
    data = data.replace(qpos=pos, qvel=qvel, mocap_pos=mocap, xpos=data.xpos.at[body, :2].set(block_xy))
    return state.replace(pipeline_state=data), ()


def block_speed_runs(backend: str):
    """Per start: (sum of the block's speed along the push over the steps it stayed in front
    of the arrow, number of those steps), on one backend."""
    env = make_env("push", backend)
    qpos, block_xy, u = block_speed_starts()
    keys = jax.random.split(jax.random.PRNGKey(0), qpos.shape[0])
    v0 = coupled_speed()
    crax = backend == "crax"
    bodies = crax_bodies("push") if crax else None

    def positions(state):
        if crax:
            return state[0].pipeline_state.xpos[bodies[0], :2], state[0].pipeline_state.xpos[bodies[1], :2]
        return state[0].xpos, state[1].block_xpos

    def one(qpos, block_xy, u, key):
        vel = v0 * u
        start = _crax_block_start(env, qpos, block_xy, vel, key) if crax else _builtin_block_start(qpos, block_xy, vel)
        action = jnp.array([1.0, 0.0], jnp.float32)

        def step(state, t):
            new_point, new_task, _, _, _ = env.task.transition(state[0], state[1], action, jax.random.fold_in(key, t))
            new = (new_point, new_task)
            return new, positions(new)

        _, (agent, block) = jax.lax.scan(step, start, jnp.arange(BLOCK_SPEED_STEPS))
        agent = jnp.concatenate([qpos[None, :2], agent])
        block = jnp.concatenate([block_xy[None], block])
        rel = block - agent
        ahead = (rel @ u > 0) & (jnp.abs(rel @ jnp.stack([-u[1], u[0]])) < push.BLOCK_HALF)
        # a step counts while the block was in front at its start and end, until it first left
        engaged = jnp.cumprod((ahead[1:] & ahead[:-1]).astype(jnp.int32)).astype(bool)
        speed = jnp.diff(block, axis=0) @ u / (push.N_FRAMES * point.SUBSTEP)
        return jnp.sum(jnp.where(engaged, speed, 0.0)), jnp.sum(engaged)

    total, steps = jax.jit(jax.vmap(one))(qpos, block_xy, u, keys)
    return np.asarray(total, np.float64), np.asarray(steps, np.int64)


def record_block_speed(path: str) -> dict:
    """Measure CRAX's block speed and store the per-start results in the reference file."""
    arrays = load_reference(path) if os.path.exists(path) else {}
    total, steps = block_speed_runs("crax")
    arrays["push/block_speed/total"], arrays["push/block_speed/steps"] = total, steps
    _save_npz(path, arrays)
    return block_speed_summary(total, steps)


def block_speed_row(reference: dict) -> str:
    """Built-in vs the recorded CRAX block speed, one line."""
    if "push/block_speed/total" not in reference:
        raise SystemExit("tools.fidelity: the reference holds no block speed; record it with --record-block-speed")
    c = block_speed_summary(reference["push/block_speed/total"], reference["push/block_speed/steps"])
    b = block_speed_summary(*block_speed_runs("builtin"))
    return (f"block speed while pushed ({c['starts']} starts): built-in {b['speed']:.4f} / CRAX {c['speed']:.4f} m/s "
            f"(ratio {b['speed'] / c['speed']:.3f}); steps pushed per start (of {BLOCK_SPEED_STEPS}): "
            f"built-in {b['steps']:.1f} / CRAX {c['steps']:.1f}")


def block_speed_summary(total, steps):
    """Pooled mean speed while pushed (m/s) and the mean number of steps pushed per start."""
    return {"speed": float(np.sum(total) / max(int(np.sum(steps)), 1)), "steps": float(np.mean(steps)),
            "starts": int(np.size(steps))}


# ---------------------------------------------------------------------------- reference file


def _flatten(prefix, tree):
    leaves = jax.tree_util.tree_leaves(tree)
    return {f"{prefix}/{i}": np.asarray(leaf) for i, leaf in enumerate(leaves)}


def _unflatten(data, prefix, template):
    treedef = jax.tree_util.tree_structure(template)
    leaves = [jnp.asarray(data[f"{prefix}/{i}"]) for i in range(treedef.num_leaves)]
    return jax.tree_util.tree_unflatten(treedef, leaves)


def builtin_template(task: str):
    env = make_env(task, "builtin")
    return env.task.init(jax.random.PRNGKey(0))


def load_reference(path: str):
    try:
        data = np.load(path)
    except OSError as err:
        raise SystemExit(f"tools.fidelity: cannot read reference file {path}: {err}") from err
    return {k: data[k] for k in data.files}


def train_policy(out: str, seed: int = 0, total_steps: float = 400_000) -> None:
    """Train PPO-Lag on the built-in goal task with the trainer's cpu preset (this repo's
    programs, algos.programs.compile_programs) and save the policy parameters and normaliser."""
    from algos.config import hyper_of, make_config
    from algos.normalizer import Normalizer
    from algos.programs import compile_programs

    config = make_config("cpu", dict(task="goal", bound=25.0, algo="ppo_lag", seed=seed, total_steps=int(total_steps)))
    compiled = compile_programs(config)
    state = compiled.init(jnp.int32(seed), hyper_of(config))
    while int(state.update) < config.num_updates:
        state, _, _ = compiled.chunk(state, hyper_of(config), jnp.int32(config.num_updates))
    arrays = {}
    for i, layer in enumerate(state.params["policy"]):
        arrays[f"policy/w{i}"], arrays[f"policy/b{i}"] = np.asarray(layer["w"]), np.asarray(layer["b"])
    for f in Normalizer._fields:
        arrays[f"normalizer/{f}"] = np.asarray(getattr(state.normalizer, f))
    _save_npz(out, arrays)


def _save_npz(path: str, arrays: dict) -> None:
    from metrics.atomic import atomic_path

    with atomic_path(path) as tmp, open(tmp, "wb") as f:
        np.savez_compressed(f, **arrays)


# ---------------------------------------------------------------------------- CLI


def task_kwargs(task: str) -> dict:
    # goal with distance shaping (the cpu preset's setting), so returns test the shaping too
    return {"reward_distance_scale": 1.0} if task == "goal" else {}


def record(path: str, tasks, episodes: int, length: int, seed: int, params_path: str | None, only=None,
           append: bool = False) -> None:
    """Run CRAX and store its per-episode results and the initial states (see module doc).

    With `append`, the new episodes (keys from `seed`, which must differ from the recorded
    ones) are added to a task's recorded episodes; every policy recorded for the task runs, and
    the task is written once all of them have, so its arrays stay aligned episode by episode.
    """
    arrays = load_reference(path) if os.path.exists(path) else {}
    if params_path:
        for k, v in np.load(params_path).items():
            arrays[f"params/{k}"] = v
    params = reference_params(arrays)
    if arrays.get("meta/length", length) != length:
        raise SystemExit(f"tools.fidelity: {path} holds episodes of {int(arrays['meta/length'])} steps, not {length}")
    arrays["meta/length"] = np.int32(length)
    for task in tasks:
        names = [n for n in POLICIES[task] if not ((n == "trained" and params is None) or (only and n not in only))]
        prior = append and f"{task}/keys" in arrays
        if prior:
            recorded = [n for n in POLICIES[task] if f"{task}/{n}/cost" in arrays]
            if sorted(recorded) != sorted(names):
                raise SystemExit(f"tools.fidelity --append: {path} holds {task} policies {recorded}; "
                                 f"this run would record {names} (give --policies to match, or --params for 'trained')")
        keys = jax.random.split(jax.random.PRNGKey(seed), episodes)
        key_data = np.asarray(jax.random.key_data(keys) if jnp.issubdtype(keys.dtype, jax.dtypes.prng_key) else keys)
        if prior and (np.asarray(arrays[f"{task}/keys"])[:, None] == key_data[None]).all(-1).any():
            raise SystemExit(f"tools.fidelity --append: seed {seed} repeats keys already in {path} for {task}; give another --seed")
        start = time.perf_counter()
        crax0, builtin0 = crax_starts(task, keys)
        new = _flatten(f"{task}/init", builtin0)
        new[f"{task}/keys"] = key_data
        print(f"[{task}] {episodes} CRAX resets in {time.perf_counter() - start:.1f} s", file=sys.stderr, flush=True)
        run = rollout_fn(task, "crax", length)
        for name in names:
            start = time.perf_counter()
            cost, ret, contacts = run((crax0, ()), keys, jnp.int32(POLICIES[task].index(name)), params)
            cost.block_until_ready()
            seconds = time.perf_counter() - start
            for field, value in (("cost", cost), ("return", ret), ("contacts", contacts)):
                new[f"{task}/{name}/{field}"] = np.asarray(value)
            new[f"{task}/{name}/seconds"] = np.float64(seconds)
            print(f"[{task}/{name}] CRAX {episodes} x {length} steps in {seconds:.1f} s: "
                  f"{summarise(cost, ret, contacts)}", file=sys.stderr, flush=True)
            if not prior:
                arrays.update(new)
                _save_npz(path, arrays)  # after each policy: a long recording keeps what it has
        if prior:
            for k, v in new.items():
                arrays[k] = arrays[k] + v if k.endswith("/seconds") else np.concatenate([arrays[k], v])
            _save_npz(path, arrays)
    _save_npz(path, arrays)


def replay_builtin(reference: dict, tasks, params, only=None):
    """The built-in side from the recorded initial states: {(task, policy): (cost, ret, contacts)}."""
    length = int(reference["meta/length"])
    out = {}
    for task in tasks:
        agent_t, state_t = builtin_template(task)
        template = jax.tree_util.tree_map(lambda a: a[None], (agent_t, state_t))
        start = _unflatten(reference, f"{task}/init", template)
        keys = jnp.asarray(reference[f"{task}/keys"])
        if keys.ndim == 2:
            keys = keys.astype(jnp.uint32)
        run = rollout_fn(task, "builtin", length)
        for index, name in enumerate(POLICIES[task]):
            if f"{task}/{name}/cost" not in reference or (only and name not in only):
                continue
            t0 = time.perf_counter()
            result = run(start, keys, jnp.int32(index), params)
            out[(task, name)] = tuple(np.asarray(r) for r in result)
            print(f"[{task}/{name}] built-in in {time.perf_counter() - t0:.1f} s", file=sys.stderr, flush=True)
    return out


def comparison_rows(reference: dict, builtin: dict):
    rows = []
    for (task, name), (cost, ret, contacts) in builtin.items():
        b = summarise(cost, ret, contacts)
        c = summarise(*(reference[f"{task}/{name}/{f}"] for f in ("cost", "return", "contacts")))
        rows.append((task, name, b, c))
    return rows


def _ratio(a, b):
    return a / b if b != 0 else (1.0 if a == 0 else float("inf"))


def table(rows) -> str:
    lines = [
        "| task | policy | episodes | cost built-in / CRAX (ratio) | return built-in / CRAX | "
        "contact steps built-in / CRAX (ratio) | V15 b / C | V25 b / C | V50 b / C |",
        "|---|---|---|---|---|---|---|---|---|",
    ]
    for task, name, b, c in rows:
        v = " | ".join(f"{b[f'V{x:g}']:.2f} / {c[f'V{x:g}']:.2f}" for x in BOUNDS)
        lines.append(
            f"| {task} | {name} | {c['episodes']} | {b['cost']:.1f} / {c['cost']:.1f} ({_ratio(b['cost'], c['cost']):.2f}) | "
            f"{b['return']:.2f} / {c['return']:.2f} | {b['contacts']:.1f} / {c['contacts']:.1f} "
            f"({_ratio(b['contacts'], c['contacts']):.2f}) | {v} |"
        )
    return "\n".join(lines)


def figure(reference: dict, builtin: dict, path: str) -> None:
    """Per-episode cost distributions, built-in vs CRAX, one panel per task and policy."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    keys = list(builtin)
    cols = 5
    rows = -(-len(keys) // cols)
    fig, axes = plt.subplots(rows, cols, figsize=(3.2 * cols, 2.6 * rows), squeeze=False)
    for ax, (task, name) in zip(axes.flat, keys):
        b = np.sort(builtin[(task, name)][0])
        c = np.sort(reference[f"{task}/{name}/cost"])
        ax.plot(c, np.linspace(0, 1, c.size), label="CRAX", color="black")
        ax.plot(b, np.linspace(0, 1, b.size), label="built-in", color="tab:orange", linestyle="--")
        for bound in BOUNDS:
            ax.axvline(bound, color="grey", linewidth=0.5)
        ax.set_title(f"{task} / {name}", fontsize=9)
        ax.set_xlabel("episode cost", fontsize=8)
        ax.tick_params(labelsize=7)
    for ax in list(axes.flat)[len(keys):]:
        ax.axis("off")
    axes.flat[0].set_ylabel("fraction of episodes", fontsize=8)
    axes.flat[0].legend(fontsize=7)
    fig.tight_layout()
    from metrics.atomic import atomic_path

    with atomic_path(path) as tmp:
        fig.savefig(tmp, dpi=110, format="png")
    plt.close(fig)


def reference_params(reference: dict):
    if not any(k.startswith("params/") for k in reference):
        return None
    from algos.normalizer import Normalizer

    n = len([k for k in reference if k.startswith("params/policy/w")])
    layers = [{"w": jnp.asarray(reference[f"params/policy/w{i}"]), "b": jnp.asarray(reference[f"params/policy/b{i}"])} for i in range(n)]
    return {"policy": layers, "normalizer": Normalizer(*(jnp.asarray(reference[f"params/normalizer/{f}"]) for f in Normalizer._fields))}


def main(argv=None) -> int:
    global CONTACT_MODEL
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--record", metavar="NPZ", help="run CRAX and write its results and initial states here")
    parser.add_argument("--reference", metavar="NPZ", help="compare the built-in tasks against this recording")
    parser.add_argument("--train", metavar="NPZ", help="train the goal policy (cpu preset) and save its parameters")
    parser.add_argument("--params", metavar="NPZ", help="trained parameters to record with (from --train)")
    parser.add_argument("--tasks", nargs="+", default=list(TASKS), choices=TASKS)
    parser.add_argument("--episodes", type=int, default=200)
    parser.add_argument("--episode-length", type=int, default=EPISODE_LENGTH)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--policies", nargs="+", help="record only these policies")
    parser.add_argument("--append", action="store_true",
                        help="with --record: add the episodes (another --seed) to those already in the file")
    parser.add_argument("--figure", metavar="PNG", help="write the cost-distribution figure here")
    parser.add_argument("--record-block-speed", metavar="NPZ", help="measure CRAX's pushed-block speed, store it here")
    parser.add_argument("--block-speed", action="store_true", help="with --reference: compare the block speed only")
    parser.add_argument("--contact-model", default=CONTACT_MODEL, choices=("mjx", "simple"),
                        help="the built-in tasks' contact_model option: mjx (their default, CRAX's contact "
                             "costs) or simple (the fast approximation)")
    args = parser.parse_args(argv)
    CONTACT_MODEL = args.contact_model
    from algos.programs import enable_compilation_cache

    enable_compilation_cache()
    if args.train:
        train_policy(args.train, seed=args.seed)
    if args.record:
        record(args.record, args.tasks, args.episodes, args.episode_length, args.seed, args.params, args.policies,
               append=args.append)
    if args.record_block_speed:
        print(f"CRAX block speed: {record_block_speed(args.record_block_speed)}")
    if args.reference and args.block_speed:
        print(block_speed_row(load_reference(args.reference)))
    elif args.reference:
        reference = load_reference(args.reference)
        tasks = [t for t in args.tasks if f"{t}/keys" in reference]
        builtin = replay_builtin(reference, tasks, reference_params(reference))
        print(table(comparison_rows(reference, builtin)))
        if args.figure:
            figure(reference, builtin, args.figure)
    if args.block_speed and not args.reference:
        parser.error("--block-speed compares against a reference: give --reference NPZ")
    if not (args.train or args.record or args.reference or args.record_block_speed):
        parser.error("nothing to do: give --record, --record-block-speed, --reference and/or --train")
    return 0


if __name__ == "__main__":
    sys.exit(main())
