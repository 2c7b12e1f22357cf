"""Figure A.2: each algorithm's multiplier over training, per task and bound."""
from workflow.products.registry import FIGURE, Product, TRAINING
from workflow.products.outputs import save_figure
from workflow.products.sweep_io import apply_settings


YSCALES = ("linear", "log", "symlog")


def inputs(files, wildcards):
    return {"traces": files.runs("trace.parquet")}


def check(settings):
    if settings["multiplier_yscale"] not in YSCALES:
        raise ValueError(f"config products.multiplier_yscale: expected linear, log or symlog, "
                         f"got {settings['multiplier_yscale']!r}")


def build(inputs, outputs, settings, wildcards):
    from workflow.products import fig_training
    from workflow.products.sweep_io import read_traces

    apply_settings(settings)
    save_figure(fig_training.figure_multipliers(read_traces(inputs["traces"]), yscale=settings["multiplier_yscale"]),
                outputs, settings)


CAPTION = """
**Figure A.2: the constraint multiplier over training, per bound** (rows: tasks; columns: the algorithms
that have a multiplier). The first column is the paper's figure, PPO-Lag's Lagrange multiplier lambda; P3O's
penalty factor kappa and FOCOPS's cost weight nu are different quantities, so each has its own column and axis,
labelled with what the algorithm table (algos/registry.py) says that algorithm's multiplier column holds.

- One curve per bound d (darker: smaller, stricter bound) at each logged iterate: the mean over seeds;
  shading: +- 1 sample standard deviation over seeds.
- A Lagrange-type multiplier is a unitless weight on the cost term; one that keeps growing means the policy is
  still over its bound. The y scale is ``{{ snakemake.params.settings["multiplier_yscale"] }}`` (``products.multiplier_yscale``).
"""

PRODUCT = Product(
    kind=FIGURE, category=TRAINING, stem="figureA2", settings={"multiplier_yscale": "linear"}, check=check,
    paper="Figure A.2",
    caption=CAPTION, inputs=inputs, build=build)
