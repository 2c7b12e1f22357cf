# Stage 0: training, one job per pack (workflow/packs.py): the runs of one program (task x
# algorithm) that still need training, trained by one compiled program, each into its own run
# folder from its spec.json, which the job writes first. A pack's outputs are its pending
# runs only, so a rerun trains exactly the failed and missing runs. A run that stops
# early (time limit, SIGTERM/SIGUSR2 -> exit 75) leaves DIR/checkpoint/ behind; the retry or
# the next invocation resumes from there. `train_attempt` tells the job which attempt it is,
# so a retry after a deterministic failure stops at once (workflow.train_job).
#
# Planning writes nothing (a dry run leaves the results folder as it was). A pending run whose run.json
# exists (trained for another spec, or damaged) would look up to date to Snakemake, so the
# targets that ask for every run (all, runs, metrics) also ask for its flag (STALE_FLAGS), a
# file named after the folder's state that does not exist yet, and its pack's job takes the
# flag as input. Rule `stale_run` writes it, saying why the run retrains; it stays behind as
# that record and, named after an earlier state, never stands for a later one.
#
# Every pack of the grid has its rule (train_goal_ppo_p0), pending runs or not: a job whose
# pack was finished meanwhile (by an orphaned job of a killed controller) re-reads the
# workflow, finds its rule with nothing pending and trains nothing. The rules are named per
# pack, so a profile gives their resources as default-resources (they and `aggregate` are
# the only cluster jobs) and the config their threads (`train.threads`). The packs that
# compile a shared program first (packs.compiles_first: one per task on the CPU) go first;
# the others then load it from the persistent compilation cache.

import shlex

_FIRST_COMPILES = packs.compiles_first(PACKS)

for _pack in PACKS:

    rule:
        name: f"train_{_pack.name}"
        priority: 1 if _pack.name in _FIRST_COMPILES else 0
        input:
            [STALE_FLAGS[run] for run in _pack.pending if run in STALE_FLAGS],
        output:
            [f"{RUNS_ROOT}/{run}/{f}" for run in _pack.pending for f in RUN_FILES],
        params:
            runs=list(_pack.pending),
            specs=" ".join(f"{RUNS_ROOT}/{run}/{run_layout.SPEC}" for run in _pack.pending),
            pack_runs=len(_pack.runs),  # the whole pack: a batched program's size (algos.programs)
            curves=shlex.join(sweep.curve_flags(CFG)),  # what the job logs; outputs are pending runs only, so no rerun
        log:
            f"{LOGS_DIR}/train/{_pack.name}.log",
        threads: CFG["train"].get("threads", 1)
        resources:
            train_attempt=lambda wildcards, attempt: attempt,
        run:
            if not params.runs:  # the pack finished before this job read the workflow
                shell("echo 'train: nothing pending, every run of the pack is complete' >> {log}")
            else:
                packs.write_specs(CFG, params.runs)  # the specs are written when the job runs
                shell("SAFERL_TRAIN_LOG={log} python -m workflow.train_job --attempt {resources.train_attempt}"
                      " --threads {threads} --pack-runs {params.pack_runs} {params.curves} {params.specs} >> {log} 2>&1")


rule stale_run:
    """The flag of a pending run whose run.json exists: why it retrains (its pack's job waits for it)."""
    localrule: True
    output:
        f"{packs.stale_dir(RESULTS_DIR)}/{{task}}/d{{bound}}/{{algo}}/seed{{seed}}.{{digest}}.txt",
    wildcard_constraints:
        digest=f"[0-9a-f]{{{packs.STALE_DIGEST}}}",
    params:
        run=run_of,
        folder=lambda wildcards: f"{RUNS_ROOT}/{run_of(wildcards)}",
        spec=lambda wildcards: CFG["specs"][run_of(wildcards)],
    log:
        f"{LOGS_DIR}/stale_run/{{task}}/d{{bound}}/{{algo}}/seed{{seed}}.{{digest}}.log",
    script:
        "../scripts/stale_flag.py"


rule runs:
    """Train every run of the grid, nothing else."""
    localrule: True
    input:
        lambda wildcards: [path for name in RUN_FILES for path in all_runs(name)],
        STALE_FLAGS.values(),
