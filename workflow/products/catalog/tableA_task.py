"""Tables A.4 onwards: one task's per-condition table from conditions.csv."""
from workflow.products.registry import ALL_PHASES, Product, TABLE


def inputs(files, wildcards):
    return {"conditions": files.tiers["conditions"]}


def build(inputs, outputs, settings, wildcards):
    from metrics.safe_text import read_csv
    from workflow.products import tables
    from workflow.products.sweep_io import save

    return save(tables.task_table(read_csv(inputs["conditions"]), wildcards["task"],
                                  decimals=settings["decimals"]), outputs)


CAPTION = """
**Per-condition results on {{ snakemake.wildcards.task }}** (Tables A.4 onwards, one per task): for each
bound d and algorithm, the mean +- sample standard deviation over seeds of each metric, for **training**
(mean over the run's logged iterates, noise on) and the **final greedy** policy (noise off).

- *R*: mean return; *C*: mean episode cost (sum of per-step costs); *Dnorm* = (C - d) / d; *V*: share of
  episodes whose cost exceeds d; *Dnorm+*: mean (c - d) / d over the violating episodes only.
- Tiers of the seed means: T0..T4 for training, F0..F4 for the final greedy policy (same thresholds as the
  IQM tiers); *P(tier)*: share of bootstrap replicates (seeds resampled) in that tier, *P(0/../4)*: in each tier.
- The standard deviation does not shrink with more seeds; with one seed it is undefined and only the mean is shown.
"""

PRODUCT = Product(
    kind=TABLE, category=ALL_PHASES, stem="tableA_task_{task}", shared=("decimals",), paper="Tables A.4-A.7",
    caption=CAPTION, inputs=inputs, build=build)
