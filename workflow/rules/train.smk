# Stage 0: one training job per task x bound x algorithm x seed.
#
# Only values that change a run's result are params (Snakemake reruns a job whose params
# changed): the trainer options of the config. Threads, runtime and test switches are
# not. A run that stops early (time limit, SIGTERM/SIGUSR2 -> exit 75) leaves
# DIR/checkpoint/ behind; the retry or the next invocation resumes from there.


from workflow.train_job import trainer_options

TRAINER_OPTIONS = trainer_options(CFG)


rule train:
    output:
        episodes=RUN_DIR + "/episodes.parquet",
        trace=RUN_DIR + "/trace.parquet",
        run=RUN_DIR + "/run.json",
    params:
        options=TRAINER_OPTIONS,
    log:
        LOGS_DIR + "/train/{task}/d{bound}/{algo}/seed{seed}.log",
    threads: CFG["train"].get("threads", 1)
    resources:
        runtime=30,
        mem_mb=4000,
    shell:
        "python -m workflow.train_job --task {wildcards.task} --bound {wildcards.bound}"
        " --algo {wildcards.algo} --seed {wildcards.seed} --out $(dirname {output.run})"
        " {params.options} >> {log} 2>&1"


rule runs:
    """Train every run of the grid, nothing else."""
    input:
        all_runs("run.json"),
