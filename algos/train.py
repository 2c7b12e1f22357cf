"""Entry point: `python -m algos.train --task goal --bound 25 --algo ppo_lag --seed 0 --out DIR`.

Trains in jitted chunks of updates, checkpoints between chunks (every `checkpoint_every_s`
seconds of wall time, and on SIGTERM / SIGUSR2 or before `--stop-at`, after which it exits
with status 75), resumes from DIR/checkpoint/ when restarted with the same arguments (from the
previous checkpoint generation when the newest is corrupt), then evaluates the final policy
on fresh layouts with exploration noise and greedily, and writes the run folder
(algos.runfolder: the tables, then run.json). A folder that is already complete is left
alone; a half-written one is trained again. An error that a retry would meet again is
recorded in DIR/failure.json for workflow.train_job.
Progress goes to stderr. See docs/algos.md.
"""
from __future__ import annotations

import argparse
import contextlib
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

COMPILE_LOCK_ENV = "SAFERL_COMPILE_LOCK_DIR"  # set by workflow.train_job on one machine
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


@contextlib.contextmanager
def compile_lock(config):
    """While this run compiles its programs, hold an exclusive lock named after their static
    config in $SAFERL_COMPILE_LOCK_DIR (when set): a run of the same program started meanwhile
    waits here, then loads the programs from the persistent cache instead of compiling them a
    second time. Held for the compilation only, not the training."""
    folder = os.environ.get(COMPILE_LOCK_ENV)
    if not folder:
        yield
        return
    import fcntl
    import hashlib

    os.makedirs(folder, exist_ok=True)
    key = hashlib.sha256(repr(config.static_key()).encode()).hexdigest()[:16]
    fd = os.open(os.path.join(folder, f"{config.task}-{config.algo}-{key}.lock"), os.O_RDWR | os.O_CREAT, 0o644)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX)
        yield
    finally:
        os.close(fd)


class _StopFlag:
    """Set by SIGTERM / SIGUSR2; checked between chunks."""

    def __init__(self):
        self.signal = None

    def __call__(self, signum, frame):
        self.signal = signum


def _progress(name: str, it: int, steps: int, total: int, rate: float, eta: float, ret, cost, multiplier,
              say) -> None:
    eta_text = time.strftime("%H:%M:%S", time.gmtime(eta)) if math.isfinite(eta) else "?"
    say(f"[{name}] iterate {it} | {steps:,}/{total:,} steps | {rate:,.0f} steps/s | ETA {eta_text} | "
        f"return {ret:.3f} cost {cost:.3f} | multiplier {multiplier:.4g}")


HOST_FIELDS = ("update", "step", "ret", "cost", "length", "multiplier", "metrics", "wall_time")


class _HostLog:
    """Per-iterate results copied off the device after each chunk (episode returns, costs,
    lengths, the multiplier, the update metrics, wall time), kept as lists of arrays."""

    def __init__(self, num_envs: int, num_metrics: int, arrays: dict | None = None):
        import numpy as np

        self.empty = {"update": (0,), "step": (0,), "ret": (0, num_envs), "cost": (0, num_envs),
                      "length": (0, num_envs), "multiplier": (0,), "metrics": (0, num_metrics), "wall_time": (0,)}
        self.dtypes = {"update": np.int32, "step": np.int32, "length": np.int32, "wall_time": np.float64}
        self.parts = {k: ([arrays[k]] if arrays is not None else []) for k in HOST_FIELDS}

    def append(self, log, count: int, wall_time) -> None:
        import numpy as np

        for k in HOST_FIELDS[:-1]:
            self.parts[k].append(np.asarray(getattr(log, k)[:count]))
        self.parts["wall_time"].append(wall_time)

    def arrays(self) -> dict:
        """The log so far as one array per field (and compacted to that)."""
        import numpy as np

        out = {k: np.concatenate(v) if v else np.zeros(self.empty[k], self.dtypes.get(k, np.float32))
               for k, v in self.parts.items()}
        self.parts = {k: [out[k]] for k in HOST_FIELDS}
        return out


class _Progress(NamedTuple):
    state: object
    host: _HostLog
    train_s: float
    restarts: int
    keep: str | None  # checkpoint array file to preserve on the next save


