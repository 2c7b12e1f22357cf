# Stages 1-3 of the evaluation engine (python -m metrics, docs/metrics.md):
#   summarise (per run) -> aggregate + stratified bootstrap (threshold-free) -> tiers.
# Thresholds are a param of `write_thresholds` only, so changing one reruns that rule,
# `tiers` and what reads tiers.csv / conditions.csv - never training or aggregation.


# summarise: one job per pack (all its runs, finished earlier or not), in a thread of the
# controller (the profiles' force-use-threads: no Snakemake start-up per job); a retrained run
# re-summarises its pack-mates too, which costs milliseconds each.
SUMMARISE_RULES = []

for _pack in PACKS:
    _name = f"summarise_{_pack.name}"
    SUMMARISE_RULES.append(_name)

    rule:
        name: _name
        input:
            episodes=[f"{RUNS_ROOT}/{run}/{run_layout.EPISODES}" for run in _pack.runs],
            runs=[f"{RUNS_ROOT}/{run}/{run_layout.RUN_JSON}" for run in _pack.runs],
        output:
            [f"{RUNS_ROOT}/{run}/{run_layout.SUMMARY}" for run in _pack.runs],
        log:
            f"{LOGS_DIR}/summarise/{_pack.name}.log",
        run:
            from metrics.summary import summarise, write_summary

            for episodes, summary in zip(input.episodes, output):
                packs.verify_for_summary(os.path.dirname(episodes))
                write_summary(summarise(episodes), summary)


rule aggregate:
    input:
        lambda wildcards: all_runs("summary.parquet"),
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
        lambda wildcards: all_runs("summary.parquet"),
        AGGREGATE_FILES.values(),
        TIER_FILES.values(),
        STALE_FLAGS.values(),
