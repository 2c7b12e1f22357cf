"""Compiled training programs: one static config's init / chunk / evaluate, for one run or a pack.

A pack is P runs of one static config (same task, algorithm, shapes, schedule) that differ
only in runtime values (seed, bound, hyperparameters, budget), trained by one program in one
of two modes (`TrainConfig.pack_mode`). A sequential program (and a single run's) also takes
the algorithm as a runtime value where it can: the simple-form algorithms (PPO, PPO-Lag, P3O,
FOCOPS and any added in that form) share one program per task and shapes, `lax.switch`ing on
`Hyper.algo_index` in the loss and the multiplier update (and around the cost critic, which
PPO does not train), so a sweep compiles one program per task where it compiled one per
(task, algorithm). A batched program keeps the algorithm static: under `vmap` a switch would
run every branch.

* `sequential`: the members one after another (`lax.map` of the single-run functions). Each
  member's computation is the single-run one, so its episodes are bitwise those it gives alone
  or in any pack. The CPU default: batching gains nothing there (benchmarks/pack_throughput.py).
* `batched`: all members at once (`vmap` of the single-run functions): networks, SGD and
  algorithm state are batched over members, and the env step runs over every member's envs as
  one flat batch (algos.core.env_batch), so the tasks' lazy branches stay one `cond` each. The
  GPU/TPU default (`auto`). Programs come in a few sizes (BUCKETS), padded with unused
  copies, so a partial pack compiles nothing new. A member's results depend on neither its
  pack-mates nor its slot, bitwise, for a given device and program size; they differ in the
  last bits from the sequential mode's (tests/test_algos_pack.py). On the CPU this holds only
  without FMA (XLA_FLAGS=--xla_cpu_max_isa=AVX): XLA:CPU contracts `a * b + c` into an FMA in
  some positions of a vectorised loop and not in others, so the last bits of an env's step
  depend on where it sits in the flat batch (measured: plain vmap(env.step) over 4 copies of 4
  circle envs gives other observations for copies 3 and 4). On a GPU every element of a kernel
  runs the same instructions. The thread setting is part of the program too: a trainer run with
  `--threads 1` (as the sweep's jobs) compiles single-threaded matrix products, whose last bits
  differ from the multi-threaded ones (measured on a hopper pack: every return differs), so a
  run compares bitwise only with runs of the same `--threads 1` or not.

Programs are memoised per process and, through the persistent compilation cache and the
compiled-program cache beside it (algos.program_cache), across processes.
"""
from __future__ import annotations

import contextlib
import hashlib
import os
import time
from pathlib import Path
from typing import NamedTuple

from algos import jax_cache_repair, program_cache

# The source folders whose code decides a run's result (see code_version); recorders: the
# trainer logs its iterates with recorders.jax_recorder.
CODE_PACKAGES = ("algos", "envs", "recorders")


def code_version(repo: str | os.PathLike | None = None) -> str:
    """sha256 (16 hex digits) of the Python sources of CODE_PACKAGES: changes with any edit to
    the code that trains a run, comments included (a conservative trigger)."""
    repo = Path(repo) if repo is not None else Path(__file__).resolve().parent.parent
    digest = hashlib.sha256()
    for package in CODE_PACKAGES:
        for path in sorted((repo / package).rglob("*.py")):
            digest.update(str(path.relative_to(repo)).encode() + b"\0" + path.read_bytes() + b"\0")
    return digest.hexdigest()[:16]


DEFAULT_CACHE_DIR = os.path.join(os.path.expanduser("~"), ".cache", "saferl-eval", "jax")
# batched program sizes: 1, 2, 3, 4, 6, 8, 12, ..., 1024 members (at most a third of a program is padding)
BUCKETS = tuple(sorted({2**k for k in range(11)} | {3 * 2**k for k in range(9)}))


