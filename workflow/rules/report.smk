# The sweep's report: one self-contained HTML page with the paper's findings checked on the
# sweep (metrics.findings), the configuration, the tiers, the IQM table and every table and
# figure other rule files export in PRODUCT_TARGETS.


rule report:
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
    log:
        LOGS_DIR + "/report.log",
    run:
        import pandas as pd

        from metrics.findings import findings
        from metrics.safe_text import read_csv
        from metrics.thresholds import load_thresholds
        from workflow.report import write_report

        found = findings(read_csv(input.tiers), pd.read_parquet(input.run_metrics), read_csv(input.iqm),
                         load_thresholds(input.thresholds), unconstrained=[params.baseline],
                         reps=params.config["bootstrap"]["reps"], seed=params.config["bootstrap"]["seed"])
        write_report(output[0], config=params.config, iqm=input.iqm, tiers=input.tiers,
                     conditions=input.conditions, products=list(input.products), findings=found)
