"""Figures A.7 onwards: one task's final episode costs, noise vs greedy, per bound."""
from workflow.products.registry import FIGURE, FINAL, Product
from workflow.products.outputs import save_figure
from workflow.products.sweep_io import apply_settings


def inputs(files, wildcards):
    return {"final_episodes": files.aggregate["final_episodes"], "condition_stats": files.aggregate["condition_stats"]}


def build(inputs, outputs, settings, wildcards):
    """The task's final episodes (final_episodes.parquet) and the engine's per-condition
    means and stds over seeds (condition_stats.parquet)."""
    import pandas as pd

    from workflow.products import fig_final

    task = wildcards["task"]
    apply_settings(settings)
    stats = pd.read_parquet(inputs["condition_stats"])
    fig = fig_final.figure_final_costs(pd.read_parquet(inputs["final_episodes"]), stats[stats["task"] == task],
                                       task=task)
    save_figure(fig, outputs, settings)


CAPTION = """
**Final episode costs on {{ snakemake.wildcards.task }}, with exploration noise vs greedy** (Figures A.7
onwards, one per task), one panel per bound d.

- Per algorithm, a box of all seeds' final episode costs **with noise** (hatched, open) beside the same
  policies run **greedily** (filled); whiskers 1.5 IQR, dots beyond them single episodes.
- The marker with error bar on each box: the mean over seeds of each seed's mean episode cost *C*, +- 1 sample
  standard deviation over seeds (the spread between seeds, not between episodes).
- Above each box: the violation rate *V* in percent (per seed the share of final episodes whose cost exceeds d,
  averaged over seeds) and *D+* = *Dnorm+* (per seed the mean (c - d) / d over its violating episodes, 0 when
  none, averaged over seeds). The dashed line is the bound d.
"""

PRODUCT = Product(
    kind=FIGURE, category=FINAL, stem="figureA_final_{task}", paper="Figures A.7-A.10",
    caption=CAPTION, inputs=inputs, build=build)
