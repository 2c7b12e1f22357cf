"""Names shared by every stage: phases, metrics, table columns and the error types."""

PHASES = ("train", "final_explore", "final_greedy")
FINAL_PHASES = ("final_explore", "final_greedy")
METRICS = ("R", "C", "V", "Dnorm", "Dnorm_plus")

RUN_KEYS = ("task", "bound", "algo", "seed")
EPISODE_KEYS = RUN_KEYS + ("phase", "iteration", "episode")
REQUIRED_COLUMNS = EPISODE_KEYS + ("return", "cost")

STRING_COLUMNS = ("task", "algo", "phase")
INTEGER_COLUMNS = ("seed", "iteration", "episode")
FLOAT_COLUMNS = ("bound", "return", "cost")


def require_columns(df, columns, what: str) -> None:
    """Raise ValueError naming `what` and the missing columns when `df` lacks any of `columns`."""
    missing = [c for c in columns if c not in df.columns]
    if missing:
        raise ValueError(f"{what}: missing column(s) {missing}; has {list(df.columns)}")


class EpisodeTableError(ValueError):
    """An episode table (or a summary made from one) breaks the episode-table contract (docs/metrics.md)."""


class ThresholdError(ValueError):
    """A tier-threshold file is malformed."""


class MetricsWarning(UserWarning):
    """Input that is usable under a documented rule (missing stratum, single-seed stratum)."""
