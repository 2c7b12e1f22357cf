"""Snakemake script: Figures A.7 onwards (one task's final episode costs, noise vs greedy)."""
from workflow.products import build

build.figure_final_costs(list(snakemake.input.summaries), snakemake.wildcards.task, list(snakemake.output),  # noqa: F821
                         snakemake.params.settings)  # noqa: F821
