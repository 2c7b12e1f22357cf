"""Snakemake script of the rules summarise_<pack> (workflow/rules/metrics.smk): each run of the
pack checked (workflow.packs.verify_for_summary) and summarised into its summary.parquet
(stage 1 of the metrics engine, docs/metrics.md)."""
import os

from metrics.summary import summarise, write_summary
from workflow import packs, scriptlog

with scriptlog.to_log(snakemake):  # noqa: F821
    for episodes, summary in zip(snakemake.input.episodes, snakemake.output):  # noqa: F821
        packs.verify_for_summary(os.path.dirname(episodes))
        write_summary(summarise(episodes), summary)
        print(f"summarised {os.path.dirname(episodes)}")
