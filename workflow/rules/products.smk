# Tables and figures: one rule per module of the product table (workflow/products/catalog/,
# read by workflow/products/registry.py), all running workflow/scripts/product.py, in the
# controller. Outputs: results/figures/{stem}.{pdf,png} and results/tables/{stem}.{csv,md,tex,html};
# the PNG / HTML copy goes into Snakemake's report with the module's caption and category.
# Settings (config `products`: shared ones in workflow/products/settings.py, the rest declared
# by the modules) are params of these rules only, so changing one reruns only the products
# that use it. Uses common.smk's names.
from workflow.products import settings as _product_settings

PRODUCT_SETTINGS = _product_settings.resolve(CFG.get("products"))
PRODUCT_DIRS = {product_registry.FIGURE: FIGURES_DIR, product_registry.TABLE: TABLES_DIR}

SWEEP_FILES = product_registry.SweepFiles(
    aggregate=AGGREGATE_FILES, tiers=TIER_FILES, thresholds=THRESHOLDS_FILE,
    runs=lambda name, task=None: [run_path(name, **r) for r in selected_run_ids() if task is None or r["task"] == task],
    preset=str(CFG.get("preset") or ""))

PRODUCT_TARGETS += product_registry.targets(PRODUCT_DIRS, TASKS)

# The captions live in the modules; Snakemake's report reads them as files, which a real run
# writes into the sweep's folder when it starts (the Snakefile's onstart: CAPTIONS_DIR/{name}.rst),
# so `snakemake --report` after a run finds them. Reading the workflow writes nothing.
CAPTIONS_DIR = f"{RESULTS_DIR}/captions"

# The report's front page (metrics and phases in a paragraph), unless the Snakefile sets its own.
if workflow.report_text is None:
    workflow.report("../report/workflow.rst")


for _product in product_registry.products():

    rule:
        name: _product.name
        localrule: True
        input:
            unpack(lambda wildcards, p=_product: p.inputs(SWEEP_FILES, dict(wildcards.items()))),
        output:
            **product_outputs(_product, PRODUCT_DIRS, CAPTIONS_DIR),
        params:
            product=_product.name,
            settings=_product.settings_of(PRODUCT_SETTINGS),
        log:
            f"{LOGS_DIR}/products/{_product.name}{'.{task}' if _product.per_task else ''}.log",
        script:
            "../scripts/product.py"
