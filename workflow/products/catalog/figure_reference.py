"""The sweep beside the reference shipped for its preset, drawn."""
from workflow.products.registry import ALL_PHASES, FIGURE, Product
from workflow.products.outputs import save_figure
from workflow.products.sweep_io import apply_settings

from workflow.products.catalog.table_reference import inputs


def build(inputs, outputs, settings, wildcards):
    from workflow.products.reference_view import figure_reference, read_comparison

    ref, got, _ = read_comparison(inputs)
    apply_settings(settings)
    save_figure(figure_reference(ref, got), outputs, settings)
    return got


CAPTION = """
**This sweep beside its preset's reference, drawn**: one panel per metric (rows) and phase (columns).

- Black dots with bars: this sweep's IQM over (task, bound) conditions and its 95 % stratified-bootstrap
  interval, per algorithm.
- Diamonds: the reference's value; open when it lies inside the sweep's interval, filled red when outside.
- Without a shipped reference for the preset the figure says so.
"""

PRODUCT = Product(kind=FIGURE, category=ALL_PHASES, caption=CAPTION, inputs=inputs, build=build)
