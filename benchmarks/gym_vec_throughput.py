"""Steps/s of `envs.make_vec` (the Gymnasium vector env) against the raw JAX env, in one run.

    python benchmarks/gym_vec_throughput.py [--task goal] [--backend builtin] [--num-envs 16 256]
        [--steps 1000] [--repeats 3] [--option episode_length=1000]

For each num_envs, the same `steps` uniform random actions (drawn up front) go through
- raw scan: `jit(scan(vmap(env.step)))`, the whole rollout one XLA call (how the trainer steps);
- raw loop: a Python loop of one jitted `vmap(env.step)` per step, actions already on the device;
- gym vec: `vec.step(numpy actions)` per step, each fetching obs, reward, cost, terminated,
  truncated and final obs as numpy (what a torch or numpy trainer gets).
Env steps/s = num_envs * steps / wall seconds after compilation, and per CPU-second this
process used (all its threads: what the figure costs, steadier than wall time when other jobs
share the machine); best of --repeats, the three timed in turn (in a rotating order) in each
repeat so they see the same machine load; ratios are gym vec / raw.
"""
from __future__ import annotations

import argparse
import os
import sys
import time

import jax
import numpy as np

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))  # the checkout

import envs  # noqa: E402

BASES = ("wall", "CPU-s")  # per wall-clock second; per CPU-second of this process (less load-dependent)


def parse_option(text):
    key, _, value = text.partition("=")
    try:
        return key, int(value)
    except ValueError:
        try:
            return key, float(value)
        except ValueError:
            return key, value


def timed(fn):
    """(wall seconds, CPU seconds of this process, all threads) of fn()."""
    start, cpu = time.perf_counter(), time.process_time()
    fn()
    return time.perf_counter() - start, time.process_time() - cpu


def measure(task, backend, options, num_envs, steps, repeats):
    """{basis: {method: best env steps/s}} for one num_envs, per wall second and per CPU-second."""
    vec = envs.make_vec(task, num_envs, backend=backend, **options)
    env = vec.jax_env
    actions = np.random.default_rng(0).uniform(-1.0, 1.0, (steps, num_envs, env.action_size)).astype(np.float32)
    device_actions = jax.device_put(actions)
    per_step = [jax.device_put(a) for a in actions]  # indexing device_actions per step would add an op
    reset = jax.jit(jax.vmap(env.reset))
    step = jax.jit(jax.vmap(env.step))
    scan = jax.jit(lambda s, a: jax.lax.scan(lambda s, x: (jax.vmap(env.step)(s, x), None), s, a)[0])
    keys = jax.random.split(jax.random.PRNGKey(0), num_envs)

    def raw_scan():
        jax.block_until_ready(scan(reset(keys), device_actions))

    def raw_loop():
        state = reset(keys)
        for a in per_step:
            state = step(state, a)
        jax.block_until_ready(state)

    def gym_vec():
        vec.reset(seed=0)
        for t in range(steps):
            vec.step(actions[t])

    methods = {"raw scan": raw_scan, "raw loop": raw_loop, "gym vec": gym_vec}
    for fn in methods.values():  # compile, warm up
        fn()
    best = {basis: {name: 0.0 for name in methods} for basis in BASES}
    order = list(methods)
    for r in range(repeats):  # each repeat in another order, so no method always follows the same one
        for name in order[r % 3:] + order[:r % 3]:
            for basis, seconds in zip(BASES, timed(methods[name])):
                best[basis][name] = max(best[basis][name], num_envs * steps / seconds)
    return best


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--task", default="goal", choices=envs.TASKS)
    parser.add_argument("--backend", default="builtin", choices=envs.BACKENDS)
    parser.add_argument("--num-envs", type=int, nargs="+", default=[16, 256])
    parser.add_argument("--steps", type=int, default=1000)
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--option", action="append", default=[], type=parse_option,
                        help="KEY=VALUE passed to envs.make_vec (e.g. episode_length=1000)")
    args = parser.parse_args(argv)
    options = dict(args.option)
    print(f"{args.task} ({args.backend}), {args.steps} steps, best of {args.repeats}, "
          f"jax {jax.__version__} on {jax.devices()[0].platform}; env steps/s")
    print(f"{'num_envs':>8} {'per':>6} {'raw scan':>12} {'raw loop':>12} {'gym vec':>12} {'vec/scan':>9} {'vec/loop':>9}")
    for n in args.num_envs:
        rates = measure(args.task, args.backend, options, n, args.steps, args.repeats)
        for basis, rate in rates.items():
            print(f"{n:>8} {basis:>6} {rate['raw scan']:>12,.0f} {rate['raw loop']:>12,.0f} {rate['gym vec']:>12,.0f} "
                  f"{rate['gym vec'] / rate['raw scan']:>9.2f} {rate['gym vec'] / rate['raw loop']:>9.2f}", flush=True)


if __name__ == "__main__":
    main()
