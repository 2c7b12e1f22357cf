"""Atomic outputs: a file appears complete or not at all; a folder receives all its files or none.

The one implementation of atomic writes in the project: algos, the workflow and the products
use it too. metrics is the base install every other part depends on, and this module
imports nothing outside the standard library, so it is cheap to import anywhere.
"""

from __future__ import annotations

import contextlib
import os
import shutil
import tempfile


@contextlib.contextmanager
def atomic_path(path):
    """Yield a temporary path beside ``path``; on success it replaces ``path`` (os.replace)."""
    path = os.fspath(path)
    folder = os.path.dirname(os.path.abspath(path))
    os.makedirs(folder, exist_ok=True)
    fd, tmp = tempfile.mkstemp(dir=folder, prefix=f".{os.path.basename(path)}.", suffix=".tmp")
    os.close(fd)
    try:
        yield tmp
        os.chmod(tmp, 0o666 & ~_umask())  # mkstemp makes 0600 files; results are for sharing
        os.replace(tmp, path)
    finally:
        if os.path.exists(tmp):
            os.remove(tmp)


def atomic_write(path, write) -> None:
    """Call ``write(tmp)`` to fill a temporary file beside ``path``, then move it into place."""
    with atomic_path(path) as tmp:
        write(tmp)


def write_text(path, text: str) -> None:
    with atomic_path(path) as tmp, open(tmp, "w", encoding="utf-8") as f:
        f.write(text)


def _umask() -> int:
    mask = os.umask(0)
    os.umask(mask)
    return mask


@contextlib.contextmanager
def staged_directory(out_dir):
    """Yield a staging folder inside ``out_dir``; on success its files are moved into ``out_dir``.

    Nothing is moved if the block raises, so a failed run leaves ``out_dir`` as it was (and
    removes it again if this call created it). Each move is an atomic os.replace.
    """
    out_dir = os.fspath(out_dir)
    created = not os.path.exists(out_dir)
    os.makedirs(out_dir, exist_ok=True)
    stage = tempfile.mkdtemp(dir=out_dir, prefix=".staging-")
    try:
        yield stage
        for name in sorted(os.listdir(stage)):
            os.replace(os.path.join(stage, name), os.path.join(out_dir, name))
    except BaseException:
        shutil.rmtree(stage, ignore_errors=True)
        if created:
            shutil.rmtree(out_dir, ignore_errors=True)
        raise
    shutil.rmtree(stage, ignore_errors=True)
