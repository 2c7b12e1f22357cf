"""Figure A.1: Figure 2 with x up to products.cdf_xmax.figureA1."""
from workflow.products.registry import ALL_PHASES, FIGURE, Product
from workflow.products.settings import positive_number
from workflow.products.sweep_io import apply_settings, save_figure


def inputs(files, wildcards):
    return {"cdf": files.aggregate["cdf"]}


def check(settings):
    positive_number(settings["cdf_xmax"]["figureA1"], "cdf_xmax.figureA1")


def build(inputs, outputs, settings, wildcards):
    import pandas as pd

    from workflow.products import fig_cdf

    apply_settings(settings)
    xmax = float(settings["cdf_xmax"]["figureA1"])
    save_figure(fig_cdf.figure_cdf(pd.read_parquet(inputs["cdf"]), xmax=xmax), outputs, settings)


CAPTION = """
**Figure A.1: Figure 2 with the x axis extended to {{ snakemake.params.settings["cdf_xmax"]["figureA1"] }}**,
showing the far tail of violations: x = (c - d) / d, the episode cost's excess over the bound d in
multiples of d, for training (noise on), the final policy with noise and the final greedy policy.

- A curve that reaches 1 only far right of 0 has rare but very large violations, which the mean cost (and
  Dnorm) can hide; episodes beyond x = 20 are counted in the totals but not drawn.
- Shaded bands: 95 % stratified-bootstrap intervals.
"""

PRODUCT = Product(
    kind=FIGURE, category=ALL_PHASES, settings={"cdf_xmax": {"figureA1": 20.0}}, check=check,
    paper="Figure A.1",
    caption=CAPTION, inputs=inputs, build=build)
