"""Snakemake script: Figure A.2 (multiplier trajectories over training)."""
from workflow.products import build

build.figure_multipliers(list(snakemake.input.traces), list(snakemake.output), snakemake.params.settings)  # noqa: F821
