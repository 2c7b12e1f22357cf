"""Atomic file writes for the workflow's own outputs (metrics.atomic does the work), so a
reader never sees half a file."""
from __future__ import annotations

import os

import yaml

from metrics.atomic import atomic_path


def write_text(path: str | os.PathLike, text: str) -> None:
    with atomic_path(path) as tmp, open(tmp, "w", encoding="utf-8") as f:
        f.write(text)


def write_yaml(path: str | os.PathLike, data) -> None:
    write_text(path, yaml.safe_dump(data, sort_keys=False))
