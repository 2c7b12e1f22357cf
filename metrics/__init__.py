"""SafeRLEval evaluation engine: safety metrics, IQM with stratified-bootstrap CIs, tiers and cost CDFs from episode tables.

Usable alone on episode logs from any framework (numpy, pandas, pyarrow and scipy only; no JAX).
Stages (each also a ``python -m metrics`` subcommand; docs/metrics.md lists every column):

1. :func:`summarise` episode files -> :class:`Summary` (:func:`write_summary`, :func:`read_summaries`);
2. :func:`aggregate` a Summary -> :class:`Aggregate` (:func:`write_aggregate`, :func:`read_aggregate`);
3. :func:`assign_tiers` an Aggregate and thresholds -> tiers and conditions tables (:func:`tiers` on disk);

:func:`evaluate` runs all three; :func:`plan_seeds` plans seed counts from the runs at hand
(``python -m metrics plan-seeds``). Building blocks: :func:`iqm`, :func:`tier_of`, :func:`load_thresholds`.
"""

import importlib
import sys
import types

# Where each public name lives. Each is imported on first use (PEP 562), so that importing
# `metrics.atomic` or `metrics.schema` alone costs no pandas or scipy import: the sweep's job
# wrappers and the trainer use them, and every job pays its imports.
_HOMES = {
    "aggregate": ("Aggregate", "aggregate", "read_aggregate", "write_aggregate"),
    "bootstrap": ("iqm", "percentile_ci", "stratified_draws"),
    "episodes": ("read_episodes",),
    "evaluate": ("evaluate",),
    "grid": ("KAPPA",),
    "seeds": ("SeedPlan", "load_runs", "plan_seeds", "write_plan"),
    "schema": ("METRICS", "PHASES", "EpisodeTableError", "MetricsWarning", "ThresholdError"),
    "summary": ("Summary", "concat_summaries", "read_summaries", "read_summary", "summarise", "write_summary"),
    "thresholds": ("PAPER_THRESHOLDS", "TIER_NAMES", "load_thresholds", "tier_of", "validate_thresholds"),
    "tiers": ("assign_tiers", "tiers"),
}
_HOME_OF = {name: module for module, names in _HOMES.items() for name in names}


class _Package(types.ModuleType):
    """`metrics.aggregate`, `metrics.evaluate` and `metrics.tiers` are functions, named like the
    submodules that define them. Importing a submodule binds it to its name on the package; here
    that binding keeps the function instead, as an eager `from .aggregate import aggregate` would."""

    def __setattr__(self, name, value):
        if isinstance(value, types.ModuleType) and _HOME_OF.get(name) == name:
            value = getattr(value, name)
        super().__setattr__(name, value)


def __getattr__(name):
    if name in _HOME_OF:
        value = getattr(importlib.import_module(f".{_HOME_OF[name]}", __name__), name)
        globals()[name] = value
        return value
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


def __dir__():
    return sorted(set(globals()) | set(_HOME_OF))


sys.modules[__name__].__class__ = _Package

__all__ = [
    "Aggregate",
    "EpisodeTableError",
    "KAPPA",
    "METRICS",
    "MetricsWarning",
    "PAPER_THRESHOLDS",
    "PHASES",
    "SeedPlan",
    "Summary",
    "TIER_NAMES",
    "ThresholdError",
    "aggregate",
    "assign_tiers",
    "concat_summaries",
    "evaluate",
    "iqm",
    "load_runs",
    "load_thresholds",
    "percentile_ci",
    "plan_seeds",
    "read_aggregate",
    "read_episodes",
    "read_summaries",
    "read_summary",
    "stratified_draws",
    "summarise",
    "tier_of",
    "tiers",
    "validate_thresholds",
    "write_aggregate",
    "write_plan",
    "write_summary",
]
