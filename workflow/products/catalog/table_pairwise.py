"""Pairwise comparisons as a table: P(algorithm X is safer than Y) per phase and safety metric."""
from workflow.products.registry import ALL_PHASES, Product, TABLE


def inputs(files, wildcards):
    return {"run_metrics": files.aggregate["run_metrics"], "aggregate": files.aggregate["aggregate"]}


def build(inputs, outputs, settings, wildcards):
    from workflow.products.pairwise import pairwise_table, read_pairwise
    from workflow.products.sweep_io import save

    return save(pairwise_table(read_pairwise(inputs)), outputs)


CAPTION = """
**Pairwise comparisons: the probability that one algorithm is safer than another** (rliable's probability of
improvement, beyond the paper's tables), for training, the final policy with noise and the final greedy policy.

- *P(X safer than Y)* on a metric (V, Dnorm or Dnorm+; lower is safer): in each (task, bound) condition both
  algorithms have, the share of (seed of X, seed of Y) pairs in which X's value is lower, ties counting half;
  then the mean over conditions. 0.5: neither is safer; P(X, Y) + P(Y, X) = 1.
- In brackets the 95 % interval of a stratified bootstrap (each algorithm's seeds resampled inside each
  condition, with the sweep's bootstrap replicates and seed); bold where the interval lies above 0.5.
"""

PRODUCT = Product(kind=TABLE, category=ALL_PHASES, caption=CAPTION, inputs=inputs, build=build)
