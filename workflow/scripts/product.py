"""Snakemake script of every product rule: build the product the rule's `product` param names
(workflow/products/catalog/, read by workflow/products/registry.py)."""
from workflow import scriptlog
from workflow.products.registry import run_from_snakemake

with scriptlog.to_log(snakemake):  # noqa: F821
    run_from_snakemake(snakemake)  # noqa: F821
    print("wrote " + " ".join(snakemake.output))  # noqa: F821
