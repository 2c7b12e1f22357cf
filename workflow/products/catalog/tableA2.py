"""Table A.2: the final policy with noise vs greedy, IQMs with 95 % intervals."""
from workflow.products.registry import FINAL, Product, TABLE
from workflow.products.sweep_io import BOLD_NOTE, iqm_inputs, iqm_table


inputs = iqm_inputs


def build(inputs, outputs, settings, wildcards):
    from workflow.products import tables

    return iqm_table(tables.table_a2, inputs, outputs, settings)


CAPTION = """
**Table A.2: the final policy with exploration noise vs the same policy run greedily.**
IQMs over (task, bound) conditions with 95 % stratified-bootstrap intervals, and the tier of each.

- **Final with noise**: the last policy sampling actions as in training (N final episodes per seed).
- **Final greedy**: the same policy with noise off (the mode action); this is what would be deployed.
- *V* (share of episodes over the bound), *Dnorm* ((C - d) / d) and *Dnorm+* (mean (c - d) / d over
  violating episodes) are comparable across tasks and bounds; *R* and *C* are not.
- A tier that drops from the noise column to the greedy column means training-time safety did not carry
  over to deployment.
""" + BOLD_NOTE

PRODUCT = Product(
    kind=TABLE, category=FINAL, shared=("baseline", "decimals", "bold"), paper="Table A.2",
    caption=CAPTION, inputs=inputs, build=build)