def run(config, out_dir: str, *, env=None, stop_after_chunks: int | None = None, preset: str = "",
        quiet: bool = False, stop_at: float | None = None) -> int:
    """Train (or resume) one run into `out_dir`; returns the process exit status (0 or 75).

    `stop_at` (a time.time() value): checkpoint and exit 75 as soon as another chunk might
    not finish before it (the job's time limit minus a margin, see workflow.train_job).
    """
    from algos import runfolder

    say = (lambda text: None) if quiet else (lambda text: print(text, file=sys.stderr, flush=True))
    reason = runfolder.incomplete_reason(out_dir)
    if reason is None:
        say(f"[algos.train] {out_dir}: run already complete")
        return 0
    stale = os.path.join(out_dir, runfolder.RUN_JSON)
    if os.path.exists(stale):  # a half-written folder must not look complete while it is retrained
        say(f"[algos.train] {out_dir}: incomplete ({reason}); training it again")
        os.remove(stale)
    stop = _StopFlag()  # installed before compiling: a signal then ends the run with 75, not a kill
    previous = {s: signal.signal(s, stop) for s in (signal.SIGTERM, signal.SIGUSR2)}
    try:
        return _train(config, out_dir, env=env, stop=stop, stop_after_chunks=stop_after_chunks,
                      stop_at=stop_at, preset=preset, say=say)
    finally:
        for s, handler in previous.items():
            signal.signal(s, handler)


def _run_name(config) -> str:
    from algos.runfolder import run_id

    return run_id(config.task, config.bound, config.algo, config.seed)


def _train(config, out_dir, *, env, stop, stop_after_chunks, stop_at, preset, say) -> int:
    """Compile, start or resume, train chunk by chunk, evaluate, write the run folder."""
    from algos.runfolder import CHECKPOINT_DIR

    wall_start = time.perf_counter()
    name = _run_name(config)
    ckpt_dir = os.path.join(out_dir, CHECKPOINT_DIR)
    with compile_lock(config):
        compiled = compile_programs(config, env)
    if stop.signal is not None:
        say(f"[{name}] signal {stop.signal} while compiling: exiting {EXIT_TEMPFAIL}")
        return EXIT_TEMPFAIL
    progress = _start_or_resume(config, compiled, ckpt_dir, name, say)
    progress, why = _train_chunks(config, compiled, progress, ckpt_dir, name, say, stop, stop_after_chunks, stop_at)
    if why is not None:
        say(f"[{name}] {why}: checkpoint written to {ckpt_dir}, exiting {EXIT_TEMPFAIL}")
        return EXIT_TEMPFAIL
    eval_start = time.perf_counter()
    explore, greedy = _evaluate_final(config, compiled, progress.state, name)
    timing = {"train_wall_s": progress.train_s, "eval_wall_s": time.perf_counter() - eval_start,
              "compile_s": compiled.compile_s}
    _write_run_folder(config, out_dir, progress, explore, greedy, preset, timing, wall_start)
    shutil.rmtree(ckpt_dir, ignore_errors=True)
    J, steps = len(progress.host.arrays()["update"]), config.num_updates * config.steps_per_update
    say(f"[{name}] done: {J} iterates, {steps:,} steps in {progress.train_s:.1f} s train "
        f"(+{compiled.compile_s:.1f} s compile, {timing['eval_wall_s']:.1f} s eval) -> {out_dir}")
    return 0


def _start_or_resume(config, compiled, ckpt_dir, name, say) -> _Progress:
    """The initial state, or the newest usable checkpoint's (falling back a generation if needed)."""
    import jax
    import jax.numpy as jnp

    from algos import checkpoint
    from algos.config import hyper_of
    from algos.core import METRIC_NAMES

    if not checkpoint.exists(ckpt_dir):
        state = compiled.init(jnp.int32(config.seed), hyper_of(config))
        return _Progress(state, _HostLog(config.num_envs, len(METRIC_NAMES)), 0.0, 0, None)
    state, arrays, meta = checkpoint.load(ckpt_dir, compiled.template, checkpoint.identity_of(config),
                                          warn=lambda text: say(f"[{name}] warning: {text}"))
    say(f"[{name}] resumed from {ckpt_dir} at update {int(state.update)}/{config.num_updates} "
        f"(checkpoint generation {meta['generation']})")
    host = _HostLog(config.num_envs, len(METRIC_NAMES), {k: arrays[k] for k in HOST_FIELDS})
    return _Progress(jax.device_put(state), host, float(meta["train_s"]), int(meta["restarts"]) + 1, meta["arrays"])