def enable_compilation_cache(cache_dir: str | None = None) -> str:
    """Turn the JAX persistent compilation cache on for every program, however small."""
    import jax

    cache_dir = cache_dir or os.environ.get("JAX_COMPILATION_CACHE_DIR") or DEFAULT_CACHE_DIR
    os.makedirs(cache_dir, exist_ok=True)
    jax.config.update("jax_compilation_cache_dir", cache_dir)
    jax.config.update("jax_persistent_cache_min_compile_time_secs", 0.0)
    jax.config.update("jax_persistent_cache_min_entry_size_bytes", 0)
    jax_cache_repair.install()  # an unreadable entry is replaced, not recompiled by every job
    return cache_dir


def resolve_mode(mode: str) -> str:
    """`auto` -> `batched` on a GPU or TPU, `sequential` on the CPU."""
    import jax

    from algos.config import PACK_MODES

    if mode not in PACK_MODES:
        raise ValueError(f"pack_mode {mode!r}: must be one of {PACK_MODES}")
    if mode != "auto":
        return mode
    return "sequential" if jax.default_backend() == "cpu" else "batched"


def pack_slots(members: int, mode: str = "sequential", planned: int = 0) -> int:
    """Program size for `members` runs of a pack planned with `planned` (0: as many as given).
    Sequential: the planned pack's size, so a run retrained alone loads its full pack's cached
    programs instead of compiling a program of its own (a member's result does not depend on
    the size; an empty slot trains nothing and costs only its final evaluation). Batched: the
    smallest bucket that holds the planned pack, so a member retrained alone after a failure
    trains in the program size of its full pack."""
    want = max(members, planned)
    if mode == "sequential":
        return want
    for size in BUCKETS:
        if size >= want:
            return size
    raise ValueError(f"a batched pack of {want} runs is larger than the largest program ({BUCKETS[-1]}); "
                     "lower train.pack_size")


class Compiled(NamedTuple):
    """Programs of one run or of a pack of runs (a leading pack axis on every input)."""

    init: object  # (seed, hyper) -> TrainState
    chunk: object  # (TrainState, hyper, num_updates) -> (TrainState, IterateLog, UpdateSummary)
    evaluate: object  # (TrainState, seed, noise_scale, hyper) -> (Pending, first obs)
    template: object  # ShapeDtypeStruct pytree of ONE run's training state (checkpoints are per run)
    compile_s: float  # 0.0 when the programs were already in this process
    mode: str = "sequential"  # how a pack's members run (`sequential` or `batched`); one run: sequential
    source: str = "compiled"  # or "loaded": from the compiled-program cache (algos.program_cache)


# The one in-process memo of compiled programs, keyed by (static config, env, pack size, mode): a
# hit costs nothing. Across processes, algos.program_cache loads programs without tracing them
# (a second or so), where JAX's persistent cache alone still traces and lowers them (3-9 s a
# pack job). The Python objects below (the programs' functions, the algorithms' hooks) are
# cheap to rebuild and carry no cache.
_COMPILED: dict = {}


def compile_programs(config, env=None, size: int | None = None, mode: str | None = None) -> Compiled:
    """AOT-compile the programs of `config`'s static part, for one run (`size` None) or a pack
    of `size` members (pack_slots) in `mode` (default: the config's `pack_mode`, resolved)."""
    from algos.learning import make_env

    mode = "sequential" if size is None else resolve_mode(mode or config.pack_mode)
    env = env if env is not None else make_env(config)
    cache_key = (config.static_key(shared=mode == "sequential"), env, size, mode)
    if cache_key in _COMPILED:
        return _COMPILED[cache_key]._replace(compile_s=0.0)
    start = time.perf_counter()
    stored = _stored_path(config, env, size, mode)
    waits = stored and not program_cache.is_unstorable(stored)  # else each job compiles its own, side by side
    with program_cache.one_compiler(stored) if waits else contextlib.nullcontext():
        if cache_key in _COMPILED:  # compiled by another thread of this process while this one waited
            return _COMPILED[cache_key]._replace(compile_s=time.perf_counter() - start)
        compiled = _load_or_compile(config, env, size, mode, stored, start)
        # memoised before the lock is released: a sibling thread waiting on it then finds these
        # executables instead of loading a second copy from the entry just stored
        _COMPILED[cache_key] = compiled
    return compiled


