"""Snakemake script: Table A3 (results/tables/tableA3.{csv,md,tex,html}); see workflow/products/tables.py."""
from workflow.products import build

build.iqm_table("tableA3", snakemake.input.iqm, snakemake.input.tiers, dict(snakemake.output),  # noqa: F821
                snakemake.params.settings)  # noqa: F821
