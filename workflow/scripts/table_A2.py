"""Snakemake script: Table A2 (results/tables/tableA2.{csv,md,tex,html}); see workflow/products/tables.py."""
from workflow.products import build

build.iqm_table("tableA2", snakemake.input.iqm, snakemake.input.tiers, dict(snakemake.output),  # noqa: F821
                snakemake.params.settings)  # noqa: F821
