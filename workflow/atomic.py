"""Atomic file writes for the workflow's own outputs: a temp file in the target folder,
then os.replace, so a reader never sees half a file."""
from __future__ import annotations

import os
import tempfile
from pathlib import Path

import yaml


def write_text(path: str | os.PathLike, text: str) -> None:
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.", suffix=".tmp")
    try:
        with os.fdopen(fd, "w", encoding="utf-8") as f:
            f.write(text)
        os.chmod(tmp, 0o666 & ~_umask())  # mkstemp makes 0600; give the usual mode
        os.replace(tmp, path)
    except BaseException:
        if os.path.exists(tmp):
            os.remove(tmp)
        raise


def _umask() -> int:
    mask = os.umask(0)
    os.umask(mask)
    return mask


def write_yaml(path: str | os.PathLike, data) -> None:
    write_text(path, yaml.safe_dump(data, sort_keys=False))
