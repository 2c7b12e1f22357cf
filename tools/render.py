"""Draw a task's layout and a short random rollout: python -m tools.render TASK --out FILE.png

    python -m tools.render goal --out docs/img/goal.png [--steps 300] [--seed 0]

The agent's path is coloured by time and marked red where the step's cost was positive.
Built-in backend only (it reads the layout from the task state). Each task's layout is drawn
by its function in `DRAW`; a task without one (a new task in envs.TASK_TABLE) gets its path only.
"""
from __future__ import annotations

import argparse
import os
import sys
import tempfile

import jax
import jax.numpy as jnp
import numpy as np

import envs


def rollout(task, steps, seed):
    env = envs.make(task, episode_length=steps + 1)
    key_reset, key_act = jax.random.split(jax.random.PRNGKey(seed))
    state = env.reset(key_reset)

    def body(s, k):
        s = env.step(s, jax.random.uniform(k, (2,), minval=-1.0, maxval=1.0))
        return s, (s.point.xpos, s.cost, s.task)

    _, (path, cost, tasks) = jax.jit(lambda s: jax.lax.scan(body, s, jax.random.split(key_act, steps)))(state)
    return state, np.asarray(path), np.asarray(cost), tasks


def _boxes(ax, centres, half, **style):
    from matplotlib.patches import Rectangle

    for i, ((x, y), (hx, hy)) in enumerate(zip(np.asarray(centres), np.broadcast_to(np.asarray(half), np.shape(centres)))):
        ax.add_patch(Rectangle((x - hx, y - hy), 2 * hx, 2 * hy, **(style if i == 0 else _unlabelled(style))))


def _discs(ax, centres, radius, **style):
    from matplotlib.patches import Circle

    for i, (x, y) in enumerate(np.asarray(centres)):
        ax.add_patch(Circle((x, y), radius, **(style if i == 0 else _unlabelled(style))))


def _unlabelled(style):
    return {k: v for k, v in style.items() if k != "label"}


def draw_layout(ax, task, state, tasks):
    """Draw the task's layout with its function in DRAW (if it has one)."""
    draw = DRAW.get(task)
    if draw is not None:
        draw(ax, state.task, tasks)


def draw_goal(ax, t, tasks):
    from envs import goal

    _discs(ax, t.hazards, goal.HAZARD_RADIUS, color="tab:blue", alpha=0.35, label="hazard (cost 2 max(0, 1-d/0.4))")
    goals = np.concatenate([np.asarray(t.goals), np.asarray(tasks.goals).reshape(-1, 2)])
    _discs(ax, np.unique(goals.round(5), axis=0), goal.GOAL_RADIUS, color="tab:green", alpha=0.5, label="goals (incl. respawns)")
    _boxes(ax, goal.WALL_CENTRES, goal.WALL_HALF, color="0.3", label="wall (cost 3 on contact)")
    _square_view(ax, 3.1)


def draw_circle(ax, t, tasks):
    from envs import circle

    angle = np.linspace(0, 2 * np.pi, 200)
    ax.plot(circle.CIRCLE_RADIUS * np.cos(angle), circle.CIRCLE_RADIUS * np.sin(angle), color="tab:green", label="circle r 1.5")
    for x in (-circle.BOUNDARY_X, circle.BOUNDARY_X):
        ax.axvline(x, color="tab:red", ls="--")
    ax.axvspan(circle.BOUNDARY_X, 10, color="tab:red", alpha=0.08, label="|x| > 1.125: cost 0.1")
    ax.axvspan(-10, -circle.BOUNDARY_X, color="tab:red", alpha=0.08)
    _square_view(ax, 2.5)


