"""Snakemake script of every product rule: build the product the rule's `product` param names
(workflow/products/catalog/, read by workflow/products/registry.py)."""
from workflow.products.registry import run_from_snakemake

run_from_snakemake(snakemake)  # noqa: F821
