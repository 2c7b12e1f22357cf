# The sweep's report: one self-contained HTML page with the configuration, the tiers,
# the IQM table and every table and figure other rule files export in PRODUCT_TARGETS.


rule report:
    input:
        iqm=AGGREGATE_FILES["iqm"],
        tiers=TIER_FILES["tiers"],
        conditions=TIER_FILES["conditions"],
        products=lambda wildcards: PRODUCT_TARGETS,
    output:
        REPORT,
    params:
        config=CFG,
    log:
        LOGS_DIR + "/report.log",
    run:
        from workflow.report import write_report

        write_report(output[0], config=params.config, iqm=input.iqm, tiers=input.tiers,
                     conditions=input.conditions, products=list(input.products))