def draw_push(ax, t, tasks):
    from envs import push

    _boxes(ax, t.squares, push.SQUARE_HALF, color="tab:blue", alpha=0.35, label="hazard square (cost 2 max(0, 1-d/0.3))")
    _boxes(ax, t.pillars, push.PILLAR_HALF, color="tab:purple", alpha=0.8, label="pillar (cost 3 on contact)")
    goals = np.unique(np.concatenate([np.asarray(t.goal)[None], np.asarray(tasks.goal)]).round(5), axis=0)
    _boxes(ax, goals, push.GOAL_HALF, color="tab:green", alpha=0.5, label="goal (incl. respawns)")
    _boxes(ax, push.WALL_CENTRES, push.WALL_HALF, color="0.3", label="wall (cost 3 on contact)")
    block_path = np.asarray(tasks.block_xpos)
    ax.plot(block_path[:, 0], block_path[:, 1], color="tab:orange", lw=1)
    _boxes(ax, block_path[-1:], push.BLOCK_HALF, color="tab:orange", label="block (final)")
    _square_view(ax, 3.7)


def draw_button(ax, t, tasks):
    from matplotlib.patches import Rectangle

    from envs import button

    active = int(t.active)
    _discs(ax, t.buttons, button.BUTTON_RADIUS, color="gold", label="buttons (wrong one: cost 1)")
    _discs(ax, np.asarray(t.buttons)[active : active + 1], button.BUTTON_RADIUS * 1.6, fill=False, color="tab:green", lw=2, label="active button")
    _boxes(ax, t.cubes, button.CUBE_HALF, color="tab:purple", alpha=0.8, label="cube (cost 3 on contact)")
    _discs(ax, t.gremlin_centres, button.GREMLIN_TRAVEL, fill=False, color="tab:red", ls=":")
    _boxes(ax, t.gremlins, button.GREMLIN_HALF, color="tab:red", alpha=0.7, label="gremlin (cost 3 on contact)")
    ax.add_patch(Rectangle((-button.EXTENT, -button.EXTENT), 2 * button.EXTENT, 2 * button.EXTENT, fill=False, ls="--", color="0.5"))
    _square_view(ax, 2.6)


def _square_view(ax, lim):
    ax.set_xlim(-lim, lim)
    ax.set_ylim(-lim, lim)


# Per task: draw(ax, task state at reset, task states of the rollout [steps]).
DRAW = {"goal": draw_goal, "circle": draw_circle, "push": draw_push, "button": draw_button}


def render(task, out, steps=300, seed=0):
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    state, path, cost, tasks = rollout(task, steps, seed)
    fig, ax = plt.subplots(figsize=(9.0, 6.0))
    draw_layout(ax, task, state, tasks)
    full = np.concatenate([np.asarray(state.point.xpos)[None], path])
    ax.scatter(full[:, 0], full[:, 1], c=np.arange(len(full)), cmap="viridis", s=4, zorder=3)
    costly = path[cost > 0]
    ax.scatter(costly[:, 0], costly[:, 1], s=14, facecolors="none", edgecolors="red", lw=0.8, zorder=4, label="step with cost > 0")
    ax.plot(*full[0], marker="o", color="black", ms=6, zorder=5, label="agent start")
    ax.set_aspect("equal")
    ax.set_title(f"{task} (level 1): layout and {steps} random steps; episode cost {cost.sum():.1f}")
    ax.legend(loc="upper left", bbox_to_anchor=(1.01, 1.0), fontsize=8)
    folder = os.path.dirname(os.path.abspath(out))
    os.makedirs(folder, exist_ok=True)
    fd, tmp = tempfile.mkstemp(suffix=".png", dir=folder)
    os.close(fd)
    try:
        fig.savefig(tmp, dpi=110, bbox_inches="tight")
        os.replace(tmp, out)
    finally:
        plt.close(fig)
        if os.path.exists(tmp):
            os.unlink(tmp)


def main(argv=None):
    parser = argparse.ArgumentParser(description="Draw a task's layout and a short random rollout.")
    parser.add_argument("task", choices=envs.TASKS)
    parser.add_argument("--out", required=True, help="PNG file to write")
    parser.add_argument("--steps", type=int, default=300)
    parser.add_argument("--seed", type=int, default=0)
    args = parser.parse_args(argv)
    if args.steps < 1:
        parser.error(f"--steps must be >= 1, got {args.steps}")
    jax.config.update("jax_compilation_cache_dir", os.environ.get("JAX_COMPILATION_CACHE_DIR", ".jax_cache"))
    render(args.task, args.out, args.steps, args.seed)
    print(f"wrote {args.out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
