"""Table 1: the tier definitions, from the thresholds the tiers step used."""
from workflow.products.registry import Product, SETUP, TABLE


def inputs(files, wildcards):
    return {"thresholds": files.thresholds}


def build(inputs, outputs, settings, wildcards):
    from metrics import load_thresholds

    from workflow.products import setup_tables
    from workflow.products.sweep_io import save

    return save(setup_tables.table1(load_thresholds(inputs["thresholds"])), outputs)


CAPTION = """
**Table 1: the safety tiers**, generated from the thresholds this sweep used (config ``thresholds``), so a
changed threshold shows here.

- Tiers are assigned per algorithm and phase on IQM values over the (task, bound) conditions, and per
  condition on the seed means in the per-task tables.
- They are nested: tier k needs every condition of tiers 1 to k ("All conditions" spells them out); each test
  is value <= limit on unrounded values. *Dnorm* = (C - d) / d; *V*: share of episodes with cost above d;
  *Dnorm+*: mean (c - d) / d over the violating episodes only.
"""

PRODUCT = Product(
    kind=TABLE, category=SETUP, paper="Table 1",
    caption=CAPTION, inputs=inputs, build=build)
