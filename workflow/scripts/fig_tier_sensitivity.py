"""Snakemake script: the tier-sensitivity figure (bootstrap tier shares; tiers as each threshold moves)."""
from workflow.products import build

build.tier_sensitivity(snakemake.input.iqm, snakemake.input.bootstrap, snakemake.params.thresholds,  # noqa: F821
                       list(snakemake.output), snakemake.params.settings)  # noqa: F821
