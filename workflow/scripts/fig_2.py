"""Snakemake script: Figure 2 (cost-excess CDFs, x cut at config products.cdf_xmax.figure2)."""
from workflow.products import build

build.figure_cdf(snakemake.input.cdf, list(snakemake.output), snakemake.params.settings,  # noqa: F821
                 snakemake.params.settings["cdf_xmax"]["figure2"])  # noqa: F821
