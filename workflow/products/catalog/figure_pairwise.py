"""Pairwise comparisons as a heat map: P(row algorithm safer than column algorithm)."""
from workflow.products.registry import ALL_PHASES, FIGURE, Product
from workflow.products.outputs import save_figure
from workflow.products.sweep_io import apply_settings

from workflow.products.catalog.table_pairwise import inputs


def build(inputs, outputs, settings, wildcards):
    from workflow.products.pairwise import figure_pairwise, read_pairwise

    pairs = read_pairwise(inputs)
    apply_settings(settings)
    save_figure(figure_pairwise(pairs), outputs, settings)
    return pairs


CAPTION = """
**Pairwise comparisons as a heat map** (the table of pairwise comparisons drawn): one row of panels per
phase (training, final with noise, final greedy), one column per safety metric (V, Dnorm, Dnorm+).

- Each cell: the probability that the row's algorithm X is safer (a lower value) than the column's Y, over
  the (task, bound) conditions both have (seed pairs compared in each condition, ties half, then averaged).
  Blue: the row is safer; red: the column is; white: 0.5, neither.
- A star marks a cell whose 95 % stratified-bootstrap interval excludes 0.5.
"""

PRODUCT = Product(kind=FIGURE, category=ALL_PHASES, caption=CAPTION, inputs=inputs, build=build)
