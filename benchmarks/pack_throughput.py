"""Training throughput against pack size and mode: env steps per CPU-second and per wall second.

    python benchmarks/pack_throughput.py [--task goal] [--algo ppo_lag] [--preset cpu]
                                         [--sizes 1,4] [--modes sequential,batched]
                                         [--chunks 2] [--chunk-updates 10]
                                         [--crax-task safe_velocity_hopper] [--no-alone]

For each pack size P and mode (algos.programs: `sequential` runs the members one after another,
`batched` all at once, its program padded to a power of two) it compiles the pack program, runs
one untimed chunk, then `--chunks` timed chunks, and prints env steps of the P runs per
CPU-second of this process and per wall second. The baseline, measured in the same run, is the
single-run program (what one run alone costs); the ratio columns are the pack's rates over it
(CPU ratio 1.0: a member costs what it costs alone). On a GPU, per wall second is the figure that
matters: use `--preset paper --set env.contact_model=mjx` for the paper-builtin sizes.

`--crax-task TASK_ID` (the crax extra) times a CRAX task (a task id: safe_velocity_hopper,
safe_goal_point@l2) after `--task` at the same sizes, modes and trainer settings, and prints its
rates over `--task`'s, both measured in this run. `--no-alone` skips the single-run baselines
(and their compiles; the ratio columns then show -).
"""
from __future__ import annotations

import argparse
import os
import sys
import time

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))

import jax  # noqa: E402
import jax.numpy as jnp  # noqa: E402

from algos.config import hyper_of, make_config, stacked_hyper  # noqa: E402
from algos.programs import compile_programs, enable_compilation_cache, pack_slots  # noqa: E402


def measure(config, size, chunks, mode="sequential"):
    """(steps per CPU-second, steps per second, compile s) of `size` runs (None: one run alone)."""
    n = 1 if size is None else size
    slots = None if size is None else pack_slots(size, mode)
    compiled = compile_programs(config, size=slots, mode=mode)
    if size is None:
        seeds, h, budget = jnp.int32(config.seed), hyper_of(config), jnp.int32(10**9)
    else:
        seeds = jnp.arange(slots, dtype=jnp.int32)
        h, budget = stacked_hyper([config] * slots), jnp.full(slots, 10**9, jnp.int32)
    state = compiled.init(seeds, h)
    state, log, _ = compiled.chunk(state, h, budget)  # untimed: the first call allocates
    jax.block_until_ready(log.count)
    cpu, wall = time.process_time(), time.perf_counter()
    for _ in range(chunks):
        state, log, _ = compiled.chunk(state, h, budget)
        jax.block_until_ready(log.count)
    cpu, wall = time.process_time() - cpu, time.perf_counter() - wall
    steps = n * chunks * config.chunk_updates * config.steps_per_update
    return steps / cpu, steps / wall, compiled.compile_s


def table(task: str, config, args) -> dict:
    """Print one task's rows; {(runs, mode): (steps per CPU-second, steps per second)}."""
    print(f"{task} ({config.backend}):")
    print(f"{'runs':>5} {'mode':>10} {'steps/CPU-s':>12} {'steps/s':>10} {'compile s':>10} {'ratio (CPU)':>12} "
          f"{'ratio (wall)':>12}")
    base_cpu = base_wall = None
    if not args.no_alone:
        base_cpu, base_wall, base_compile = measure(config, None, args.chunks)
        print(f"{1:>5} {'alone':>10} {base_cpu:12,.0f} {base_wall:10,.0f} {base_compile:10.1f} {1.0:12.2f} {1.0:12.2f}",
              flush=True)
    rates = {}
    for size in (int(s) for s in args.sizes.split(",")):
        for mode in args.modes.split(","):
            rate_cpu, rate_wall, compile_s = measure(config, size, args.chunks, mode)
            ratios = ("-", "-") if base_cpu is None else (f"{rate_cpu / base_cpu:.2f}", f"{rate_wall / base_wall:.2f}")
            print(f"{size:>5} {mode:>10} {rate_cpu:12,.0f} {rate_wall:10,.0f} {compile_s:10.1f} {ratios[0]:>12} "
                  f"{ratios[1]:>12}", flush=True)
            rates[size, mode] = rate_cpu, rate_wall
    return rates


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--task", default="goal")
    parser.add_argument("--algo", default="ppo_lag")
    parser.add_argument("--preset", default="cpu")
    parser.add_argument("--sizes", default="1,4", help="pack sizes, comma-separated")
    parser.add_argument("--modes", default="sequential,batched", help="pack modes, comma-separated")
    parser.add_argument("--chunks", type=int, default=2, help="timed chunks per size")
    parser.add_argument("--chunk-updates", type=int, default=10, help="updates per chunk")
    parser.add_argument("--set", action="append", default=[], metavar="KEY=VALUE", help="trainer config override")
    parser.add_argument("--crax-task", default=None, metavar="TASK_ID",
                        help="also time this CRAX task (e.g. safe_velocity_hopper) and print its rates over --task's")
    parser.add_argument("--no-alone", action="store_true", help="skip the single-run baselines")
    args = parser.parse_args(argv)
    enable_compilation_cache()
    sets = [f"chunk_updates={args.chunk_updates}", *args.set]
    config = make_config(args.preset, dict(task=args.task, algo=args.algo), sets)
    device = jax.devices()[0]
    print(f"{args.algo} preset {args.preset} ({config.num_envs} envs, {config.steps_per_update:,} steps per update) "
          f"on {device.platform} ({device.device_kind}), {os.cpu_count()} CPUs, load average "
          f"{os.getloadavg()[0]:.1f} at start")
    rates = table(args.task, config, args)
    if args.crax_task:
        from runs.run_layout import parse_task_id

        name, level = parse_task_id(args.crax_task)
        crax_rates = table(args.crax_task, make_config(args.preset, dict(task=name, level=level, backend="crax",
                                                                         algo=args.algo), sets), args)
        for key, (rate_cpu, rate_wall) in crax_rates.items():
            print(f"{args.crax_task} / {args.task}, {key[0]} runs {key[1]}: {rate_cpu / rates[key][0]:.4f} (CPU), "
                  f"{rate_wall / rates[key][1]:.4f} (wall)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
