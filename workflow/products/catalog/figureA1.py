"""Figure A.1: Figure 2 with x up to products.cdf_xmax.figureA1."""
from workflow.products.catalog._cdf import cdf_figure
from workflow.products.registry import ALL_PHASES, FIGURE, Product

inputs, check, build = cdf_figure("figureA1")

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
    paper="Figure A.1", caption=CAPTION, inputs=inputs, build=build)
