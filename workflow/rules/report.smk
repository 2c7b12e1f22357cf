# The sweep's report: one self-contained HTML page with the paper's findings checked on the
# sweep (metrics.findings), Table 2, Figures 1 and 2, then every other table and figure other
# rule files export in PRODUCT_TARGETS, each once (workflow/report.py). Runs in the controller.


rule report:
    localrule: True
    input:
        iqm=AGGREGATE_FILES["iqm"],
        tiers=TIER_FILES["tiers"],
        conditions=TIER_FILES["conditions"],
        run_metrics=AGGREGATE_FILES["run_metrics"],
        thresholds=THRESHOLDS_FILE,
        products=lambda wildcards: PRODUCT_TARGETS,
    output:
        REPORT,
    params:
        config=CFG,
        baseline=PRODUCT_SETTINGS["baseline"],
        settings=PRODUCT_SETTINGS,  # the captions and Table 2 read them
    log:
        f"{LOGS_DIR}/report.log",
    script:
        "../scripts/sweep_report.py"
