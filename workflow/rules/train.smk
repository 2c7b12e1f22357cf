# Stage 0: one training job per task x bound x algorithm x seed.
#
# Only values that change a run's result are params (Snakemake reruns a job whose params
# changed): the trainer options of the config. Threads, runtime and test switches are
# not. A run that stops early (time limit, SIGTERM/SIGUSR2 -> exit 75) leaves
# DIR/checkpoint/ behind; the retry or the next invocation resumes from there.
# Resources (runtime, memory, GPUs) are set by the profiles in cluster_profiles/, not here.
# `train_attempt` is not a resource to schedule by: it tells the job which attempt it is, so
# a retry after a deterministic failure stops at once (workflow.train_job).


from workflow.train_job import trainer_options

TRAINER_OPTIONS = trainer_options(CFG)


rule train:
    output:
        episodes=RUN_DIR + "/" + runfolder.EPISODES,
        trace=RUN_DIR + "/" + runfolder.TRACE,
        run=RUN_DIR + "/" + runfolder.RUN_JSON,
    params:
        options=TRAINER_OPTIONS,
    log:
        runfolder.TRAIN_LOG,
    threads: CFG["train"].get("threads", 1)
    resources:
        train_attempt=lambda wildcards, attempt: attempt,
    shell:
        "python -m workflow.train_job --task {wildcards.task} --bound {wildcards.bound}"
        " --algo {wildcards.algo} --seed {wildcards.seed} --out $(dirname {output.run})"
        " --attempt {resources.train_attempt}"
        " {params.options} --threads {threads} >> {log} 2>&1"


rule runs:
    """Train every run of the grid, nothing else."""
    input:
        [path for name in RUN_FILES for path in all_runs(name)],