def _check_finite(summary, update_before: int, name: str) -> None:
    import numpy as np

    ok = np.isfinite(np.asarray(summary.multiplier)) & np.isfinite(np.asarray(summary.mean_step_cost))
    if not np.all(ok):
        raise FloatingPointError(f"{name}: training diverged (NaN/inf multiplier or cost) at update "
                                 f"{update_before + int(np.argmin(ok))}; no outputs written")


def _train_chunks(config, compiled, progress: _Progress, ckpt_dir, name, say, stop, stop_after_chunks, stop_at):
    """Run chunks until the budget is spent or a stop is asked for.

    Returns (progress, None) when done, or (progress, why) after writing a checkpoint because
    of a signal, `stop_after_chunks` or the `stop_at` deadline.
    """
    import jax.numpy as jnp
    import numpy as np

    from algos import checkpoint
    from algos.config import hyper_of

    h, num_updates = hyper_of(config), jnp.int32(config.num_updates)
    U, S, C = config.num_updates, config.unrolls_per_update * config.unroll_length, config.iterate_capacity
    state, host, train_s, restarts, keep = progress
    identity = checkpoint.identity_of(config)
    last_save, chunks_here, longest_chunk = time.monotonic(), 0, 0.0
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
        _check_finite(summary, update_before, name)
        updates_done = int(state.update) - update_before
        rows = np.asarray(log.update[:count]) - update_before
        frac = (rows * S + np.asarray(log.step[:count]) + 1) / (max(updates_done, 1) * S)
        host.append(log, count, train_s + frac * seconds)
        train_s += seconds
        chunks_here += 1
        longest_chunk = max(longest_chunk, seconds)
        if chunks_here > 1 or restarts == 0:  # a first chunk after a restart may include warm-up
            rate_steps, rate_s = rate_steps + updates_done * config.steps_per_update, rate_s + seconds
        if count:
            last_ret, last_cost = float(np.mean(log.ret[count - 1])), float(np.mean(log.cost[count - 1]))
        rate = rate_steps / rate_s if rate_s > 0 else float("nan")
        steps, total = int(state.update) * config.steps_per_update, U * config.steps_per_update
        _progress(name, int(state.iterates), steps, total, rate,
                  (total - steps) / rate if rate > 0 else float("nan"), last_ret, last_cost,
                  float(state.algo.multiplier), say)
        why = None
        if stop.signal is not None:
            why = f"signal {stop.signal}"
        elif stop_after_chunks is not None and chunks_here >= stop_after_chunks:
            why = f"stop after {chunks_here} chunks"
        elif stop_at is not None and time.time() + 2 * longest_chunk >= stop_at:
            why = f"{stop_at - time.time():.0f} s left before the stop time, less than two chunks"
        if int(state.update) < U and (why or time.monotonic() - last_save >= config.checkpoint_every_s):
            meta = {"config": identity, "train_s": train_s, "restarts": restarts}
            keep = checkpoint.save(ckpt_dir, state, host.arrays(), meta, keep=keep)["arrays"]
            last_save = time.monotonic()
            if why:
                return _Progress(state, host, train_s, restarts, keep), why
    return _Progress(state, host, train_s, restarts, keep), None


def _evaluate_final(config, compiled, state, name):
    """The final policy on fresh layouts, with exploration noise and greedily."""
    import jax.numpy as jnp

    seed = jnp.int32(config.seed)
    explore, _ = compiled.evaluate(state.params, state.normalizer, seed, jnp.float32(1.0))
    greedy, _ = compiled.evaluate(state.params, state.normalizer, seed, jnp.float32(0.0))
    for phase, result in (("final_explore", explore), ("final_greedy", greedy)):
        if not bool(jnp.all(result.finished)):
            raise RuntimeError(f"{name}: {phase}: some evaluation episodes did not end within T steps")
    return explore, greedy


