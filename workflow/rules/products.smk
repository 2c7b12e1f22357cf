# Tables and figures: one rule per entry of the product table (workflow/products/registry.py),
# all running workflow/scripts/product.py. Outputs: results/figures/{stem}.{pdf,png} and
# results/tables/{stem}.{csv,md,tex,html}; the PNG / HTML copy goes into Snakemake's report
# with the entry's caption (workflow/report/{caption}.rst) and category. Settings (config
# `products`, defaults in workflow/products/settings.py) are params of these rules only, so
# changing one reruns only the products that use it. Uses common.smk's names.
from workflow.products import registry as _registry
from workflow.products import settings as _product_settings

PRODUCT_SETTINGS = _product_settings.resolve(CFG.get("products"))
PRODUCT_DIRS = {_registry.FIGURE: FIGURES_DIR, _registry.TABLE: TABLES_DIR}

_figure1_run = _product_settings.figure1_run(PRODUCT_SETTINGS, TASKS, CFG["bounds"], ALGOS, SEEDS)
SWEEP_FILES = _registry.SweepFiles(
    aggregate=AGGREGATE_FILES, tiers=TIER_FILES, thresholds=THRESHOLDS_FILE,
    runs=lambda name, task=None: [run_path(name, **r) for r in selected_run_ids() if task is None or r["task"] == task],
    run_file=run_path, figure1_run={**_figure1_run, "bound_label": bound_label(_figure1_run["bound"])})

PRODUCT_TARGETS += _registry.targets(PRODUCT_DIRS, TASKS)

# The report's front page (metrics and phases in a paragraph), unless the Snakefile sets its own.
if workflow.report_text is None:
    workflow.report("../report/workflow.rst")


def _product_outputs(product):
    """The product's outputs, its report copy flagged with caption and category."""
    wildcards = {"task": "{task}"} if product.per_task else {}
    paths = product.outputs(PRODUCT_DIRS[product.kind], **wildcards)
    shown = _registry.REPORT_FORMAT[product.kind]
    flag = lambda path: report(path, caption=f"../report/{product.caption}.rst", category=product.category,
                               **({"subcategory": "{task}"} if product.per_task else {}))
    if isinstance(paths, dict):
        return {ext: flag(path) if ext == shown else path for ext, path in paths.items()}
    return {ext: flag(path) if ext == shown else path for ext, path in zip(_registry.FORMATS[product.kind], paths)}


for _product in _registry.PRODUCTS:

    rule:
        name: _product.name
        input:
            unpack(lambda wildcards, p=_product: p.inputs(SWEEP_FILES, dict(wildcards.items()))),
        output:
            **_product_outputs(_product),
        params:
            product=_product.name,
            settings=_product.settings_of(PRODUCT_SETTINGS),
            **(_product.run_params(SWEEP_FILES) if _product.run_params else {}),
        script:
            "../scripts/product.py"
