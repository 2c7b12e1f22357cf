# Tables of the paper (issue 6): one rule and one script each, outputs
# results/tables/{name}.{csv,md,tex,html} (CSV holds the unrounded numbers; the HTML copy is
# what `snakemake --report` shows). Table settings (baseline excluded from bolding, decimals)
# are params of these rules only.
from workflow.products import settings as _product_settings

if "PRODUCT_TARGETS" not in globals():
    PRODUCT_TARGETS = []
if "PRODUCT_SETTINGS" not in globals():
    PRODUCT_SETTINGS = _product_settings.resolve(CFG.get("products"))

TABLE_FORMATS = ("csv", "md", "tex", "html")

# The report's front page (metrics and phases in a paragraph), unless the Snakefile sets its own.
if workflow.report_text is None:
    workflow.report("../report/workflow.rst")


def table_outputs(name, caption, category, **report_kw):
    """Named outputs csv, md, tex, html; the HTML one goes into the report."""
    out = {ext: f"{TABLES_DIR}/{name}.{ext}" for ext in TABLE_FORMATS}
    out["html"] = report(out["html"], caption=f"../report/{caption}.rst", category=category, **report_kw)
    return out


def table_settings():
    return {k: PRODUCT_SETTINGS[k] for k in ("baseline", "decimals")}


PRODUCT_TARGETS += [f"{TABLES_DIR}/{name}.{ext}" for name in ("table2", "tableA2", "tableA3")
                    for ext in TABLE_FORMATS]
PRODUCT_TARGETS += [f"{TABLES_DIR}/tableA_task_{task}.{ext}" for task in TASKS for ext in TABLE_FORMATS]


rule table2:
    input:
        iqm=AGGREGATE_FILES["iqm"],
        tiers=TIER_FILES["tiers"],
    output:
        **table_outputs("table2", "table2", "Training, final with noise, final greedy"),
    params:
        settings=table_settings(),
    script:
        "../scripts/table_2.py"


rule tableA2:
    input:
        iqm=AGGREGATE_FILES["iqm"],
        tiers=TIER_FILES["tiers"],
    output:
        **table_outputs("tableA2", "tableA2", "Final policy: with noise vs greedy"),
    params:
        settings=table_settings(),
    script:
        "../scripts/table_A2.py"


rule tableA3:
    input:
        iqm=AGGREGATE_FILES["iqm"],
        tiers=TIER_FILES["tiers"],
    output:
        **table_outputs("tableA3", "tableA3", "Training, final with noise, final greedy"),
    params:
        settings=table_settings(),
    script:
        "../scripts/table_A3.py"


rule tableA_task:
    input:
        conditions=TIER_FILES["conditions"],
    output:
        **table_outputs("tableA_task_{task}", "tableA_task", "Training, final with noise, final greedy",
                        subcategory="{task}"),
    params:
        settings={"decimals": PRODUCT_SETTINGS["decimals"]},
    script:
        "../scripts/table_task.py"
