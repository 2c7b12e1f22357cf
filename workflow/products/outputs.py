"""Atomic writes of figures and tables: a temp file in the target folder, then os.replace.

A product is never seen half-written, so an interrupted Snakemake job leaves either the
old file or none.
"""
from __future__ import annotations

import os
from pathlib import Path

import pandas as pd

from metrics.atomic import atomic_write as _atomic
from metrics.atomic import write_text  # noqa: F401  (products write text through this module)
from metrics.safe_text import csv_safe


def save_figure(fig, paths, settings) -> None:
    """Save one figure to every path given (format from the suffix: .pdf, .png) at the
    configured dpi (`settings["dpi"]`, workflow/products/settings.py) and close it."""
    if isinstance(paths, (str, os.PathLike)):
        paths = [paths]
    import matplotlib.pyplot as plt  # here: product modules import this at workflow parse time

    dpi = settings["dpi"]
    try:
        for path in paths:
            fmt = Path(path).suffix.lstrip(".").lower()
            if fmt not in {"pdf", "png"}:
                raise ValueError(f"{path}: figures are written as .pdf or .png, not .{fmt}")
            # No creation date in the metadata, so a rebuilt PDF is byte-identical.
            metadata = {"CreationDate": None} if fmt == "pdf" else {"Software": None}
            _atomic(path, lambda tmp, fmt=fmt: fig.savefig(tmp, format=fmt, dpi=dpi, metadata=metadata))
    finally:
        plt.close(fig)


def save_csv(df: pd.DataFrame, path) -> None:
    """`df` as CSV, its name columns spreadsheet- and terminal-safe (metrics.safe_text.csv_safe)."""
    _atomic(path, lambda tmp: csv_safe(df).to_csv(tmp, index=False))
