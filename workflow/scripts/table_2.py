"""Snakemake script: Table 2 (results/tables/table2.{csv,md,tex,html}); see workflow/products/tables.py."""
from workflow.products import build

build.iqm_table("table2", snakemake.input.iqm, snakemake.input.tiers, dict(snakemake.output),  # noqa: F821
                snakemake.params.settings)  # noqa: F821
