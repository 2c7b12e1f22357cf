"""Atomic outputs: a file appears complete or not at all; a folder receives all its files or none.

The one implementation of atomic writes in the project: algos, the workflow and the products
use it too. metrics is the base install every other part depends on, and this module
imports nothing outside the standard library, so it is cheap to import anywhere.
"""

from __future__ import annotations

import contextlib
import errno
import os
import re
import shutil
import socket
import tempfile
import time


@contextlib.contextmanager
def atomic_path(path):
    """Yield a temporary path beside ``path``; on success it replaces ``path`` (os.replace)."""
    path = os.fspath(path)
    folder = os.path.dirname(os.path.abspath(path))
    os.makedirs(folder, exist_ok=True)
    remove_leftovers(folder, f".{os.path.basename(path)}.")
    prefix = f".{os.path.basename(path)}.{_writer()}."
    try:
        fd, tmp = tempfile.mkstemp(dir=folder, prefix=prefix, suffix=".tmp")
    except OSError as err:  # a read-only or full folder: name the output, not the temporary name
        raise write_error(err, path, os.path.join(folder, prefix)) from err
    os.close(fd)
    try:
        try:
            yield tmp
            os.chmod(tmp, 0o666 & ~_umask())  # mkstemp makes 0600 files; results are for sharing
            os.replace(tmp, path)
        except OSError as err:
            raise write_error(err, path, tmp) from err
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
    remove_leftovers(out_dir, ".staging-")
    stage = tempfile.mkdtemp(dir=out_dir, prefix=f".staging-{_writer()}.")
    moved = False
    try:
        try:
            yield stage
            with _signals_held():  # a signal now would leave out_dir with some files new, some old
                for name in sorted(os.listdir(stage)):
                    os.replace(os.path.join(stage, name), os.path.join(out_dir, name))
                moved = True
        except OSError as err:
            raise write_error(err, os.path.join(out_dir, _newest(stage) or ""), stage) from err
    except BaseException:
        shutil.rmtree(stage, ignore_errors=True)
        if created and not moved:  # a signal held during the moves arrives after them: out_dir is whole
            shutil.rmtree(out_dir, ignore_errors=True)
        raise
    shutil.rmtree(stage, ignore_errors=True)


@contextlib.contextmanager
def _signals_held():
    """SIGINT and SIGTERM wait until the block ends (the main thread only: signals go there)."""
    import signal
    import threading

    if threading.current_thread() is not threading.main_thread() or not hasattr(signal, "pthread_sigmask"):
        yield
        return
    previous = signal.pthread_sigmask(signal.SIG_BLOCK, {signal.SIGINT, signal.SIGTERM})
    try:
        yield
    finally:
        signal.pthread_sigmask(signal.SIG_SETMASK, previous)


class OutputWriteError(OSError):
    """An output could not be written (disk full, quota, read-only): one line naming the output,
    not the temporary name, and the errno kept for callers that tell transient errors apart."""

    def __str__(self) -> str:
        return self.strerror


def write_error(err: OSError, path: str, tmp: str) -> OSError:
    """`err` as an OutputWriteError naming `path`, when it names no file or only the temporary one
    (pandas and pyarrow raise ENOSPC without a name); an error about another file is kept."""
    if isinstance(err, OutputWriteError) or (err.filename is not None and not str(err.filename).startswith(tmp)):
        return err
    reason = err.strerror or str(err) or type(err).__name__
    hint = "; free space and run the same command again" if err.errno in (errno.ENOSPC, errno.EDQUOT) \
        or os.strerror(errno.ENOSPC) in reason else ""
    return OutputWriteError(err.errno, f"cannot write {path}: {reason}{hint}")


def _newest(folder: str) -> str | None:
    """The last file written in a staging folder: the one a failed write was writing."""
    try:
        entries = list(os.scandir(folder))
        return max(entries, key=lambda e: e.stat().st_mtime_ns).name if entries else None
    except OSError:
        return None


# ---- leftovers of interrupted writes -----------------------------------------------------
# Temporary names carry their writer, "<pid>@<host>", so the next write of the same output
# can delete what a killed writer left, and never a live writer's file.
_TAG = re.compile(r"[0-9]+@[^.@/]+")
FOREIGN_HOST_AGE_S = 24 * 3600  # another host's writer cannot be checked: only this old is taken as dead


def _host() -> str:
    return socket.gethostname().replace(".", "_")  # no dots: names are split at them


def _writer() -> str:
    return f"{os.getpid()}@{_host()}"


def _writer_alive(tag: str) -> bool | None:
    pid, _, host = tag.partition("@")
    if host != _host():
        return None
    try:
        os.kill(int(pid), 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        pass
    return True


def remove_leftovers(folder, prefix: str = ".") -> list[str]:
    """Delete the temporary files and staging folders under ``folder`` whose names start with
    ``prefix`` and whose writer has ended (on another host: when older than a day); returns
    their names. Untagged names of older versions are taken when older than a day too."""
    removed = []
    try:
        entries = [e for e in os.scandir(folder) if e.name.startswith(prefix)
                   and (e.name.endswith(".tmp") or e.name.startswith(".staging-"))]
    except OSError:
        return removed
    for entry in entries:
        tags = [part for part in entry.name.replace(".staging-", ".", 1).split(".") if _TAG.fullmatch(part)]
        alive = _writer_alive(tags[-1]) if tags else None
        try:
            old = time.time() - entry.stat(follow_symlinks=False).st_mtime > FOREIGN_HOST_AGE_S
            if alive is False or (alive is None and old):
                shutil.rmtree(entry.path) if entry.is_dir(follow_symlinks=False) else os.remove(entry.path)
                removed.append(entry.name)
        except OSError:
            pass
    return removed
