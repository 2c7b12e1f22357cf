"""JAX's persistent compilation cache, with an unreadable entry replaced.

JAX never overwrites an entry (its file cache's `put` does nothing when the file exists), so
an entry that cannot be read (truncated by a killed writer, damaged on disk) makes every later
process warn, compile that program again and keep the bad file. JAX compiles a key it has just
read only when that read failed, so a `put` of such a key here replaces the file atomically
and says so in one line. The wrapper goes around JAX's file cache when JAX builds it (or
around the one already built); nothing else about the cache changes.
"""
from __future__ import annotations

import os
import threading

_CACHE_SUFFIX = "-cache"  # jax._src.lru_cache names an entry KEY-cache


class ReplacingCache:
    """JAX's cache interface (get, put, _path) over its file cache; see the module's doc."""

    def __init__(self, base):
        self._base = base
        self._read: set[str] = set()  # keys whose entry this process read
        self._lock = threading.Lock()

    @property
    def _path(self):
        return self._base._path

    @_path.setter
    def _path(self, value):
        self._base._path = value

    def get(self, key: str):
        value = self._base.get(key)
        if value is not None:
            with self._lock:
                self._read.add(key)
        return value

    def put(self, key: str, value: bytes) -> None:
        with self._lock:
            unreadable = key in self._read
            self._read.discard(key)
        path = os.path.join(os.fspath(self._path), key + _CACHE_SUFFIX)
        if unreadable and os.path.exists(path):
            from metrics.atomic import atomic_path

            with atomic_path(path) as tmp, open(tmp, "wb") as f:
                f.write(value)
            print(f"JAX compilation cache: replaced the unreadable entry {path}", flush=True)
            return
        self._base.put(key, value)

    def __getattr__(self, name):  # anything else JAX asks of its cache (clear, eviction settings)
        return getattr(self._base, name)


def install() -> None:
    """Wrap JAX's file cache, now or when it is built. Idempotent; a JAX without these
    internals keeps its own behaviour (tests/test_jax_cache_repair.py notices)."""
    try:
        from jax._src import compilation_cache as cc
    except ImportError:
        return
    if getattr(cc.get_file_cache, "_replacing", False):
        return
    build = cc.get_file_cache

    def get_file_cache(path):
        built = build(path)
        return None if built is None else (ReplacingCache(built[0]), built[1])

    get_file_cache._replacing = True
    cc.get_file_cache = get_file_cache
    if cc._cache is not None and not isinstance(cc._cache, ReplacingCache):
        cc._cache = ReplacingCache(cc._cache)
