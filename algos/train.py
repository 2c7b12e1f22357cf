"""Entry point: `python -m algos.train --task goal --bound 25 --algo ppo_lag --seed 0 --out DIR`.

Trains in jitted chunks of updates, checkpoints between chunks (every `checkpoint_every_s`
seconds of wall time, and on SIGTERM / SIGUSR2, after which it exits with status 75), resumes
from DIR/checkpoint/ when restarted with the same arguments, then evaluates the final policy
on fresh layouts with exploration noise and greedily, and writes the run folder.
Progress goes to stderr. See docs/algos.md.
"""
from __future__ import annotations

import argparse
import math
import os
import platform
import shutil
import signal
import sys
import time
from typing import NamedTuple

from algos.config import ALGOS, PRESETS  # no JAX: XLA_FLAGS can still be set in main
from algos.registry import get as get_algorithm

EXIT_TEMPFAIL = 75  # EX_TEMPFAIL: interrupted, checkpoint written, restart to continue
DEFAULT_CACHE_DIR = os.path.join(os.path.expanduser("~"), ".cache", "saferl-eval", "jax")


def enable_compilation_cache(cache_dir: str | None = None) -> str:
    """Turn the JAX persistent compilation cache on for every program, however small."""
    import jax

    cache_dir = cache_dir or os.environ.get("JAX_COMPILATION_CACHE_DIR") or DEFAULT_CACHE_DIR
    os.makedirs(cache_dir, exist_ok=True)
    jax.config.update("jax_compilation_cache_dir", cache_dir)
    jax.config.update("jax_persistent_cache_min_compile_time_secs", 0.0)
    jax.config.update("jax_persistent_cache_min_entry_size_bytes", 0)
    return cache_dir


class Compiled(NamedTuple):
    init: object
    chunk: object
    evaluate: object
    template: object  # ShapeDtypeStruct pytree of the training state
    compile_s: float


_COMPILED: dict = {}


def compile_programs(config, env=None) -> Compiled:
    """AOT-compile init / chunk / evaluate for the config's static part (memoised per process)."""
    import jax
    import jax.numpy as jnp

    from algos.config import hyper_of
    from algos.core import build_programs, make_env

    env = env if env is not None else make_env(config)
    cache_key = (config.static_key(), env)
    if cache_key in _COMPILED:
        return _COMPILED[cache_key]._replace(compile_s=0.0)
    programs = build_programs(config, env)
    h, seed = hyper_of(config), jnp.int32(config.seed)
    start = time.perf_counter()
    template = jax.eval_shape(programs.init, seed, h)
    init = jax.jit(programs.init).lower(seed, h).compile()
    chunk = jax.jit(programs.chunk).lower(template, h, jnp.int32(0)).compile()
    evaluate = jax.jit(programs.evaluate).lower(template.params, template.normalizer, seed,
                                                jnp.float32(0.0)).compile()
    compiled = Compiled(init, chunk, evaluate, template, time.perf_counter() - start)
    _COMPILED[cache_key] = compiled
    return compiled


class _StopFlag:
    """Set by SIGTERM / SIGUSR2; checked between chunks."""

    def __init__(self):
        self.signal = None

    def __call__(self, signum, frame):
        self.signal = signum


def _progress(name: str, it: int, steps: int, total: int, rate: float, eta: float, ret, cost, multiplier) -> None:
    eta_text = time.strftime("%H:%M:%S", time.gmtime(eta)) if math.isfinite(eta) else "?"
    print(f"[{name}] iterate {it} | {steps:,}/{total:,} steps | {rate:,.0f} steps/s | ETA {eta_text} | "
          f"return {ret:.3f} cost {cost:.3f} | multiplier {multiplier:.4g}", file=sys.stderr, flush=True)


HOST_FIELDS = ("update", "step", "ret", "cost", "length", "multiplier", "metrics", "wall_time")


