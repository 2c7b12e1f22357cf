"""Snakemake script: Figures A.3 onwards (one task's return and cost training curves)."""
from workflow.products import build

build.figure_training_curves(list(snakemake.input.summaries), list(snakemake.input.traces),  # noqa: F821
                             snakemake.wildcards.task, list(snakemake.output), snakemake.params.settings)  # noqa: F821
