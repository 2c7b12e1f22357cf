"""Snakemake script: Tables A.4 onwards (one task's per-condition table)."""
from workflow.products import build

build.task_table(snakemake.input.conditions, snakemake.wildcards.task, dict(snakemake.output),  # noqa: F821
                 snakemake.params.settings)  # noqa: F821
