# Stages 1-3 of the evaluation engine (python -m metrics, docs/metrics.md):
#   summarise (per run) -> aggregate + stratified bootstrap (threshold-free) -> tiers.
# Thresholds are a param of `write_thresholds` only, so changing one reruns that rule,
# `tiers` and what reads tiers.csv / conditions.csv - never training or aggregation.


# summarise runs in a warm worker on one machine (workflow.warm: pandas and pyarrow already
# imported), as `python -m metrics summarise` in the job's own process inside SLURM jobs.
rule summarise:
    input:
        episodes=RUN_DIR + "/" + runfolder.EPISODES,
        run=RUN_DIR + "/" + runfolder.RUN_JSON,
    output:
        RUN_DIR + "/" + runfolder.SUMMARY,
    log:
        LOGS_DIR + "/summarise/{task}/d{bound}/{algo}/seed{seed}.log",
    shell:
        "python -m workflow.warm metrics summarise {input.episodes} --out {output} > {log} 2>&1"


rule aggregate:
    input:
        all_runs("summary.parquet"),
    output:
        **AGGREGATE_FILES,
    params:
        reps=CFG["bootstrap"]["reps"],
        seed=CFG["bootstrap"]["seed"],
        out=METRICS_DIR,
    log:
        LOGS_DIR + "/aggregate.log",
    threads: 1
    shell:
        "python -m metrics aggregate {input} --out {params.out}"
        " --reps {params.reps} --seed {params.seed} > {log} 2>&1"


rule write_thresholds:
    output:
        THRESHOLDS_FILE,
    params:
        thresholds=CFG["thresholds"],
    run:
        import yaml

        from metrics.atomic import write_text

        write_text(output[0], yaml.safe_dump(dict(params.thresholds), sort_keys=False))


rule tiers:
    input:
        AGGREGATE_FILES.values(),
        thresholds=THRESHOLDS_FILE,
    output:
        **TIER_FILES,
    params:
        dir=METRICS_DIR,
    log:
        LOGS_DIR + "/tiers.log",
    shell:
        "python -m metrics tiers {params.dir} --thresholds {input.thresholds} > {log} 2>&1"


rule metrics:
    """Every threshold-free and threshold-dependent metric file, no tables or figures."""
    input:
        all_runs("summary.parquet"),
        AGGREGATE_FILES.values(),
        TIER_FILES.values(),
