"""Env-only throughput: steps/s per task at N parallel envs after compilation, and compile time.

    python benchmarks/envs_throughput.py [--tasks goal circle push button] [--num-envs 2048]
        [--steps 200] [--repeats 3] [--crax] [--crax-num-envs 256] [--crax-steps 10]
        [--crax-tasks safe_velocity_hopper safe_goal_point@l2 ...]
        [--compare OTHER_CHECKOUT] [--rounds 2] [--single-thread] [--option contact_model=simple]

Steps/s is wall-clock; "per CPU-second" divides by the CPU time this process used, which
tells how much of the machine it got when other jobs share it (on an idle 2-core machine
steps/s approaches up to twice that figure). The built-in backend runs `jit(scan(vmap(env.step)))` over `--steps` steps with uniform random
actions (episode length 2000, so auto-resets happen as in training: all envs at once, every
2000 steps). With --crax (and crax-bench importable) the same task is stepped through the
CRAX adapter in the same run (a jitted loop of vmapped steps; CRAX saturates the CPU well
below 2048 envs) and the ratio builtin / CRAX is printed. Timings are the best of --repeats.

--compare DIR times the built-in tasks of another checkout (e.g. the old code from
`git worktree add /tmp/old main`) in the same run: each task runs in a fresh subprocess per
checkout, alternating this checkout and DIR for --rounds rounds, and the best rate of each is
compared, so both see the same machine load. --single-thread sets XLA's CPU backend to one
thread (as training jobs run), which makes CPU-second figures comparable on a shared machine.
--option KEY=VALUE passes a task option to this checkout's tasks only (an older checkout may
not know it), e.g. `--compare . --option contact_model=simple` times the fast contact
approximation against the default MJX solve in the same run.
"""
from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import time

import jax
import jax.numpy as jnp

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))  # the checkout

import envs  # noqa: E402


def measure(env, num_envs, steps, repeats, seed=0):
    """(compile seconds, best steps/s, steps per CPU-second of that repeat) for `steps`
    vmapped steps of `num_envs` envs."""

    def rollout(state, key):
        def body(s, k):
            a = jax.random.uniform(k, (num_envs, 2), minval=-1.0, maxval=1.0)
            s = jax.vmap(env.step)(s, a)
            return s, None

        state, _ = jax.lax.scan(body, state, jax.random.split(key, steps))
        return state

    state = jax.jit(jax.vmap(env.reset))(jax.random.split(jax.random.PRNGKey(seed), num_envs))
    jax.block_until_ready(state)
    run = jax.jit(rollout)
    start = time.perf_counter()
    compiled = run.lower(state, jax.random.PRNGKey(1)).compile()
    compile_s = time.perf_counter() - start
    state = compiled(state, jax.random.PRNGKey(1))  # warm-up
    jax.block_until_ready(state)
    best, per_cpu = 0.0, 0.0
    for r in range(repeats):
        start, cpu = time.perf_counter(), time.process_time()
        state = compiled(state, jax.random.PRNGKey(2 + r))
        jax.block_until_ready(state)
        rate = num_envs * steps / (time.perf_counter() - start)
        if rate > best:
            best, per_cpu = rate, num_envs * steps / (time.process_time() - cpu)
    return compile_s, best, per_cpu


def measure_crax(env, num_envs, steps, repeats):
    """CRAX: a Python loop of one jitted vmapped step (compiling a scan of MJX is minutes)."""
    reset = jax.jit(jax.vmap(env.reset))
    step = jax.jit(jax.vmap(env.step))
    state = reset(jax.random.split(jax.random.PRNGKey(0), num_envs))
    actions = jax.random.uniform(jax.random.PRNGKey(1), (num_envs, env.action_size), minval=-1.0, maxval=1.0)
    start = time.perf_counter()
    state = step(state, actions)
    jax.block_until_ready(state)
    compile_s = time.perf_counter() - start
    # CRAX's reset state carries Python ints in `info` that a step turns into int32 arrays, so
    # the second call traces and compiles once more; keep that out of the timing.
    state = step(state, actions)
    jax.block_until_ready(state)
    best = 0.0
    for _ in range(repeats):
        start = time.perf_counter()
        for _ in range(steps):
            state = step(state, actions)
        jax.block_until_ready(state)
        best = max(best, num_envs * steps / (time.perf_counter() - start))
    return compile_s, best


SINGLE_THREAD_XLA_FLAGS = "--xla_cpu_multi_thread_eigen=false intra_op_parallelism_threads=1"
# Run in a subprocess: import `envs` from the checkout given as argv[1], time one task.
_CHILD = """
import json, os, sys
sys.path.insert(0, sys.argv[1])
sys.path.insert(0, os.path.dirname(sys.argv[2]))
import jax, envs
from envs_throughput import measure
jax.config.update("jax_compilation_cache_dir", os.environ.get("JAX_COMPILATION_CACHE_DIR", ".jax_cache"))
task, n, steps, repeats = sys.argv[3], int(sys.argv[4]), int(sys.argv[5]), int(sys.argv[6])
options = json.loads(sys.argv[7])
print(json.dumps(measure(envs.make(task, episode_length=2000, **options), n, steps, repeats)))
"""


def measure_checkout(checkout, task, num_envs, steps, repeats, single_thread, options=None):
    """measure() for `task` as implemented in another checkout, in a fresh interpreter."""
    env = dict(os.environ)
    if single_thread:
        env["XLA_FLAGS"] = (env.get("XLA_FLAGS", "") + " " + SINGLE_THREAD_XLA_FLAGS).strip()
    out = subprocess.run(
        [sys.executable, "-c", _CHILD, os.path.abspath(checkout), os.path.abspath(__file__), task,
         str(num_envs), str(steps), str(repeats), json.dumps(options or {})],
        env=env, check=True, capture_output=True, text=True,
    )
    return json.loads(out.stdout.strip().splitlines()[-1])