def run(config, out_dir: str, *, env=None, stop_after_chunks: int | None = None, preset: str = "",
        quiet: bool = False) -> int:
    """Train (or resume) one run into `out_dir`; returns the process exit status (0 or 75)."""
    run_json = os.path.join(out_dir, "run.json")
    if os.path.exists(run_json):
        if not quiet:
            print(f"[algos.train] {run_json} exists: run already complete", file=sys.stderr)
        return 0
    wall_start = time.perf_counter()
    name = f"{config.task}/d{config.bound:g}/{config.algo}/seed{config.seed}"
    ckpt_dir = os.path.join(out_dir, "checkpoint")
    stop = _StopFlag()  # installed before compiling: a signal then ends the run with 75, not a kill
    previous = {s: signal.signal(s, stop) for s in (signal.SIGTERM, signal.SIGUSR2)}
    try:
        return _run(config, out_dir, env, stop_after_chunks, preset, quiet, stop, wall_start, name, ckpt_dir)
    finally:
        for s, handler in previous.items():
            signal.signal(s, handler)


def _run(config, out_dir, env, stop_after_chunks, preset, quiet, stop, wall_start, name, ckpt_dir) -> int:
    import jax
    import jax.numpy as jnp
    import numpy as np

    from algos import checkpoint, runfolder
    from algos.config import hyper_of
    from algos.core import METRIC_NAMES

    run_json = os.path.join(out_dir, "run.json")
    compiled = compile_programs(config, env)
    if stop.signal is not None:
        if not quiet:
            print(f"[{name}] signal {stop.signal} while compiling: exiting {EXIT_TEMPFAIL}", file=sys.stderr)
        return EXIT_TEMPFAIL
    h = hyper_of(config)
    N, S = config.num_envs, config.unrolls_per_update * config.unroll_length
    U, C = config.num_updates, config.iterate_capacity
    num_updates = jnp.int32(U)
    identity = {k: v for k, v in config.to_dict().items() if k not in ("checkpoint_every_s",)}

    host = {k: [] for k in HOST_FIELDS}
    train_s, restarts = 0.0, 0
    meta = checkpoint.load_meta(ckpt_dir)
    if meta is not None:
        if meta["config"] != identity:
            diff = sorted(k for k in identity if meta["config"].get(k) != identity[k])
            raise ValueError(f"{ckpt_dir}: checkpoint was written with a different config (fields {diff}); "
                             f"use the same arguments or delete the folder")
        state, arrays, meta = checkpoint.load(ckpt_dir, compiled.template)
        state = jax.device_put(state)
        host = {k: [arrays[k]] for k in HOST_FIELDS}
        train_s, restarts = float(meta["train_s"]), int(meta["restarts"]) + 1
        if not quiet:
            print(f"[{name}] resumed from {ckpt_dir} at update {int(state.update)}/{U}", file=sys.stderr)
    else:
        state = compiled.init(jnp.int32(config.seed), h)

    def host_arrays():
        empty = {"update": (0,), "step": (0,), "ret": (0, N), "cost": (0, N), "length": (0, N),
                 "multiplier": (0,), "metrics": (0, len(METRIC_NAMES)), "wall_time": (0,)}
        dtypes = {"update": np.int32, "step": np.int32, "length": np.int32, "wall_time": np.float64}
        return {k: np.concatenate(v) if v else np.zeros(empty[k], dtypes.get(k, np.float32))
                for k, v in host.items()}

    def save_checkpoint():
        arrays = host_arrays()
        for k in HOST_FIELDS:
            host[k] = [arrays[k]]
        checkpoint.save(ckpt_dir, state, arrays, {"config": identity, "train_s": train_s, "restarts": restarts})

    last_save, chunks_here = time.monotonic(), 0
    rate_steps, rate_s = 0, 0.0
    last_ret = last_cost = float("nan")
    while int(state.update) < U:
        update_before = int(state.update)
        start = time.perf_counter()
        state, log, summary = compiled.chunk(state, h, num_updates)
        count = int(log.count)  # waits for the chunk
        seconds = time.perf_counter() - start
        if count > C:
            raise RuntimeError(f"{name}: {count} iterates completed in one chunk but the log holds {C}; "
                               f"episodes end early in this task: raise --set log_capacity=")
        updates_done = int(state.update) - update_before
        if not (np.all(np.isfinite(np.asarray(summary.multiplier)))
                and np.all(np.isfinite(np.asarray(summary.mean_step_cost)))):
            bad = update_before + int(np.argmin(np.isfinite(np.asarray(summary.multiplier))
                                                & np.isfinite(np.asarray(summary.mean_step_cost))))
            raise FloatingPointError(f"{name}: training diverged (NaN/inf multiplier or cost) at update {bad}; "
                                     f"no outputs written")
        steps_in_chunk = max(updates_done, 1) * S
        rows = np.asarray(log.update[:count]) - update_before
        frac = (rows * S + np.asarray(log.step[:count]) + 1) / steps_in_chunk
        for k, v in (("update", log.update), ("step", log.step), ("ret", log.ret), ("cost", log.cost),
                     ("length", log.length), ("multiplier", log.multiplier), ("metrics", log.metrics)):
            host[k].append(np.asarray(v[:count]))
        host["wall_time"].append(train_s + frac * seconds)
        train_s += seconds
        chunks_here += 1
        if chunks_here > 1 or restarts == 0:  # a first chunk after a restart may include warm-up
            rate_steps, rate_s = rate_steps + updates_done * config.steps_per_update, rate_s + seconds
        if count:
            last_ret, last_cost = float(np.mean(log.ret[count - 1])), float(np.mean(log.cost[count - 1]))
        if not quiet:
            rate = rate_steps / rate_s if rate_s > 0 else float("nan")
            steps, total = int(state.update) * config.steps_per_update, U * config.steps_per_update
            eta = (total - steps) / rate if rate > 0 else float("nan")
            _progress(name, int(state.iterates), steps, total, rate, eta, last_ret, last_cost,
                      float(state.algo.multiplier))
        interrupted = stop.signal is not None or (stop_after_chunks is not None and chunks_here >= stop_after_chunks)
        if int(state.update) < U and (interrupted or time.monotonic() - last_save >= config.checkpoint_every_s):
            save_checkpoint()
            last_save = time.monotonic()
        if interrupted and int(state.update) < U:
            why = f"signal {stop.signal}" if stop.signal is not None else f"stop after {chunks_here} chunks"
            if not quiet:
                print(f"[{name}] {why}: checkpoint written to {ckpt_dir}, exiting {EXIT_TEMPFAIL}",
                      file=sys.stderr, flush=True)
            return EXIT_TEMPFAIL

    # ---- final evaluation and outputs ------------------------------------------------
    eval_start = time.perf_counter()
    seed = jnp.int32(config.seed)
    explore, _ = compiled.evaluate(state.params, state.normalizer, seed, jnp.float32(1.0))
    greedy, _ = compiled.evaluate(state.params, state.normalizer, seed, jnp.float32(0.0))
    for phase, result in (("final_explore", explore), ("final_greedy", greedy)):
        if not bool(jnp.all(result.finished)):
            raise RuntimeError(f"{name}: {phase}: some evaluation episodes did not end within T steps")
    eval_s = time.perf_counter() - eval_start

    arrays = host_arrays()
    J = len(arrays["update"])
    iterations = np.arange(J)
    final_iteration = max(J - 1, 0)
    meta_run = (config.task, config.bound, config.algo, config.seed)
    blocks = [runfolder.episode_rows(*meta_run, "train", iterations, arrays["ret"], arrays["cost"], arrays["length"])]
    for phase, result in (("final_explore", explore), ("final_greedy", greedy)):
        blocks.append(runfolder.episode_rows(*meta_run, phase, [final_iteration], np.asarray(result.ret)[None],
                                             np.asarray(result.cost)[None], np.asarray(result.length)[None]))
    trace = {
        "iteration": iterations, "update": arrays["update"].astype(np.int64),
        "env_steps": (arrays["update"].astype(np.int64) * S + arrays["step"] + 1) * N,
        "wall_time": arrays["wall_time"],
        "multiplier": (arrays["multiplier"].astype(np.float64) if get_algorithm(config.algo).has_multiplier
                       else np.full(J, np.nan)),
        **{m: arrays["metrics"][:, i].astype(np.float64) for i, m in enumerate(METRIC_NAMES)},
        "mean_return": arrays["ret"].mean(axis=1).astype(np.float64) if J else np.zeros(0),
        "mean_cost": arrays["cost"].mean(axis=1).astype(np.float64) if J else np.zeros(0),
    }
    runfolder.write_parquet(os.path.join(out_dir, "episodes.parquet"), runfolder.episodes_table(blocks))
    runfolder.write_parquet(os.path.join(out_dir, "trace.parquet"), runfolder.trace_table(trace))
    env_steps = U * config.steps_per_update
    device = jax.devices()[0]
    summary_json = {
        "config": config.to_dict(), "preset": preset, "complete": True,
        "env_steps": env_steps, "iterates": J, "updates": U,
        "train_wall_s": train_s, "eval_wall_s": eval_s, "compile_s": compiled.compile_s,
        "process_wall_s": time.perf_counter() - wall_start, "restarts": restarts,
        "steps_per_s": env_steps / train_s if train_s > 0 else None,
        "final": {phase: {"mean_return": float(np.mean(r.ret)), "mean_cost": float(np.mean(r.cost))}
                  for phase, r in (("final_explore", explore), ("final_greedy", greedy))},
        "device": {"platform": device.platform, "kind": device.device_kind, "count": jax.device_count(),
                   "host": platform.node(), "cpus": os.cpu_count()},
        "versions": _versions(),
    }
    runfolder.write_json(run_json, summary_json)
    shutil.rmtree(ckpt_dir, ignore_errors=True)
    if not quiet:
        print(f"[{name}] done: {J} iterates, {env_steps:,} steps in {train_s:.1f} s train "
              f"(+{compiled.compile_s:.1f} s compile, {eval_s:.1f} s eval) -> {out_dir}", file=sys.stderr)
    return 0


