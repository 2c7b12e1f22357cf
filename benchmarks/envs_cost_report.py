"""Episode-cost distributions of a random and a simple scripted policy per built-in task, and
where the paper's bounds (15, 25, 50) fall in them.

    python benchmarks/envs_cost_report.py [--episodes 256] [--episode-length 2000] [--seed 0]
        [--contact-model mjx|simple]      (default: the tasks' own default, "mjx")

Prints a markdown table (pasted into docs/envs.md). Policies:
- random: actions uniform in [-1, 1]^2, independent per step;
- scripted: turn towards a target read from the task state, full thrust once roughly
  aligned (a "greedy seeker" that ignores hazards): goal -> the first goal; circle -> a point 0.5 rad ahead on the
  circle; push -> the block; button -> the active button.
"""
from __future__ import annotations

import argparse
import os
import sys

import jax
import jax.numpy as jnp
import numpy as np

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))  # the checkout

import envs  # noqa: E402

BOUNDS = (15, 25, 50)


def target(task, state):
    """The scripted policy's target point (world frame) for one environment."""
    t = state.task
    if task == "goal":
        return t.goals[0]
    if task == "circle":
        xy = state.point.xpos
        angle = jnp.arctan2(xy[1], xy[0]) + 0.5
        return 1.5 * jnp.stack([jnp.cos(angle), jnp.sin(angle)])
    if task == "push":
        return t.block_xpos
    return jnp.sum(jnp.where((jnp.arange(t.buttons.shape[0]) == t.active)[:, None], t.buttons, 0.0), axis=0)


def scripted_action(task, state, key):
    rel = target(task, state) - state.point.xpos
    error = jnp.arctan2(rel[1], rel[0]) - state.point.qpos[2]
    error = jnp.arctan2(jnp.sin(error), jnp.cos(error))
    # The yaw actuator does nothing below |a1| = 0.5 (docs/envs.md, the point body), so turn with at
    # least 0.6, and thrust only when roughly aligned (turning at speed circles the target).
    yaw = jnp.where(jnp.abs(error) < 0.05, 0.0, jnp.sign(error) * jnp.clip(0.6 + jnp.abs(error), 0.0, 1.0))
    return jnp.stack([jnp.where(jnp.abs(error) < 0.4, 1.0, 0.0), yaw])


def random_action(task, state, key):
    return jax.random.uniform(key, (2,), minval=-1.0, maxval=1.0)


def episodes(task, policy, n, length, seed, options=None):
    """(returns, costs) of n episodes of `length` steps."""
    env = envs.make(task, episode_length=length, **(options or {}))

    @jax.jit
    def run(key):
        k_reset, k_act = jax.random.split(key)
        state = jax.vmap(env.reset)(jax.random.split(k_reset, n))

        def body(s, k):
            a = jax.vmap(lambda si, ki: policy(task, si, ki))(s, jax.random.split(k, n))
            return jax.vmap(env.step)(s, a), None

        state, _ = jax.lax.scan(body, state, jax.random.split(k_act, length))
        return state.finished_return, state.finished_cost, state.finished_length

    returns, costs, lengths = run(jax.random.PRNGKey(seed))
    assert np.all(np.asarray(lengths) == length)
    return np.asarray(returns), np.asarray(costs)


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--episodes", type=int, default=256)
    parser.add_argument("--episode-length", type=int, default=2000)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--tasks", nargs="+", default=list(envs.TASKS), choices=envs.TASKS)
    parser.add_argument("--contact-model", choices=("mjx", "simple"),
                        help="the tasks' contact_model option: mjx (their default) or simple "
                             "(the fast approximation)")
    args = parser.parse_args(argv)
    options = {"contact_model": args.contact_model} if args.contact_model else {}
    jax.config.update("jax_compilation_cache_dir", os.environ.get("JAX_COMPILATION_CACHE_DIR", ".jax_cache"))
    print(f"{args.episodes} episodes per row, T = {args.episode_length}, seed {args.seed}, "
          f"contact_model {args.contact_model or 'default'}\n")
    bounds = "/".join(map(str, BOUNDS))
    print(f"| task | policy | mean return | cost mean | cost p10/p25/p50/p75/p90 | share > {bounds} |")
    print("|---|---|---|---|---|---|")
    for task in args.tasks:
        for name, policy in (("random", random_action), ("scripted", scripted_action)):
            returns, costs = episodes(task, policy, args.episodes, args.episode_length, args.seed, options)
            q = np.percentile(costs, [10, 25, 50, 75, 90])
            shares = "/".join(f"{np.mean(costs > b):.2f}" for b in BOUNDS)
            print(f"| {task} | {name} | {returns.mean():.2f} | {costs.mean():.1f} | "
                  f"{'/'.join(f'{v:.1f}' for v in q)} | {shares} |", flush=True)


if __name__ == "__main__":
    main()
