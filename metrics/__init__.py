"""SafeRLEval evaluation engine: safety metrics, IQM with stratified-bootstrap CIs, tiers and cost CDFs from episode tables.

Usable alone on episode logs from any framework (numpy, pandas, pyarrow and scipy only; no JAX).
Stages (each also a ``python -m metrics`` subcommand; docs/metrics.md lists every column):

1. :func:`summarise` episode files -> :class:`Summary` (:func:`write_summary`, :func:`read_summaries`);
2. :func:`aggregate` a Summary -> :class:`Aggregate` (:func:`write_aggregate`, :func:`read_aggregate`);
3. :func:`assign_tiers` an Aggregate and thresholds -> tiers and conditions tables (:func:`tiers` on disk);

:func:`evaluate` runs all three. Building blocks: :func:`iqm`, :func:`tier_of`, :func:`load_thresholds`.
"""

from .aggregate import Aggregate, aggregate, read_aggregate, write_aggregate
from .bootstrap import iqm, percentile_ci, stratified_draws
from .episodes import read_episodes
from .evaluate import evaluate
from .grid import KAPPA
from .schema import METRICS, PHASES, EpisodeTableError, MetricsWarning, ThresholdError
from .summary import Summary, concat_summaries, read_summaries, read_summary, summarise, write_summary
from .thresholds import PAPER_THRESHOLDS, TIER_NAMES, load_thresholds, tier_of, validate_thresholds
from .tiers import assign_tiers, tiers

__all__ = [
    "Aggregate",
    "EpisodeTableError",
    "KAPPA",
    "METRICS",
    "MetricsWarning",
    "PAPER_THRESHOLDS",
    "PHASES",
    "Summary",
    "TIER_NAMES",
    "ThresholdError",
    "aggregate",
    "assign_tiers",
    "concat_summaries",
    "evaluate",
    "iqm",
    "load_thresholds",
    "percentile_ci",
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
    "write_summary",
]
