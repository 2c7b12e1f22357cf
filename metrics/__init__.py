"""SafeRLEval evaluation engine: safety metrics, IQM with stratified-bootstrap CIs, tiers and cost CDFs from episode tables.

Usable alone on episode logs from any framework (numpy, pandas, pyarrow and scipy only; no JAX).
Stages (each also a ``python -m metrics`` subcommand, see docs/metrics.md):

1. :func:`summarise` episode files -> :class:`Summary` (:func:`write_summary` / :func:`read_summaries`);
"""

from .episodes import read_episodes
from .grid import KAPPA
from .schema import METRICS, PHASES, EpisodeTableError, MetricsWarning, ThresholdError
from .summary import Summary, concat_summaries, read_summaries, read_summary, summarise, write_summary

__all__ = [
    "KAPPA",
    "METRICS",
    "PHASES",
    "EpisodeTableError",
    "MetricsWarning",
    "Summary",
    "ThresholdError",
    "concat_summaries",
    "read_episodes",
    "read_summaries",
    "read_summary",
    "summarise",
    "write_summary",
]
