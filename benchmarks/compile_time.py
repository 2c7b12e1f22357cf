"""Trace+lower and XLA compile seconds of the programs that step a task.

Prints one line per program, for --task (default goal) and --contact-model (default mjx):
    rollout  a 300-step, 64-env random-action rollout under lax.scan (jit(...).lower, .compile)
    chunk    the trainer's training-chunk program for the `cpu` preset (algo ppo_lag)
with the seconds for trace+lower and for the XLA compile of each. The persistent compilation
cache is off, so every compile is a real one. Run it from the checkout to be measured:

    PYTHONPATH=. python benchmarks/compile_time.py --task push --contact-model mjx

`--xla-option KEY=VALUE` (repeatable) measures XLA compiler options as a candidate: the chunk's
lowered program is compiled alternately with XLA's defaults and with the options, `--repeats`
times each, and for each the script prints the compile seconds (median), the seconds of one call
of the compiled chunk (median of `--repeats` calls after an untimed one, budget = chunk_updates),
the ratios options/defaults, and whether the chunk's outputs are bitwise equal (`results:`):

    python benchmarks/compile_time.py --task circle --single-thread \
        --xla-option xla_backend_optimization_level=1 --repeats 2

`--chunk-updates N` and `--num-envs N` shrink the chunk; `--single-thread` runs XLA on one
thread, as the trainer's sweep jobs do (runs/train.py SINGLE_THREAD_XLA_FLAGS).
"""
from __future__ import annotations

import os
import sys

SINGLE_THREAD_XLA_FLAGS = "--xla_cpu_multi_thread_eigen=false intra_op_parallelism_threads=1"  # runs/train.py's
if "--single-thread" in sys.argv:  # one thread, as a sweep job runs; XLA_FLAGS before jax is imported
    os.environ["XLA_FLAGS"] = (os.environ.get("XLA_FLAGS", "") + " " + SINGLE_THREAD_XLA_FLAGS).strip()

import argparse  # noqa: E402
import statistics  # noqa: E402
import time  # noqa: E402

import jax  # noqa: E402
import jax.numpy as jnp  # noqa: E402
import numpy as np  # noqa: E402

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


def chunk_config(task: str, contact_model: str, chunk_updates: int | None = None, num_envs: int | None = None):
    sets = [f"env.contact_model={contact_model}"] + ([f"chunk_updates={chunk_updates}"] if chunk_updates else [])
    return make_config("cpu", dict(task=task, algo="ppo_lag", num_envs=num_envs), sets=sets)


def chunk_program(task: str, contact_model: str, chunk_updates: int | None = None, num_envs: int | None = None):
    cfg = chunk_config(task, contact_model, chunk_updates, num_envs)
    programs, hyper = build_programs(cfg), hyper_of(cfg)
    template = jax.eval_shape(programs.init, jnp.int32(0), hyper)
    return jax.jit(programs.chunk), (template, hyper, jnp.int32(0))


def option(text: str) -> tuple[str, object]:
    """`KEY=VALUE` of --xla-option: the value as an int, float or bool where it reads as one."""
    key, sep, value = text.partition("=")
    if not sep or not key.strip():
        raise argparse.ArgumentTypeError(f"{text!r}: expected KEY=VALUE")
    value = value.strip()
    if value.lower() in ("true", "false"):
        return key.strip(), value.lower() == "true"
    for kind in (int, float):
        try:
            return key.strip(), kind(value)
        except ValueError:
            pass
    return key.strip(), value


def positive(text: str) -> int:
    try:
        n = int(text)
    except ValueError:
        n = 0
    if n < 1:
        raise argparse.ArgumentTypeError(f"{text!r}: expected a positive integer")
    return n


