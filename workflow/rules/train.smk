# Stage 0: training, one job per pack (workflow/packs.py): the runs of one program (task x
# algorithm) that still need training, trained by one compiled program, each into its own run
# folder from its spec.json, which the job writes first. A pack's outputs are its pending
# runs only, so a rerun trains exactly the failed and missing runs. A run that stops early (time limit, SIGTERM/SIGUSR2 ->
# exit 75) leaves DIR/checkpoint/ behind; the retry or the next invocation resumes from there.
# Rule names follow the packs (train_goal_ppo_p0); a profile sets their threads and resources
# under the name `train`, which every pack rule takes. `train_attempt` tells the job which
# attempt it is, so a retry after a deterministic failure stops at once (workflow.train_job).


# Snakemake keeps a profile's set-threads / set-resources per rule name in these (parsed)
# mappings and reads them when a rule is defined and when it spawns cluster jobs.
_OVERWRITE_THREADS = workflow.resource_settings._parsed_overwrite_threads
_OVERWRITE_RESOURCES = workflow.resource_settings._parsed_overwrite_resources

# A pending run whose files exist (damaged, or trained for another spec) is not "missing"
# to Snakemake: its spec.json, written or touched now, is an input newer than its outputs.
_STALE_SPECS = packs.mark_stale(CFG, PACKS)

TRAIN_RULES = []

for _pack in PACKS:
    if not _pack.pending:
        continue
    _name = f"train_{_pack.name}"
    TRAIN_RULES.append(_name)
    for _setting in (_OVERWRITE_THREADS, _OVERWRITE_RESOURCES):
        if "train" in _setting:
            _setting[_name] = _setting["train"]

    rule:
        name: _name
        input:
            [_STALE_SPECS[run] for run in _pack.pending if run in _STALE_SPECS],
        output:
            [f"{run_layout.RUNS_ROOT}/{run}/{f}" for run in _pack.pending for f in RUN_FILES],
        params:
            runs=list(_pack.pending),
            specs=" ".join(f"{run_layout.RUNS_ROOT}/{run}/{run_layout.SPEC}" for run in _pack.pending),
            pack_runs=len(_pack.runs),  # the whole pack: a batched program's size (algos.programs)
        log:
            f"{LOGS_DIR}/train/{_pack.name}.log",
        threads: CFG["train"].get("threads", 1)
        resources:
            train_attempt=lambda wildcards, attempt: attempt,
        run:
            # the specs are written when the job runs (a dry run writes nothing)
            packs.write_specs(CFG, params.runs)
            shell("SAFERL_TRAIN_LOG={log} python -m workflow.train_job --attempt {resources.train_attempt}"
                  " --threads {threads} --pack-runs {params.pack_runs} {params.specs} >> {log} 2>&1")


rule runs:
    """Train every run of the grid, nothing else."""
    input:
        lambda wildcards: [path for name in RUN_FILES for path in all_runs(name)],