def compare(args):
    here = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    if not os.path.isdir(os.path.join(args.compare, "envs")):
        raise SystemExit(f"--compare: {args.compare!r} has no envs/ package (not a checkout of this project)")
    print(f"load average {os.getloadavg()[0]:.1f} at start; {args.num_envs} envs x {args.steps} steps, "
          f"best of {args.repeats} x {args.rounds} alternating rounds; "
          f"{'single-threaded' if args.single_thread else 'default'} XLA threads")
    print(f"{'task':7s} {'this steps/s':>13s} {'other steps/s':>14s} {'ratio':>6s}   "
          f"{'this /CPU-s':>12s} {'other /CPU-s':>13s} {'ratio':>6s}")
    for task in args.tasks:
        best = {"this": (0.0, 0.0), "other": (0.0, 0.0)}
        for _ in range(args.rounds):
            for name, checkout in (("this", here), ("other", args.compare)):
                _, sps, per_cpu = measure_checkout(
                    checkout, task, args.num_envs, args.steps, args.repeats, args.single_thread,
                    task_options(args) if name == "this" else None,
                )
                best[name] = (max(best[name][0], sps), max(best[name][1], per_cpu))
        (a, ac), (b, bc) = best["this"], best["other"]
        print(f"{task:7s} {a:13,.0f} {b:14,.0f} {a / b:5.2f}x   {ac:12,.0f} {bc:13,.0f} {ac / bc:5.2f}x", flush=True)
    print(f"load average {os.getloadavg()[0]:.1f} at the end")


def task_options(args):
    """The --option KEY=VALUE pairs as task options (values read as the trainer's `--set env.KEY`)."""
    from algos.config import parse_env_value

    out = {}
    for item in args.option:
        key, sep, value = item.partition("=")
        if not sep or not key:
            raise SystemExit(f"--option {item!r}: expected KEY=VALUE, e.g. contact_model=simple")
        out[key] = parse_env_value(value)
    return out


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--tasks", nargs="+", default=list(envs.TASKS), choices=envs.TASKS)
    parser.add_argument("--num-envs", type=int, default=2048)
    parser.add_argument("--steps", type=int, default=200)
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--crax", action="store_true", help="also time CRAX's same task (needs crax-bench)")
    parser.add_argument("--crax-num-envs", type=int, default=256)
    parser.add_argument("--crax-steps", type=int, default=10)
    parser.add_argument("--crax-tasks", nargs="+", default=[], metavar="TASK_ID",
                        help="CRAX-only tasks by task id, timed after the built-in ones at --crax-num-envs, e.g. "
                        "safe_velocity_hopper safe_goal_point@l2")
    parser.add_argument("--compare", metavar="DIR", help="also time another checkout's built-in tasks, alternating")
    parser.add_argument("--rounds", type=int, default=2, help="alternating rounds with --compare")
    parser.add_argument("--single-thread", action="store_true", help="XLA CPU backend on one thread")
    parser.add_argument("--option", action="append", default=[], metavar="KEY=VALUE",
                        help="task option for this checkout's tasks only, e.g. contact_model=simple (repeatable)")
    args = parser.parse_args(argv)
    if args.compare:
        return compare(args)
    if args.single_thread:
        os.environ["XLA_FLAGS"] = (os.environ.get("XLA_FLAGS", "") + " " + SINGLE_THREAD_XLA_FLAGS).strip()
    jax.config.update("jax_compilation_cache_dir", os.environ.get("JAX_COMPILATION_CACHE_DIR", ".jax_cache"))

    print(f"jax {jax.__version__} on {jax.devices()[0].platform}, {os.cpu_count()} CPUs, "
          f"load average {os.getloadavg()[0]:.1f} at start; "
          f"built-in: {args.num_envs} envs x {args.steps} steps, best of {args.repeats}")
    for task in args.tasks:
        env = envs.make(task, episode_length=2000, **task_options(args))
        compile_s, sps, per_cpu = measure(env, args.num_envs, args.steps, args.repeats)
        line = (f"{task:7s} builtin: {sps:12,.0f} steps/s ({per_cpu:11,.0f} per CPU-second)"
                f"   compile {compile_s:5.1f} s")
        if args.crax:
            try:
                crax_env = envs.make(task, backend="crax", episode_length=2000)
            except ImportError as err:
                line += f"   crax: not available ({err})"
            else:
                c_compile, c_sps = measure_crax(crax_env, args.crax_num_envs, args.crax_steps, 1)
                line += (f"   crax ({args.crax_num_envs} envs): {c_sps:8,.0f} steps/s   compile {c_compile:5.1f} s"
                         f"   ratio {sps / c_sps:6.0f}x")
        print(line, flush=True)
    for text in args.crax_tasks:
        from runs.run_layout import parse_task_id

        name, level = parse_task_id(text)
        env = envs.make(name, backend="crax", level=level, episode_length=2000)
        c_compile, c_sps = measure_crax(env, args.crax_num_envs, args.crax_steps, 1)
        print(f"{text:26s} crax ({args.crax_num_envs} envs, obs {env.observation_size}, act {env.action_size}): "
              f"{c_sps:8,.0f} steps/s   compile {c_compile:5.1f} s", flush=True)


if __name__ == "__main__":
    main()
