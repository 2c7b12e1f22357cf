"""Outputs on a filesystem whose clock runs ahead of this host's (a shared filesystem's server).

Snakemake fails a finished job whose outputs are dated before its newest input ("clock skew
problem"), and a file written now is dated before one the filesystem dated in the future. The
job's outputs are new all the same: `tolerate_skew` dates each such output like its newest
input instead, so the job succeeds, the dates stay in order (the next invocation plans
nothing for them) and one warning says so. workflow.sweep.clock_notice reports the skew before
planning.
"""
from __future__ import annotations

import os

_warned = False


def _newest_input(job) -> tuple[float, str] | None:
    found = []
    for f in job.input:
        try:
            found.append((os.stat(f).st_mtime, str(f)))
        except (OSError, TypeError, ValueError):
            continue
    return max(found) if found else None


async def _date_outputs_after_inputs(self, job, expanded_output) -> None:
    """DAG.check_output_mtime: an output older than the newest input gets that input's date."""
    global _warned
    newest = _newest_input(job)
    if newest is None:
        return
    mtime, source = newest
    lagging = []
    for out in expanded_output:
        try:
            if os.stat(out).st_mtime < mtime:
                os.utime(out, (mtime, mtime))
                lagging.append(str(out))
        except OSError:
            continue
    if lagging and not _warned:
        from snakemake.logging import logger

        _warned = True
        logger.warning(f"warning: {len(lagging)} output(s) of rule {job.rule.name} (e.g. {lagging[0]}) were dated "
                       f"before their input {source}, which is dated in the future (a filesystem clock ahead of "
                       f"this host's); dated like that input so that nothing reruns for it (said once)")


def tolerate_skew() -> bool:
    """Install the check above in place of Snakemake's; False where this Snakemake has none."""
    from snakemake.dag import DAG

    if not hasattr(DAG, "check_output_mtime"):
        return False
    DAG.check_output_mtime = _date_outputs_after_inputs
    return True
