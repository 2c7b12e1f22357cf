"""Snakemake's job listing, short: a pack job of the `paper` preset has 270 outputs and its
summaries and aggregation read 1440 files, each listed whole in every job's `input:`, `output:`
and `reason:` line (a `paper` dry run printed 2.6 MB). The Snakefile installs a filter that
lists a long file list's first and last entries and how many it leaves out; everything else
(the jobs, their rules, logs, resources, Snakemake's job table, every error) is as Snakemake
prints it. SAFERL_FULL_JOB_LISTING=1 keeps the lists whole (workflow.plan sets it: it reads
each job's outputs from the listing).
"""
from __future__ import annotations

import logging
import os
import re

FULL_LISTING_ENV = "SAFERL_FULL_JOB_LISTING"
MAX_FILES = 20  # lists up to this long are printed whole (every job of the default and tiny presets)
KEEP = 3  # entries shown at each end of a longer list
MAX_REASON = 400  # characters of a job's reason shown


def shorten_files(files, max_files: int = MAX_FILES, keep: int = KEEP) -> list:
    files = list(files)
    if len(files) <= max_files:
        return files
    return files[:keep] + [f"... ({len(files) - 2 * keep} more)"] + files[-keep:]


def shorten_reason(reason: str, limit: int = MAX_REASON) -> str:
    """'Missing output files: a, b, ...' with its file lists cut like shorten_files."""
    if len(reason) <= limit:
        return reason

    def cut(match):
        files = match.group(2).split(", ")
        return match.group(1) + ", ".join(shorten_files(files, 2 * KEEP))

    short = re.sub(r"([A-Za-z ()]+: )((?:[^,;:]+, )+[^,;:]+)", cut, reason)
    return short if len(short) <= limit else short[:limit] + f"... ({len(reason)} characters)"


class _ShortJobInfo(logging.Filter):
    def filter(self, record: logging.LogRecord) -> bool:
        if str(getattr(record, "event", "")).lower().endswith("job_info"):
            for item in ("input", "output", "log"):
                value = getattr(record, item, None)
                if isinstance(value, (list, tuple)):
                    setattr(record, item, shorten_files(value))
            reason = getattr(record, "reason", None)
            if reason is not None:
                setattr(record, "reason", shorten_reason(str(reason)))
        return True


def shorten_job_listing() -> None:
    """Install the filter on Snakemake's logger (once), unless SAFERL_FULL_JOB_LISTING=1."""
    if os.environ.get(FULL_LISTING_ENV) == "1":
        return
    log = logging.getLogger("snakemake.logging")
    if not any(isinstance(f, _ShortJobInfo) for f in log.filters):
        log.addFilter(_ShortJobInfo())
