"""Reading the sweep's files and writing tables: what several product modules share.

Summaries go through the metrics engine's own reader (its format checks included); a trace
without run columns gets them from its run folder's path.
"""
from __future__ import annotations

import pandas as pd

from metrics.safe_text import read_csv
from metrics.schema import RUN_KEYS

RUN_KEYS = list(RUN_KEYS)


def read_summaries(paths):
    from metrics.summary import read_summaries as engine_reader

    return engine_reader(list(paths))


def read_traces(paths) -> pd.DataFrame:
    from runs import run_layout

    frames = []
    for path in paths:
        df = pd.read_parquet(path)
        missing = [c for c in ("iteration", "multiplier") if c not in df.columns]
        if missing:
            raise ValueError(f"{path}: trace is missing column(s) {missing} (docs/api-contracts.md)")
        if not set(RUN_KEYS) <= set(df.columns):
            try:
                df = df.assign(**run_layout.run_of_path(path))
            except ValueError as err:
                raise ValueError(f"{err}, and the file has no task/bound/algo/seed columns") from None
        frames.append(df)
    if not frames:
        raise ValueError("no trace files given")
    return pd.concat(frames, ignore_index=True)


def save(table, out: dict):
    """Write a `tables.Table` as CSV, Markdown, LaTeX and HTML; returns it."""
    from .tablefmt import save_table

    save_table(table, out["csv"], out["md"], out["tex"], out.get("html"))
    return table


def iqm_table(builder, inputs, out, settings):
    """Tables 2, A.2, A.3: `builder` (from `tables`) on iqm.csv and tiers.csv, with the runs'
    grid noted under it when run.json files are given."""
    from . import setup_tables

    grid = setup_tables.grid_note(setup_tables.read_run_configs(inputs["runs"])) if inputs.get("runs") else None
    return save(builder(read_csv(inputs["iqm"]), read_csv(inputs["tiers"]), baseline=settings["baseline"],
                        decimals=settings["decimals"], bold=settings["bold"], grid=grid), out)


# The last line of Table A.2's and A.3's captions (Jinja, rendered by Snakemake's report).
BOLD_NOTE = """- Bold: the best value in a column among the algorithms other than the unconstrained baseline
  ({{ snakemake.params.settings["baseline"] }}){% if snakemake.params.settings["bold"] == "safe" %}, counting
  only algorithms with tier >= 1 in that phase (``products.bold: safe``){% endif %}.
"""


def iqm_inputs(files, wildcards) -> dict:
    """What Tables 2, A.2 and A.3 read."""
    return {"iqm": files.aggregate["iqm"], "tiers": files.tiers["tiers"], "runs": files.runs("run.json")}


def apply_settings(settings) -> None:
    """The configured font size for every figure drawn after this."""
    from .style import apply_rc

    apply_rc(settings["font_size"])
