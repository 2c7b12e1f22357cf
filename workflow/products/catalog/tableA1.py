"""Table A.1: the hyperparameters every run recorded in its run.json."""
from workflow.products.registry import Product, SETUP, TABLE


def inputs(files, wildcards):
    return {"runs": files.runs("run.json")}


def build(inputs, outputs, settings, wildcards):
    from workflow.products import setup_tables
    from workflow.products.sweep_io import save

    return save(setup_tables.table_a1(setup_tables.read_run_configs(inputs["runs"])), outputs)


CAPTION = """
**Table A.1: hyperparameters**, as every run recorded them in its ``run.json`` (one column per algorithm).
Runs of one algorithm must agree on every value; if they do not, building this table fails and names two runs
that differ.

- "-": the scalar belongs to another algorithm. Rows "task: option" are task options (they may differ
  between tasks). Run identity (task, bound, algorithm, seed) and execution settings (checkpoint interval,
  updates per compiled call) are left out: they do not change a run's result.
"""

PRODUCT = Product(
    kind=TABLE, category=SETUP, paper="Table A.1",
    caption=CAPTION, inputs=inputs, build=build)
