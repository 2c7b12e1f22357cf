# Stages 1-3 of the evaluation engine (python -m metrics, docs/metrics.md):
#   summarise (per run) -> aggregate + stratified bootstrap (threshold-free) -> tiers.
# Thresholds are a param of `write_thresholds` only, so changing one reruns that rule,
# `tiers` and what reads tiers.csv / conditions.csv - never training or aggregation.


# summarise: one job per pack (all its runs, finished earlier or not), in the controller
# (localrule); a retrained run re-summarises its pack-mates too, which costs milliseconds each.
# One rule per pack, like the training rules (train.smk says why).
for _pack in PACKS:

    rule:
        name: f"summarise_{_pack.name}"
        localrule: True
        input:
            episodes=[f"{RUNS_ROOT}/{run}/{run_layout.EPISODES}" for run in _pack.runs],
            runs=[f"{RUNS_ROOT}/{run}/{run_layout.RUN_JSON}" for run in _pack.runs],
        output:
            [f"{RUNS_ROOT}/{run}/{run_layout.SUMMARY}" for run in _pack.runs],
        log:
            f"{LOGS_DIR}/summarise/{_pack.name}.log",
        script:
            "../scripts/summarise_pack.py"


rule aggregate:
    input:
        lambda wildcards: all_runs("summary.parquet"),
    output:
        **AGGREGATE_FILES,
    params:
        reps=CFG["bootstrap"]["reps"],
        seed=CFG["bootstrap"]["seed"],
        out=lambda wildcards, output: os.path.dirname(output.iqm),
    log:
        f"{LOGS_DIR}/aggregate.log",
    threads: 1
    shell:
        "python -m metrics aggregate {input} --out {params.out}"
        " --reps {params.reps} --seed {params.seed} > {log} 2>&1"


rule write_thresholds:
    localrule: True
    output:
        THRESHOLDS_FILE,
    params:
        thresholds=CFG["thresholds"],
    log:
        f"{LOGS_DIR}/write_thresholds.log",
    script:
        "../scripts/write_thresholds.py"


rule tiers:
    localrule: True
    input:
        AGGREGATE_FILES.values(),
        thresholds=THRESHOLDS_FILE,
    output:
        **TIER_FILES,
    params:
        dir=lambda wildcards, input: os.path.dirname(input.thresholds),
    log:
        f"{LOGS_DIR}/tiers.log",
    shell:
        "python -m metrics tiers {params.dir} --thresholds {input.thresholds} > {log} 2>&1"


rule metrics:
    """Every threshold-free and threshold-dependent metric file, no tables or figures."""
    localrule: True
    input:
        lambda wildcards: all_runs("summary.parquet"),
        AGGREGATE_FILES.values(),
        TIER_FILES.values(),
        STALE_FLAGS.values(),
