"""Table 2: training and final greedy IQMs with tiers."""
from workflow.products.registry import ALL_PHASES, Product, TABLE
from workflow.products.sweep_io import iqm_inputs, iqm_table


inputs = iqm_inputs


def build(inputs, outputs, settings, wildcards):
    from workflow.products import tables

    return iqm_table(tables.table2, inputs, outputs, settings)


CAPTION = """
**Table 2: safety of each algorithm during training and of its final greedy policy.**
Each number is an interquartile mean (IQM) over the (task, bound) conditions of the per-condition
mean over seeds; training values are first averaged over every logged iterate of a run.

- **Training** (every logged iterate, exploration noise on) and **final greedy** (the last policy,
  deterministic mode action, noise off) are shown side by side; they can disagree.
- *R*: mean undiscounted episode return (task-specific scale, not comparable across tasks).
- *C*: mean episode cost, the sum of per-step costs over an episode (task-specific scale).
- *Dnorm* = (C - d) / d: how far the mean cost lies above (> 0, unsafe on average) or below (< 0) the bound d.
- *V*: violation rate, the share of episodes whose cost exceeds the bound d (strictly).
- *Dnorm+*: the mean of (c - d) / d over the violating episodes only (0 when none violate): how badly the bound is broken when it is.
- *Tier* (0 Unsafe, 1 Minimal: IQM(Dnorm) <= 0, 2 Moderate: also IQM(V) <= 0.5, 3 Substantial: also
  IQM(V) <= 0.1 and IQM(Dnorm+) <= 0.1, 4 Strict: IQM(V) = IQM(Dnorm+) = 0 with the default thresholds);
  *P(tier)* is the share of stratified-bootstrap replicates that land in the shown tier and
  *P(T0/../T4)* their shares in each tier 0 to 4.
- Bold: the best value in a column among the algorithms other than the unconstrained baseline
  ({{ snakemake.params.settings["baseline"] }}), as in the paper{% if snakemake.params.settings["bold"] == "safe" %};
  here only among algorithms with tier >= 1 in that phase (``products.bold: safe``){% endif %}.
"""

PRODUCT = Product(
    kind=TABLE, category=ALL_PHASES, shared=("baseline", "decimals", "bold"), paper="Table 2",
    caption=CAPTION, inputs=inputs, build=build)
