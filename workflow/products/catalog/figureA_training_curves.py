"""Figures A.3 onwards: one task's return and cost training curves per bound."""
from workflow.products.registry import FIGURE, Product, TRAINING
from workflow.products.outputs import save_figure
from workflow.products.sweep_io import apply_settings


def inputs(files, wildcards):
    return {"summaries": files.runs("summary.parquet", task=wildcards["task"]),
            "traces": files.runs("trace.parquet", task=wildcards["task"])}


def check(settings):
    window = settings["smoothing_window"]
    if isinstance(window, bool) or not isinstance(window, int) or window < 1:
        raise ValueError(f"config products.smoothing_window: expected an integer >= 1, got {window!r}")


def build(inputs, outputs, settings, wildcards):
    from workflow.products import fig_training
    from workflow.products.sweep_io import RUN_KEYS, read_summaries, read_traces

    apply_settings(settings)
    summary = read_summaries(inputs["summaries"])
    iterates = summary.iterates[summary.iterates["phase"] == "train"]
    if inputs.get("traces"):
        steps = read_traces(inputs["traces"])
        if "env_steps" in steps.columns:
            iterates = iterates.merge(steps[RUN_KEYS + ["iteration", "env_steps"]], on=RUN_KEYS + ["iteration"],
                                      how="left", validate="one_to_one")
            if iterates["env_steps"].isna().any():  # a trace without some iterate: fall back to iterates
                iterates = iterates.drop(columns="env_steps")
    fig = fig_training.figure_training_curves(iterates, task=wildcards["task"], window=settings["smoothing_window"])
    save_figure(fig, outputs, settings)


CAPTION = """
**Training curves on {{ snakemake.wildcards.task }}** (Figures A.3 onwards, one per task): episode return
*R* (top) and episode cost *C* (bottom) of each logged iterate during **training** (exploration noise on),
one column per bound d.

- Each seed's curve is smoothed with a trailing moving average over {{ snakemake.params.settings["smoothing_window"] }}
  iterates; lines show the mean over seeds and shading +- 1 sample standard deviation over seeds.
- *R*: mean undiscounted return of the iterate's episodes; *C*: their mean cost (sum of per-step costs).
- The dashed line on the cost panels is the bound d: a curve above it is unsafe on average at that point.
"""

PRODUCT = Product(
    kind=FIGURE, category=TRAINING, stem="figureA_curves_{task}", settings={"smoothing_window": 5}, check=check,
    paper="Figures A.3-A.6",
    caption=CAPTION, inputs=inputs, build=build)
