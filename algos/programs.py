"""Compiled training programs: one static config's init / chunk / evaluate, for one run or a pack.

A pack is P runs of one static config (same task, algorithm, shapes, schedule) that differ
only in runtime values (seed, bound, hyperparameters, budget). Its programs are the single-run
programs under `jax.vmap`, compiled once: every member keeps its own seed stream, so a run's
episodes do not depend on the pack it trains in (tests/test_algos_pack.py). Programs are
memoised per process and, through the persistent compilation cache, across processes.
"""
from __future__ import annotations

import os
import time
from typing import NamedTuple

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
    """Programs of one run or of a pack of runs (a leading pack axis on every input)."""

    init: object  # (seed, hyper) -> TrainState
    chunk: object  # (TrainState, hyper, num_updates) -> (TrainState, IterateLog, UpdateSummary)
    evaluate: object  # (params, normalizer, seed, noise_scale, hyper) -> (Pending, first obs)
    template: object  # ShapeDtypeStruct pytree of ONE run's training state (checkpoints are per run)
    compile_s: float  # 0.0 when the programs were already in this process


# The one in-process memo of compiled programs, keyed by (static config, env, pack size): a hit
# costs nothing, while the persistent JAX cache (enable_compilation_cache) still traces and
# lowers the programs and loads them from disk, seconds per program. The Python objects below
# it (the programs' functions, the algorithms' hooks) are cheap to rebuild and carry no cache.
_COMPILED: dict = {}


# A pack runs its members one after another inside one program (lax.map), not under vmap:
# vmap turns every lax.cond of the tasks (the contact solve only when in contact, respawns
# only where needed) into a select that computes both branches, which made a vmapped block of
# 2 goal runs 18x slower per env step on the CPU (benchmarks/pack_throughput.py). lax.map
# keeps each member's computation the single-run one, so its episodes are bitwise the same
# alone and in any pack. PACK_WIDTH > 1 vmaps blocks of that many members instead (reductions
# then round differently from 4 members on: keep it at 2 or 3 for pack-invariant results).
PACK_WIDTH = 1


def _blocked(fn, width: int):
    """fn over the leading (pack) axis: vmapped in blocks of `width`, the blocks in sequence
    (lax.map); width 1 maps the plain single-run function. `scalar`, when given, is passed
    unbatched as fn's last argument."""
    import jax

    def run(*args, scalar=None):
        one = fn if scalar is None else (lambda *a: fn(*a, scalar))
        if width == 1:
            return jax.lax.map(lambda member: one(*member), args)
        P = jax.tree_util.tree_leaves(args)[0].shape[0]
        blocks = jax.tree_util.tree_map(lambda x: x.reshape(P // width, width, *x.shape[1:]), args)
        out = jax.lax.map(lambda block: jax.vmap(one)(*block), blocks)
        return jax.tree_util.tree_map(lambda x: x.reshape(P, *x.shape[2:]), out)

    return run


def pack_slots(members: int, width: int = PACK_WIDTH) -> int:
    """Program size for a pack of `members`: rounded up to whole blocks (padding is unused)."""
    return -(-members // width) * width


def compile_programs(config, env=None, size: int | None = None) -> Compiled:
    """AOT-compile the programs of `config`'s static part, for one run or a pack of `size`
    (a multiple of PACK_WIDTH, see pack_slots)."""
    import jax
    import jax.numpy as jnp

    from algos.config import hyper_of, stacked_hyper
    from algos.core import build_programs, make_env

    env = env if env is not None else make_env(config)
    cache_key = (config.static_key(), env, size)
    if cache_key in _COMPILED:
        return _COMPILED[cache_key]._replace(compile_s=0.0)
    programs = build_programs(config, env)
    start = time.perf_counter()
    template = jax.eval_shape(programs.init, jnp.int32(0), hyper_of(config))
    if size is None:
        seed, h, budget = jnp.int32(0), hyper_of(config), jnp.int32(0)
        init, chunk, evaluate = programs.init, programs.chunk, programs.evaluate
    else:
        seed, h, budget = jnp.zeros(size, jnp.int32), stacked_hyper([config] * size), jnp.zeros(size, jnp.int32)
        if size % PACK_WIDTH:
            raise ValueError(f"pack size {size} is not a multiple of {PACK_WIDTH}; use pack_slots()")
        init, chunk = _blocked(programs.init, PACK_WIDTH), _blocked(programs.chunk, PACK_WIDTH)
        blocked_eval = _blocked(lambda p, n, s, hyper, noise: programs.evaluate(p, n, s, noise, hyper), PACK_WIDTH)

        def evaluate(params, normalizer, seed, noise_scale, hyper):
            return blocked_eval(params, normalizer, seed, hyper, scalar=noise_scale)
    state = jax.eval_shape(init, seed, h)
    compiled = Compiled(
        jax.jit(init).lower(seed, h).compile(),
        jax.jit(chunk).lower(state, h, budget).compile(),
        jax.jit(evaluate).lower(state.params, state.normalizer, seed, jnp.float32(0.0), h).compile(),
        template, time.perf_counter() - start)
    _COMPILED[cache_key] = compiled
    return compiled
