"""Trace+lower and XLA compile seconds of the programs that step a task.

Prints one line per program, for --task (default goal) and --contact-model (default mjx):
    rollout  a 300-step, 64-env random-action rollout under lax.scan (jit(...).lower, .compile)
    chunk    the trainer's training-chunk program for the `cpu` preset (algo ppo_lag)
with the seconds for trace+lower and for the XLA compile of each. The persistent compilation
cache is off, so every compile is a real one. Run it from the checkout to be measured:

    PYTHONPATH=. python benchmarks/compile_time.py --task push --contact-model mjx
"""
from __future__ import annotations

import argparse
import os
import sys
import time

import jax
import jax.numpy as jnp

jax.config.update("jax_enable_compilation_cache", False)

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))  # the checkout

import envs  # noqa: E402
from algos.config import hyper_of, make_config  # noqa: E402
from algos.core import build_programs  # noqa: E402

N_ENVS, N_STEPS = 64, 300


def timed(jitted, *args):
    """(trace+lower seconds, compile seconds) of jitted at these arguments (or their shapes)."""
    t0 = time.perf_counter()
    lowered = jitted.lower(*args)
    t1 = time.perf_counter()
    lowered.compile()
    return t1 - t0, time.perf_counter() - t1


def rollout_program(task: str, contact_model: str):
    env = envs.make(task, contact_model=contact_model)

    def rollout(key):
        k0, k1 = jax.random.split(key)
        state = jax.vmap(env.reset)(jax.random.split(k0, N_ENVS))

        def body(s, k):
            s = jax.vmap(env.step)(s, jax.random.uniform(k, (N_ENVS, env.action_size), minval=-1.0, maxval=1.0))
            return s, (s.reward, s.cost)

        return jax.lax.scan(body, state, jax.random.split(k1, N_STEPS))[1]

    return jax.jit(rollout), (jax.random.PRNGKey(0),)


def chunk_program(task: str, contact_model: str):
    cfg = make_config("cpu", dict(task=task, algo="ppo_lag"), sets=[f"env.contact_model={contact_model}"])
    programs, hyper = build_programs(cfg), hyper_of(cfg)
    template = jax.eval_shape(programs.init, jnp.int32(0), hyper)
    return jax.jit(programs.chunk), (template, hyper, jnp.int32(0))


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--task", default="goal", choices=envs.TASKS)
    parser.add_argument("--contact-model", default="mjx", choices=("mjx", "simple"))
    args = parser.parse_args(argv)
    print(f"task={args.task} contact_model={args.contact_model} jax={jax.__version__} {jax.devices()[0].platform}")
    for name, make in (("rollout", rollout_program), ("chunk", chunk_program)):
        jitted, example = make(args.task, args.contact_model)
        lower_s, compile_s = timed(jitted, *example)
        print(f"{name:8s} trace+lower {lower_s:7.2f} s   compile {compile_s:7.2f} s", flush=True)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
