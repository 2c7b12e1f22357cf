# Tables and figures: one rule per module of the product table (workflow/products/catalog/,
# read by workflow/products/registry.py), all running workflow/scripts/product.py. Outputs:
# results/figures/{stem}.{pdf,png} and results/tables/{stem}.{csv,md,tex,html}; the PNG / HTML
# copy goes into Snakemake's report with the module's caption and category. Settings (config
# `products`: shared ones in workflow/products/settings.py, the rest declared by the modules)
# are params of these rules only, so changing one reruns only the products that use it.
# Uses common.smk's names.
import atexit
import shutil
import tempfile

from workflow.products import registry as _registry
from workflow.products import settings as _product_settings

PRODUCT_SETTINGS = _product_settings.resolve(CFG.get("products"))
PRODUCT_DIRS = {_registry.FIGURE: FIGURES_DIR, _registry.TABLE: TABLES_DIR}

SWEEP_FILES = _registry.SweepFiles(
    aggregate=AGGREGATE_FILES, tiers=TIER_FILES, thresholds=THRESHOLDS_FILE,
    runs=lambda name, task=None: [run_path(name, **r) for r in selected_run_ids() if task is None or r["task"] == task],
    preset=str(CFG.get("preset") or ""))

PRODUCT_TARGETS += _registry.targets(PRODUCT_DIRS, TASKS)

# The captions live in the modules; Snakemake's report reads them as files, written for this
# run of Snakemake only (the report is built in the process that read the workflow).
_CAPTION_DIR = tempfile.mkdtemp(prefix="saferl-captions-")
atexit.register(shutil.rmtree, _CAPTION_DIR, True)
_CAPTIONS = _registry.write_captions(_CAPTION_DIR)

# The report's front page (metrics and phases in a paragraph), unless the Snakefile sets its own.
if workflow.report_text is None:
    workflow.report("../report/workflow.rst")


def _product_outputs(product):
    """The product's outputs by format, its report copy flagged with caption and category."""
    paths = product.outputs(PRODUCT_DIRS[product.kind], **({"task": "{task}"} if product.per_task else {}))
    paths = paths if isinstance(paths, dict) else dict(zip(_registry.FORMATS[product.kind], paths))
    shown = _registry.REPORT_FORMAT[product.kind]
    flag = lambda path: report(path, caption=_CAPTIONS[product.name], category=product.category,
                               **({"subcategory": "{task}"} if product.per_task else {}))
    return {ext: flag(path) if ext == shown else path for ext, path in paths.items()}


for _product in _registry.products():

    rule:
        name: _product.name
        input:
            unpack(lambda wildcards, p=_product: p.inputs(SWEEP_FILES, dict(wildcards.items()))),
        output:
            **_product_outputs(_product),
        params:
            product=_product.name,
            settings=_product.settings_of(PRODUCT_SETTINGS),
        script:
            "../scripts/product.py"
