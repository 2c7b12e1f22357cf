"""Table A.3: Table 2 with 95 % intervals."""
from workflow.products.registry import ALL_PHASES, Product, TABLE
from workflow.products.sweep_io import BOLD_NOTE, iqm_inputs, iqm_table


inputs = iqm_inputs


def build(inputs, outputs, settings, wildcards):
    from workflow.products import tables

    return iqm_table(tables.table_a3, inputs, outputs, settings)


CAPTION = """
**Table A.3: Table 2 with 95 % confidence intervals.**
As Table 2 (training and final greedy IQMs of R, C, Dnorm, V, Dnorm+ and the tiers), with each IQM
followed by its 95 % percentile interval from a stratified bootstrap (seeds resampled with replacement
inside each (task, bound) stratum; one draw of seeds serves every metric of a replicate).

- *V*: share of episodes with cost above the bound; *Dnorm*: (C - d) / d; *Dnorm+*: mean (c - d) / d of
  the violating episodes only; *R* and *C*: mean return and cost, on task-specific scales.
- *P(tier)*: share of bootstrap replicates in the shown tier (*P(T0/../T4)*: in each tier); a value well
  below 1 means the tier hinges on the sample of seeds (see the tier-sensitivity figure).
""" + BOLD_NOTE

PRODUCT = Product(
    kind=TABLE, category=ALL_PHASES, shared=("baseline", "decimals", "bold"), paper="Table A.3",
    caption=CAPTION, inputs=inputs, build=build)
