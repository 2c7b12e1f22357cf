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

An entry is a pickle holding native code, so loading one runs whatever its writer put there.
Each entry therefore carries an HMAC-SHA256 tag under a secret key of this user (cache_key),
checked before anything in it is unpickled: an entry that this user's trainers did not write
(planted in a shared folder, tampered with, damaged) is refused with one warning line, and
the programs are compiled and the entry rewritten.
"""
from __future__ import annotations

import contextlib
import fcntl
import functools
import hashlib
import hmac
import os
import secrets
import stat
import pickle
import zlib
from importlib import metadata

SUBDIR = "programs"  # under the persistent compilation cache's folder
FORMAT = 3  # bump when an entry's layout changes
MAGIC = b"saferl-programs 3\n"  # then the 32-byte tag, then the zlib-compressed pickle
KEY_ENV = "SAFERL_PROGRAM_CACHE_KEY"  # the key file, where not the default (key_path)
KEY_BYTES = 32


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


def key_path() -> str:
    """The file of this user's key: $SAFERL_PROGRAM_CACHE_KEY, else saferl-eval/program-cache.key
    in the user's config folder ($XDG_CONFIG_HOME, else ~/.config)."""
    if os.environ.get(KEY_ENV):
        return os.environ[KEY_ENV]
    config = os.environ.get("XDG_CONFIG_HOME") or os.path.join(os.path.expanduser("~"), ".config")
    return os.path.join(config, "saferl-eval", "program-cache.key")


class UnusableKey(OSError):
    """The key file exists but cannot be trusted or read; the message names it and why."""


def cache_key(path: str | None = None) -> bytes:
    """This user's secret key, created (random, mode 0600) on first use. A key file that others
    may write, or that is not KEY_BYTES long, is refused (UnusableKey): whoever can change the key
    can sign entries."""
    path = path or key_path()
    try:
        os.makedirs(os.path.dirname(path) or ".", mode=0o700, exist_ok=True)
        fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
    except FileExistsError:
        pass  # made earlier, or by a concurrent job: read it below
    except OSError as err:  # a read-only home: the jobs compile, uncached, rather than fail
        raise UnusableKey(f"{path}: cannot create the program cache's key: {err.strerror or err}") from None
    else:
        with os.fdopen(fd, "wb") as f:
            f.write(secrets.token_bytes(KEY_BYTES))
    try:
        with open(path, "rb") as f:
            mode = os.fstat(f.fileno()).st_mode
            key = f.read(KEY_BYTES + 1)
    except OSError as err:
        raise UnusableKey(f"{path}: cannot read the program cache's key: {err.strerror or err}") from None
    if mode & (stat.S_IWGRP | stat.S_IWOTH):
        raise UnusableKey(f"{path}: the program cache's key is writable by others (chmod go-w it)")
    if len(key) != KEY_BYTES:  # a concurrent job's key half-written is KEY_BYTES a moment later
        raise UnusableKey(f"{path}: the program cache's key is {len(key)} bytes, not {KEY_BYTES} (delete it)")
    return key


def _tag(key: bytes, path: str, blob: bytes) -> bytes:
    """The entry's tag: its file name is signed too, so a valid entry copied under another
    entry's name (other programs) is refused."""
    return hmac.new(key, os.path.basename(path).encode() + b"\0" + blob, hashlib.sha256).digest()


def _verified_blob(path: str, data: bytes, key: bytes) -> bytes:
    """The compressed pickle of an entry whose tag checks out; ValueError otherwise."""
    head = len(MAGIC) + hashlib.sha256().digest_size
    if not data.startswith(MAGIC) or len(data) < head:
        raise ValueError("not an entry of this format")
    tag, blob = data[len(MAGIC):head], data[head:]
    if not hmac.compare_digest(tag, _tag(key, path, blob)):
        raise ValueError(f"its signature does not match this user's key {key_path()}")
    return blob


def load(path: str):
    """(init, chunk, evaluate, template) from an entry, or None when it is missing or unusable.
    Nothing in an entry is unpickled before its tag is checked."""
    from jax.experimental.serialize_executable import deserialize_and_load

    try:
        with open(path, "rb") as f:
            data = f.read()
    except FileNotFoundError:
        return None
    try:
        blob = _verified_blob(path, data, cache_key())
        programs, template = pickle.loads(zlib.decompress(blob))
        return (*(deserialize_and_load(*program) for program in programs), template)
    except Exception as err:  # planted, tampered, damaged or foreign: compiled and stored again
        print(f"compiled-program cache: refusing {path} ({type(err).__name__}: {err}); compiling again",
              flush=True)
        return None


def save(path: str, executables, template) -> None:
    """Write a signed entry atomically (concurrent jobs may save the same programs; either copy wins)."""
    from jax.experimental.serialize_executable import serialize

    from metrics.atomic import atomic_path

    try:
        key = cache_key()
    except UnusableKey as err:
        print(f"compiled-program cache: not storing {path} ({err})", flush=True)
        return
    blob = pickle.dumps(([serialize(e) for e in executables], template), protocol=pickle.HIGHEST_PROTOCOL)
    blob = zlib.compress(blob, 1)  # 7x smaller (13 -> 2 MB for a push pack), 0.06 s
    with atomic_path(path) as tmp, open(tmp, "wb") as f:
        f.write(MAGIC + _tag(key, path, blob) + blob)
