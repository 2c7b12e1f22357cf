"""Figure 2: the ECDFs of (c - d) / d, x up to products.cdf_xmax.figure2."""
from workflow.products.catalog._cdf import cdf_figure
from workflow.products.registry import ALL_PHASES, FIGURE, Product

inputs, check, build = cdf_figure("figure2")

CAPTION = """
**Figure 2: how far episode costs fall above or below the bound** - the empirical CDF F(x) of the normalised
cost excess x = (c - d) / d over every episode of every (task, bound, seed) instance (docs/protocol.md), one
curve per algorithm, the x axis cut at {{ snakemake.params.settings["cdf_xmax"]["figure2"] }}.

- **Training**: all episodes of all logged iterates (exploration noise on). **Final with noise**: the last
  policy's final episodes sampling actions as in training. **Final greedy**: the same policy with noise off.
- The dashed line x = 0 is the bound: the curve's height there is the share of episodes within the bound
  (1 - V pooled over episodes); the shape right of 0 shows how severe violations are (x = 1 is twice the bound).
- Shaded bands: 95 % stratified-bootstrap intervals (seeds resampled inside each (task, bound) stratum).
"""

PRODUCT = Product(
    kind=FIGURE, category=ALL_PHASES, settings={"cdf_xmax": {"figure2": 2.0}}, check=check,
    paper="Figure 2", caption=CAPTION, inputs=inputs, build=build)
