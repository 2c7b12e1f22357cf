"""A W&B run per training run, when a sweep asks for one (config key `curves.wandb`,
runs.train's --wandb): the run's config, its curves (runs.curves.iterate_scalars, the iterate
as the step), the final phases' return, cost and V.

Each run is logged once its run folder is complete, from the host log the folder was written
from, so a run that was resumed is one W&B run with every iterate once. The default mode is
`offline` (cluster nodes without internet): the run is written to the run folder's `wandb/`
and uploaded later with `wandb sync` (docs/workflow.md). wandb is imported here only, and only
when a job asks for W&B; it is the optional extra `[wandb]`.
"""
from __future__ import annotations

import os

import numpy as np

MODES = ("offline", "online")
INSTALL = 'pip install -e ".[wandb]"'


class WandbUnavailable(RuntimeError):
    """W&B logging was asked for but wandb cannot be imported."""


def check_available() -> None:
    """Raise WandbUnavailable saying how to install wandb when it is missing (before any training)."""
    try:
        import wandb  # noqa: F401
    except ImportError as err:
        raise WandbUnavailable(f"W&B logging is on (--wandb) but wandb cannot be imported ({err}): {INSTALL}") from None


def log_run(member, arrays: dict, final: dict, *, mode: str = "offline", project: str, group: str,
            entity: str | None = None) -> str:
    """Write one finished run (runs.pack.Member; its host log `arrays`; its final evaluation
    `final`) as a W&B run named by its run id; returns the folder W&B wrote it to."""
    import wandb

    from algos.registry import get as get_algorithm
    from runs.curves import final_scalars, iterate_scalars
    from runs.run_layout import bound_label, run_id

    if mode not in MODES:
        raise ValueError(f"W&B mode {mode!r} is not one of {MODES}")
    config = member.config
    run = wandb.init(
        project=project, group=group, entity=entity, mode=mode, dir=member.out,
        name=run_id(config.task, config.bound, config.algo, config.seed),
        tags=[config.task, "d" + bound_label(config.bound), config.algo],
        config={**config.to_dict(), "preset": member.preset}, reinit="create_new",
        # a record of the run's numbers only: no console capture (the job's log is its own),
        # no system metrics, git state or code
        settings=wandb.Settings(silent=True, console="off", x_disable_stats=True, disable_git=True,
                                save_code=False, disable_job_creation=True))
    try:
        scalars = iterate_scalars(arrays, config, get_algorithm(config.algo))
        J = len(arrays["update"])
        for step in range(J):
            run.log({tag: float(v[step]) for tag, v in scalars.items() if np.isfinite(v[step])}, step=step)
        run.log(final_scalars(final, config.bound), step=max(J - 1, 0))
        return os.path.dirname(run.dir)  # offline-run-<time>-<id>/ (run.dir is its files/)
    finally:
        run.finish()
