"""Snakemake script: Figure A.1 (Figure 2 with the x axis to config products.cdf_xmax.figureA1)."""
from workflow.products import build

build.figure_cdf(snakemake.input.cdf, list(snakemake.output), snakemake.params.settings,  # noqa: F821
                 snakemake.params.settings["cdf_xmax"]["figureA1"])  # noqa: F821
