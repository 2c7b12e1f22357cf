"""Figure 1: one run's final episode costs, with exploration noise and greedy.

The run is the one `products.figure1` names, else the sweep's run whose final policy's
violation rate V differs most between noise and greedy (the paper's point: the two phases
can disagree). Ties go to a constrained algorithm, then to the task table's order, the
smallest bound, the algorithm order and the lowest seed, so the choice is reproducible.
"""
from workflow.products.registry import FIGURE, FINAL, Product
from workflow.products.settings import positive_number
from workflow.products.outputs import save_figure
from workflow.products.sweep_io import RUN_KEYS, apply_settings


def inputs(files, wildcards):
    return {"run_metrics": files.aggregate["run_metrics"], "final_episodes": files.aggregate["final_episodes"]}


def check(settings):
    run = settings["figure1"]
    if run is None:
        return
    if not isinstance(run, dict) or sorted(run) != sorted(RUN_KEYS):
        raise ValueError(f"config products.figure1: expected null or a mapping with keys {RUN_KEYS}, got {run!r}")
    positive_number(float(run["bound"]), "figure1.bound")


def choose_run(run_metrics, named, baseline) -> tuple[dict, str]:
    """(run, why): the run to draw and a line saying why it was chosen."""
    from metrics.schema import FINAL_PHASES

    from workflow.products.style import ordered_algos, ordered_tasks

    v = run_metrics[run_metrics["phase"].isin(FINAL_PHASES)].pivot_table(
        index=RUN_KEYS, columns="phase", values="V").dropna().reset_index()
    if v.empty:
        raise ValueError("figure 1: no run has both final phases in run_metrics.parquet")
    if named is not None:
        want = {**named, "bound": float(named["bound"]), "seed": int(named["seed"])}
        hit = v[(v[RUN_KEYS] == [want[k] for k in RUN_KEYS]).all(axis=1)]
        if hit.empty:
            raise ValueError(f"config products.figure1: the sweep has no run {want}")
        return want, "the run products.figure1 names"
    explore, greedy = FINAL_PHASES
    v["gap"] = (v[explore] - v[greedy]).abs()
    tasks, algos = ordered_tasks(v["task"].unique()), ordered_algos(v["algo"].unique())
    v["rank"] = [(-gap, algo == baseline, tasks.index(task), bound, algos.index(algo), seed)
                 for gap, task, bound, algo, seed in v[["gap"] + RUN_KEYS].itertuples(index=False)]
    best = v.sort_values("rank").iloc[0]
    run = {"task": best["task"], "bound": float(best["bound"]), "algo": best["algo"], "seed": int(best["seed"])}
    return run, f"largest |V with noise - V greedy| of the sweep: {100 * best['gap']:.0f} points"


def build(inputs, outputs, settings, wildcards):
    """Figure 1 from the engine's per-run metrics (V per phase) and final episodes."""
    import pandas as pd
    from metrics.schema import FINAL_PHASES

    from workflow.products import fig_final

    run_metrics = pd.read_parquet(inputs["run_metrics"])
    run, why = choose_run(run_metrics, settings["figure1"], settings["baseline"])
    episodes = pd.read_parquet(inputs["final_episodes"])
    costs = episodes[(episodes[RUN_KEYS] == [run[k] for k in RUN_KEYS]).all(axis=1)]
    mine = run_metrics[(run_metrics[RUN_KEYS] == [run[k] for k in RUN_KEYS]).all(axis=1)].set_index("phase")
    violation = {phase: float(mine.loc[phase, "V"]) for phase in FINAL_PHASES}
    apply_settings(settings)
    fig = fig_final.figure1(costs, violation, task=run["task"], bound=run["bound"], algo=run["algo"],
                            seed=run["seed"], why=why)
    save_figure(fig, outputs, settings)
    return run


CAPTION = """
**Figure 1: one run's final episode costs, with exploration noise and greedy.** The run (named in the
title) is {% if snakemake.params.settings["figure1"] %}the one config ``products.figure1`` names{% else %}the
sweep's run whose violation rate *V* differs most between the two final phases, since that is what the figure
is for: the same policy can be safe with noise and unsafe greedy, or the other way round (the title gives the
gap; ties go to a constrained algorithm, then the first task, bound, algorithm and seed). Config
``products.figure1: {task, bound, algo, seed}`` names another{% endif %}.

- Each marker is one final evaluation episode's cost (sum of per-step costs); the dashed line is the bound d.
- **Final with noise** (open circles) samples actions as in training; **final greedy** (grey triangles) takes the mode action.
- The legend gives each phase's violation rate *V*: the share of its episodes whose cost exceeds d.
"""

PRODUCT = Product(
    kind=FIGURE, category=FINAL, settings={"figure1": None}, shared=("baseline",), check=check, paper="Figure 1",
    caption=CAPTION, inputs=inputs, build=build)