def _write_run_folder(config, out_dir, progress: _Progress, explore, greedy, preset, timing, wall_start) -> None:
    """episodes.parquet and trace.parquet, then run.json (which records their row counts)."""
    import jax
    import numpy as np

    from algos import runfolder
    from algos.core import METRIC_NAMES

    arrays = progress.host.arrays()
    N, S = config.num_envs, config.unrolls_per_update * config.unroll_length
    J = len(arrays["update"])
    iterations = np.arange(J)
    meta_run = (config.task, config.bound, config.algo, config.seed)
    blocks = [runfolder.episode_rows(*meta_run, "train", iterations, arrays["ret"], arrays["cost"], arrays["length"])]
    for phase, result in (("final_explore", explore), ("final_greedy", greedy)):
        blocks.append(runfolder.episode_rows(*meta_run, phase, [max(J - 1, 0)], np.asarray(result.ret)[None],
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
    episodes, trace = runfolder.episodes_table(blocks), runfolder.trace_table(trace)
    runfolder.write_parquet(os.path.join(out_dir, runfolder.EPISODES), episodes)
    runfolder.write_parquet(os.path.join(out_dir, runfolder.TRACE), trace)
    env_steps = config.num_updates * config.steps_per_update
    device = jax.devices()[0]
    summary_json = {
        "config": config.to_dict(), "preset": preset, "complete": True,
        "rows": {runfolder.EPISODES: episodes.num_rows, runfolder.TRACE: trace.num_rows},
        "code_version": runfolder.code_version(),
        "env_steps": env_steps, "iterates": J, "updates": config.num_updates, **timing,
        "process_wall_s": time.perf_counter() - wall_start, "restarts": progress.restarts,
        "steps_per_s": env_steps / progress.train_s if progress.train_s > 0 else None,
        "final": {phase: {"mean_return": float(np.mean(r.ret)), "mean_cost": float(np.mean(r.cost))}
                  for phase, r in (("final_explore", explore), ("final_greedy", greedy))},
        "device": {"platform": device.platform, "kind": device.device_kind, "count": jax.device_count(),
                   "host": platform.node(), "cpus": os.cpu_count()},
        "versions": _versions(),
    }
    runfolder.write_json(os.path.join(out_dir, runfolder.RUN_JSON), summary_json)


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
    parser.add_argument("--stop-at", type=float, default=None, metavar="UNIX_TIME",
                        help="checkpoint and exit 75 before this time (a job's time limit minus a margin)")
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


def record_failure(out_dir: str, message: str) -> None:
    """failure.json: the last attempt failed for a reason a retry would meet again (an error,
    not a signal or a time limit); workflow.train_job reads it before a retry."""
    from algos import runfolder

    runfolder.write_json(os.path.join(out_dir, runfolder.FAILURE_RECORD),
                         {"error": message, "time": time.time(), "host": platform.node(), "pid": os.getpid()})


def clear_failure(out_dir: str) -> None:
    from algos.runfolder import FAILURE_RECORD

    path = os.path.join(out_dir, FAILURE_RECORD)
    if os.path.exists(path):
        os.remove(path)


def main(argv=None) -> int:
    from algos.checkpoint import CheckpointError

    args = parse_args(argv)
    if os.path.exists(args.out) and not os.path.isdir(args.out):
        print(f"algos.train: --out {args.out} is a file, not a folder", file=sys.stderr)
        return 2
    if args.threads == 1:  # must happen before JAX starts its CPU backend
        os.environ["XLA_FLAGS"] = (os.environ.get("XLA_FLAGS", "") + " " + SINGLE_THREAD_XLA_FLAGS).strip()
    enable_compilation_cache(args.cache_dir)
    os.makedirs(args.out, exist_ok=True)
    try:
        config = config_from_args(args)
    except ValueError as err:
        print(f"algos.train: {err}", file=sys.stderr)
        record_failure(args.out, f"invalid arguments: {err}")
        return 2
    try:
        status = run(config, args.out, stop_after_chunks=args.stop_after_chunks, preset=args.preset,
                     stop_at=args.stop_at)
    except CheckpointError as err:  # the message says what to do; no traceback needed
        print(f"algos.train: {err}", file=sys.stderr)
        record_failure(args.out, str(err))
        return 1
    except MemoryError:
        raise  # a retry with more memory may pass: not recorded
    except Exception as err:
        record_failure(args.out, f"{type(err).__name__}: {err}")
        raise
    clear_failure(args.out)
    return status


if __name__ == "__main__":
    sys.exit(main())
