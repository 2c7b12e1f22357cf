# Figures of the paper (issue 6; PAPER.md's last section): one rule and one script each,
# outputs results/figures/{name}.{pdf,png}. Plot settings (config `products`, defaults in
# workflow/products/settings.py) are params of these rules only, so changing one reruns
# only the figures that use it. Uses the names common.smk defines (CFG, RUN_IDS, ...).
from workflow.products import settings as _product_settings

if "PRODUCT_TARGETS" not in globals():
    PRODUCT_TARGETS = []
if "PRODUCT_SETTINGS" not in globals():
    PRODUCT_SETTINGS = _product_settings.resolve(CFG.get("products"))


def product_params(*keys):
    """The settings a product uses: always font size and dpi, plus the given keys."""
    return {k: PRODUCT_SETTINGS[k] for k in ("font_size", "dpi") + keys}


def figure_paths(name):
    return [f"{FIGURES_DIR}/{name}.pdf", f"{FIGURES_DIR}/{name}.png"]


def task_runs(name, task):
    return [run_path(name, **r) for r in RUN_IDS if r["task"] == task]


FIGURE1_RUN = _product_settings.figure1_run(PRODUCT_SETTINGS, TASKS, CFG["bounds"], ALGOS, SEEDS)
FIGURE1_RUN["bound_label"] = bound_label(FIGURE1_RUN["bound"])
_FIG_CAPTION = "../report/{}.rst"
_ALL_PHASES = "Training, final with noise, final greedy"
_TRAINING = "Training (with exploration noise)"
_FINAL = "Final policy: with noise vs greedy"

PRODUCT_TARGETS += figure_paths("figure1") + figure_paths("figure2") + figure_paths("figureA1")
PRODUCT_TARGETS += figure_paths("figureA2") + figure_paths("figure_tier_sensitivity")
PRODUCT_TARGETS += [p for task in TASKS for p in figure_paths(f"figureA_curves_{task}")]
PRODUCT_TARGETS += [p for task in TASKS for p in figure_paths(f"figureA_final_{task}")]


rule figure1:
    input:
        summary=run_path("summary.parquet", task=FIGURE1_RUN["task"], bound=FIGURE1_RUN["bound_label"],
                         algo=FIGURE1_RUN["algo"], seed=FIGURE1_RUN["seed"]),
    output:
        FIGURES_DIR + "/figure1.pdf",
        report(FIGURES_DIR + "/figure1.png", caption=_FIG_CAPTION.format("figure1"), category=_FINAL),
    params:
        settings=product_params(),
        run={k: FIGURE1_RUN[k] for k in ("task", "bound", "algo", "seed")},
    script:
        "../scripts/fig_1.py"


rule figureA2_multipliers:
    input:
        traces=all_runs("trace.parquet"),
    output:
        FIGURES_DIR + "/figureA2.pdf",
        report(FIGURES_DIR + "/figureA2.png", caption=_FIG_CAPTION.format("figureA2"), category=_TRAINING),
    params:
        settings=product_params("multiplier_yscale"),
    script:
        "../scripts/fig_A2_multipliers.py"


rule figureA_training_curves:
    input:
        summaries=lambda w: task_runs("summary.parquet", w.task),
        traces=lambda w: task_runs("trace.parquet", w.task),
    output:
        FIGURES_DIR + "/figureA_curves_{task}.pdf",
        report(FIGURES_DIR + "/figureA_curves_{task}.png", caption=_FIG_CAPTION.format("figureA_curves"),
               category=_TRAINING, subcategory="{task}"),
    params:
        settings=product_params("smoothing_window"),
    script:
        "../scripts/fig_training_curves.py"


rule figureA_final_costs:
    input:
        summaries=lambda w: task_runs("summary.parquet", w.task),
    output:
        FIGURES_DIR + "/figureA_final_{task}.pdf",
        report(FIGURES_DIR + "/figureA_final_{task}.png", caption=_FIG_CAPTION.format("figureA_final"),
               category=_FINAL, subcategory="{task}"),
    params:
        settings=product_params(),
    script:
        "../scripts/fig_final_costs.py"


rule figure2:
    input:
        cdf=AGGREGATE_FILES["cdf"],
    output:
        FIGURES_DIR + "/figure2.pdf",
        report(FIGURES_DIR + "/figure2.png", caption=_FIG_CAPTION.format("figure2"), category=_ALL_PHASES),
    params:
        settings={**product_params(), "cdf_xmax": {"figure2": PRODUCT_SETTINGS["cdf_xmax"]["figure2"]}},
    script:
        "../scripts/fig_2.py"


rule figureA1:
    input:
        cdf=AGGREGATE_FILES["cdf"],
    output:
        FIGURES_DIR + "/figureA1.pdf",
        report(FIGURES_DIR + "/figureA1.png", caption=_FIG_CAPTION.format("figureA1"), category=_ALL_PHASES),
    params:
        settings={**product_params(), "cdf_xmax": {"figureA1": PRODUCT_SETTINGS["cdf_xmax"]["figureA1"]}},
    script:
        "../scripts/fig_A1.py"


rule figure_tier_sensitivity:
    input:
        iqm=AGGREGATE_FILES["iqm"],
        bootstrap=AGGREGATE_FILES["bootstrap"],
    output:
        FIGURES_DIR + "/figure_tier_sensitivity.pdf",
        report(FIGURES_DIR + "/figure_tier_sensitivity.png", caption=_FIG_CAPTION.format("figure_tier_sensitivity"),
               category=_ALL_PHASES),
    params:
        settings=product_params("sensitivity"),
        thresholds=CFG["thresholds"],
    script:
        "../scripts/fig_tier_sensitivity.py"