def _versions() -> dict:
    from importlib import metadata

    out = {"python": platform.python_version()}
    for package in ("jax", "jaxlib", "optax", "numpy", "saferl-eval"):
        try:
            out[package] = metadata.version(package)
        except metadata.PackageNotFoundError:
            out[package] = None
    return out


def parse_args(argv=None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(prog="python -m algos.train", description=__doc__.split("\n")[0])
    parser.add_argument("--task", required=True)
    parser.add_argument("--bound", type=float, required=True, help="safety bound d on the episode cost")
    parser.add_argument("--algo", required=True, choices=ALGOS)
    parser.add_argument("--seed", type=int, required=True)
    parser.add_argument("--out", required=True, help="run folder")
    parser.add_argument("--preset", default="cpu", choices=tuple(PRESETS))
    parser.add_argument("--backend", default="builtin", choices=("builtin", "crax"))
    parser.add_argument("--total-steps", type=float, help="env steps over all envs (e.g. 5e8)")
    parser.add_argument("--num-envs", type=int)
    parser.add_argument("--episode-length", type=int, help="T")
    parser.add_argument("--eval-episodes", type=int)
    parser.add_argument("--set", action="append", default=[], metavar="KEY=VALUE",
                        help="override any config field (see docs/algos.md); env.NAME=VALUE sets a task option")
    parser.add_argument("--stop-after-chunks", type=int, default=None,
                        help="checkpoint and exit 75 after this many chunks (to rehearse a preemption)")
    parser.add_argument("--threads", type=int, default=None,
                        help="1: XLA runs single-threaded (for one job per core in a sweep); default: all cores")
    parser.add_argument("--cache-dir", default=None, help="persistent compilation cache "
                        "(default $JAX_COMPILATION_CACHE_DIR or ~/.cache/saferl-eval/jax)")
    return parser.parse_args(argv)


def config_from_args(args: argparse.Namespace):
    from algos.config import make_config

    overrides = dict(task=args.task, bound=args.bound, algo=args.algo, seed=args.seed, backend=args.backend,
                     total_steps=None if args.total_steps is None else int(args.total_steps),
                     num_envs=args.num_envs, episode_length=args.episode_length, eval_episodes=args.eval_episodes)
    return make_config(args.preset, overrides, args.set)


SINGLE_THREAD_XLA_FLAGS = "--xla_cpu_multi_thread_eigen=false intra_op_parallelism_threads=1"


def main(argv=None) -> int:
    args = parse_args(argv)
    if args.threads == 1:  # must happen before JAX starts its CPU backend
        os.environ["XLA_FLAGS"] = (os.environ.get("XLA_FLAGS", "") + " " + SINGLE_THREAD_XLA_FLAGS).strip()
    enable_compilation_cache(args.cache_dir)
    try:
        config = config_from_args(args)
    except ValueError as err:
        print(f"algos.train: {err}", file=sys.stderr)
        return 2
    return run(config, args.out, stop_after_chunks=args.stop_after_chunks, preset=args.preset)


if __name__ == "__main__":
    sys.exit(main())
