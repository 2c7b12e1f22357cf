"""Compiled programs on disk, keyed by what they are built from, so a process that needs a
program another one compiled loads it without tracing or lowering it.

JAX's persistent compilation cache keys an executable by its lowered module, so a hit still
traces and lowers the program first: 3-9 s per pack job of the default sweep on a 2-core CPU
(the programs' env steps are large). Here the key is computed before tracing, from everything
that decides the programs: the code that builds them (programs.code_version), the static config,
the env, the pack size and mode, and the platform (library versions, device kind, the CPU's
instruction set, XLA_FLAGS, JAX's numeric flags). An entry holds the three executables
(jax.experimental.serialize_executable) and the training state's shapes; loading one gives the
very executables that were saved, so a run's results do not depend on whether its programs
were compiled or loaded. A missing, unreadable or foreign entry is compiled again; only
programs XLA compiled in this process are saved (jax_cache_hits), and none that hold custom
calls (storable: the CRAX tasks' programs). Jobs that need the same programs at once compile
them once (one_compiler).
"""
from __future__ import annotations

import contextlib
import fcntl
import functools
import hashlib
import os
import pickle
import zlib
from importlib import metadata

SUBDIR = "programs"  # under the persistent compilation cache's folder
FORMAT = 2  # bump when an entry's layout changes


def _platform() -> tuple:
    """Everything outside the project's code that changes what a program compiles to."""
    import jax

    versions = []
    for package in ("jax", "jaxlib", "numpy", "crax-bench", "mujoco-mjx"):
        try:
            versions.append((package, metadata.version(package)))
        except metadata.PackageNotFoundError:
            pass
    device = jax.devices()[0]
    flags = tuple((name, getattr(jax.config, name, None)) for name in
                  ("jax_enable_x64", "jax_default_matmul_precision", "jax_numpy_rank_promotion"))
    return (FORMAT, tuple(versions), device.platform, device.device_kind, _cpu_features(),
            os.environ.get("XLA_FLAGS", ""), flags)


def _cpu_features() -> str:
    """The host CPU's instruction-set flags (Linux): an executable compiled for the CPU uses
    the build machine's ISA, and nodes of one cluster sharing a home folder may differ."""
    try:
        with open("/proc/cpuinfo") as f:
            for line in f:
                if line.startswith(("flags", "Features")):
                    return line.split(":", 1)[1].strip()
    except OSError:
        pass
    import platform

    return platform.processor() or platform.machine()


_jax_cache_hits = 0  # JAX persistent-cache hits in this process, counted from the first ask


@functools.cache
def _listen() -> None:
    from jax import monitoring

    monitoring.register_event_listener(_count_hit)


def jax_cache_hits() -> int:
    """How many executables JAX's persistent cache has served in this process so far. Such an
    executable must not be stored here: XLA:CPU serialises one it loaded without its kernels,
    and the copy then fails when it runs ("Function ... not found"), so only programs compiled
    for real are saved."""
    _listen()
    return _jax_cache_hits


def _count_hit(event: str, **_) -> None:
    global _jax_cache_hits
    if event == "/jax/compilation_cache/cache_hits":
        _jax_cache_hits += 1


def entry_path(cache_dir: str, code: str, static_key, env, size, mode: str) -> str:
    """The file that holds (or will hold) these programs."""
    key = repr((code, static_key, env, size, mode, _platform()))
    return os.path.join(cache_dir, SUBDIR, hashlib.sha256(key.encode()).hexdigest()[:32] + ".pkl")


@contextlib.contextmanager
def one_compiler(path: str):
    """Held while a job looks up, and if need be compiles and stores, the entry at `path`: jobs
    that need the same programs at once (the pack jobs of one task in a sequential sweep share
    one program; local jobs run as threads of one process, cluster jobs as processes sharing
    the folder) compile them once, the others wait and load. flock is per open file, so it
    also keeps threads apart; a job that dies releases it. Where the filesystem has no locks,
    each job compiles on its own, as before."""
    os.makedirs(os.path.dirname(path), exist_ok=True)
    with open(path + ".lock", "a") as handle:
        try:
            fcntl.flock(handle, fcntl.LOCK_EX)
        except OSError:
            pass
        yield  # closing the file releases the lock


def storable(lowered) -> bool:
    """Whether programs can be stored: not when they call custom calls (the CRAX tasks' MJX
    solves call LAPACK's Cholesky and triangular solves). An XLA:CPU executable holding one
    deserialises without the call's target and crashes when it runs (a segfault at address 0,
    not an error), so such programs are compiled by every job that needs them."""
    return not any("custom_call" in program.as_text() for program in lowered)


def mark_unstorable(path: str) -> None:
    """Leave a note that these programs are not stored, so later jobs compile at once instead
    of waiting for one another (one_compiler)."""
    from metrics.atomic import atomic_path

    with atomic_path(path + ".unstorable") as tmp, open(tmp, "w") as f:
        f.write("programs with custom calls: compiled by each job (algos.program_cache.storable)\n")


def is_unstorable(path: str) -> bool:
    return os.path.exists(path + ".unstorable")


def load(path: str):
    """(init, chunk, evaluate, template) from an entry, or None when it is missing or unusable."""
    from jax.experimental.serialize_executable import deserialize_and_load

    try:
        with open(path, "rb") as f:
            programs, template = pickle.loads(zlib.decompress(f.read()))
        return (*(deserialize_and_load(*program) for program in programs), template)
    except FileNotFoundError:
        return None
    except Exception as err:  # a damaged or foreign entry: compile again (and store, if compiled for real)
        print(f"compiled-program cache: ignoring {path} ({type(err).__name__}: {err})", flush=True)
        return None


def save(path: str, executables, template) -> None:
    """Write an entry atomically (concurrent jobs may save the same programs; either copy wins)."""
    from jax.experimental.serialize_executable import serialize

    from metrics.atomic import atomic_path

    blob = pickle.dumps(([serialize(e) for e in executables], template), protocol=pickle.HIGHEST_PROTOCOL)
    blob = zlib.compress(blob, 1)  # 7x smaller (13 -> 2 MB for a push pack), 0.06 s
    with atomic_path(path) as tmp, open(tmp, "wb") as f:
        f.write(blob)
