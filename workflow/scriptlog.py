"""The log of a rule's Python script (workflow/scripts/): everything the script prints and the
traceback of an error go to the rule's declared log, which the profiles' `show-failed-logs`
prints when the job fails.

    with scriptlog.to_log(snakemake):
        ...
"""
from __future__ import annotations

import contextlib
import os
import traceback


@contextlib.contextmanager
def to_log(smk):
    """Redirect stdout and stderr into the job's log (its first); an error is written there too,
    then raised (Snakemake fails the job)."""
    path = str(smk.log[0])
    os.makedirs(os.path.dirname(path) or ".", exist_ok=True)
    with open(path, "w") as log, contextlib.redirect_stdout(log), contextlib.redirect_stderr(log):
        try:
            yield log
        except BaseException:
            traceback.print_exc(file=log)
            raise
