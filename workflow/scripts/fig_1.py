"""Snakemake script: Figure 1 (one run's final episode costs, noise vs greedy)."""
from workflow.products import build

build.figure1(snakemake.input.summary, list(snakemake.output), snakemake.params.settings,  # noqa: F821
              snakemake.params.run)  # noqa: F821