def compare_options(args, options: dict) -> None:
    """The chunk compiled alternately with XLA's defaults and with `options`: compile seconds, the
    seconds of one call, ratios, and whether the two give bitwise equal outputs."""
    cfg = chunk_config(args.task, args.contact_model, args.chunk_updates, args.num_envs)
    programs, hyper = build_programs(cfg), hyper_of(cfg)
    state = jax.block_until_ready(jax.jit(programs.init)(jnp.int32(0), hyper))
    budget = jnp.int32(cfg.chunk_updates)
    t0 = time.perf_counter()
    lowered = jax.jit(programs.chunk).lower(state, hyper, budget)
    lower_s = time.perf_counter() - t0
    named = {"defaults": {}, "options": options}
    compile_s = {name: [] for name in named}
    compiled = {}
    for _ in range(args.repeats):  # alternately, so both see the same load
        for name, opts in named.items():
            t0 = time.perf_counter()
            compiled[name] = lowered.compile(compiler_options=opts) if opts else lowered.compile()
            compile_s[name].append(time.perf_counter() - t0)
    run_s, outputs = {}, {}
    for name in named:
        outputs[name] = jax.block_until_ready(compiled[name](state, hyper, budget))  # untimed first call
        times = []
        for _ in range(args.repeats):
            t0 = time.perf_counter()
            jax.block_until_ready(compiled[name](state, hyper, budget))
            times.append(time.perf_counter() - t0)
        run_s[name] = statistics.median(times)
    text = " ".join(f"{k}={v}" for k, v in options.items())
    print(f"chunk options: {text} (chunk_updates={cfg.chunk_updates}, num_envs={cfg.num_envs}, "
          f"repeats={args.repeats}, single_thread={args.single_thread}); trace+lower {lower_s:.2f} s")
    for name in named:
        print(f"{name:8s} compile {statistics.median(compile_s[name]):7.2f} s   run {run_s[name]:8.3f} s per chunk",
              flush=True)
    print(f"options/defaults: compile {statistics.median(compile_s['options']) / statistics.median(compile_s['defaults']):.2f}"
          f"   run {run_s['options'] / run_s['defaults']:.2f}")
    a, b = (jax.tree_util.tree_leaves(outputs[name]) for name in named)
    differ = sum(not np.array_equal(np.asarray(x), np.asarray(y)) for x, y in zip(a, b))
    print("results: bitwise equal" if differ == 0 and len(a) == len(b)
          else f"results: differ ({differ} of {len(a)} arrays)")


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--task", default="goal", choices=envs.TASKS)
    parser.add_argument("--contact-model", default="mjx", choices=("mjx", "simple"))
    parser.add_argument("--xla-option", action="append", type=option, default=[], metavar="KEY=VALUE",
                        help="an XLA compiler option to measure against XLA's defaults on the chunk (repeatable)")
    parser.add_argument("--repeats", type=positive, default=1, help="compiles and timed calls of each (median)")
    parser.add_argument("--chunk-updates", type=positive, default=None, help="default: the cpu preset's")
    parser.add_argument("--num-envs", type=positive, default=None, help="default: the cpu preset's")
    parser.add_argument("--single-thread", action="store_true",
                        help="XLA on one thread, as sweep jobs run (set before jax is imported)")
    args = parser.parse_args(argv)
    if args.single_thread and "--single-thread" not in sys.argv:  # main(argv) after jax was imported
        print("compile_time: --single-thread takes effect only on the command line (XLA_FLAGS are read "
              "when jax is imported)", file=sys.stderr)
    print(f"task={args.task} contact_model={args.contact_model} jax={jax.__version__} {jax.devices()[0].platform}")
    if args.xla_option:
        compare_options(args, dict(args.xla_option))
        return 0
    for name, make in (("rollout", rollout_program), ("chunk", chunk_program)):
        jitted, example = (make(args.task, args.contact_model) if name == "rollout" else
                           make(args.task, args.contact_model, args.chunk_updates, args.num_envs))
        lower_s, compile_s = timed(jitted, *example)
        print(f"{name:8s} trace+lower {lower_s:7.2f} s   compile {compile_s:7.2f} s", flush=True)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