def _load_or_compile(config, env, size, mode, stored, start) -> Compiled:
    import jax
    import jax.numpy as jnp

    from algos.config import hyper_of, register_hyper, stacked_hyper
    from algos.registry import LEARNERS

    register_hyper()  # a stored program's argument tree names Hyper
    refused = bool(stored) and os.path.exists(stored)  # until it loads
    loaded = program_cache.load(stored) if stored else None
    if loaded is not None:
        return Compiled(*loaded, time.perf_counter() - start, mode, source="loaded")
    programs = LEARNERS[config.learner]().build_programs(config, env, batched=mode == "batched")
    template = jax.eval_shape(programs.init, jnp.int32(0), hyper_of(config))
    if size is None:
        seed, h, budget = jnp.int32(0), hyper_of(config), jnp.int32(0)
        init, chunk, evaluate = programs.init, programs.chunk, programs.evaluate
    else:
        seed, h, budget = jnp.zeros(size, jnp.int32), stacked_hyper([config] * size), jnp.zeros(size, jnp.int32)
        if mode == "batched":
            init, chunk = jax.vmap(programs.init), jax.vmap(programs.chunk)
            evaluate = jax.vmap(programs.evaluate, in_axes=(0, 0, None, 0))
        else:
            init, chunk = _sequential(programs.init), _sequential(programs.chunk)
            sequential_eval = _sequential(lambda st, s, hyper, noise: programs.evaluate(st, s, noise, hyper))

            def evaluate(state, seed, noise_scale, hyper):
                return sequential_eval(state, seed, hyper, scalar=noise_scale)
    state = jax.eval_shape(init, seed, h)
    # The programs are named after their stored entry, so JAX's persistent cache (keyed by the
    # lowered module, names included) never serves them to a new entry: they compile for real
    # and can be stored (algos.program_cache.jax_cache_hits says why that matters).
    tag = os.path.basename(stored).split(".")[0] if stored else "program"
    if refused:  # a refused entry is replaced: new names miss JAX's cache, so they compile for real and are stored
        tag += "_again"
    lowered = (jax.jit(_named(init, f"init_{tag}")).lower(seed, h),
               jax.jit(_named(chunk, f"chunk_{tag}")).lower(state, h, budget),
               jax.jit(_named(evaluate, f"evaluate_{tag}")).lower(
                   state, seed, jnp.float32(0.0), h))
    hits = program_cache.jax_cache_hits()  # counted over the compiles only (tracing runs small jits)
    executables = tuple(program.compile() for program in lowered)
    if stored and program_cache.jax_cache_hits() == hits:
        if program_cache.storable(lowered):
            program_cache.save(stored, executables, template)
        else:
            program_cache.mark_unstorable(stored)
    return Compiled(*executables, template, time.perf_counter() - start, mode)


def _stored_path(config, env, size, mode) -> str | None:
    """Where the persistent cache keeps these programs compiled (algos.program_cache), or None
    when the persistent compilation cache is off (enable_compilation_cache)."""
    import jax

    cache_dir = jax.config.jax_compilation_cache_dir
    if not cache_dir or not jax.config.jax_enable_compilation_cache:
        return None
    return program_cache.entry_path(cache_dir, code_version(), config.static_key(shared=mode == "sequential"),
                                    env, size, mode)


def _named(fn, name: str):
    """fn under another name (a jitted function's module is named after it)."""
    def program(*args):
        return fn(*args)

    program.__name__ = program.__qualname__ = name
    return program


def _sequential(fn):
    """fn over the leading (pack) axis, one member after another (lax.map of the single-run
    function); `scalar`, when given, is passed unbatched as fn's last argument."""
    import jax

    def run(*args, scalar=None):
        one = fn if scalar is None else (lambda *a: fn(*a, scalar))
        return jax.lax.map(lambda member: one(*member), args)

    return run
