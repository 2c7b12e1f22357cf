"""saferl-eval sweep: train -> per-run summary -> aggregate + bootstrap -> tiers ->
tables, figures -> report. See docs/workflow.md.

    snakemake --workflow-profile cluster_profiles/local                    # default preset, results/
    snakemake --workflow-profile cluster_profiles/local --config preset=tiny  # results-tiny/

Reading it writes nothing and changes no environment variable (a dry run and `--lint` leave
everything as it was); the jobs' environment is set when a real run starts (onstart below).
Light rules say `localrule: True` themselves: they run in the controller, never as cluster jobs.
"""
import os
import sys

# `workflow` (this package) must be importable by the rule files; the Snakemake object
# named `workflow` in this file is a different thing and stays untouched.
sys.path.insert(0, workflow.basedir)

from workflow import console, interrupt  # noqa: E402 (importable once the line above ran)


# The project's strict reader goes first: Snakemake's own says only "not valid JSON or YAML ...
# mix whitespace and tab" of an unsafe tag or a tab, and keeps the last of two equal keys.
# (A --configfile Snakemake reads before this file: workflow.launch and
# `python -m workflow.config_validation FILE` check those the same way.)
from workflow.config_validation import ConfigError as _ConfigError, check_config_files as _check_config_files  # noqa: E402

try:
    _check_config_files([os.path.join(workflow.basedir, "config", "config.yaml")])
except _ConfigError as _e:
    raise WorkflowError(f"invalid configuration: {_e}") from None

configfile: os.path.join(workflow.basedir, "config", "config.yaml")


# common.smk first: it defines the grid and the paths every other rule file uses. The others
# in this order: products.smk defines the settings report.smk reads, and the report lists
# PRODUCT_TARGETS in the order the files append to it (adaptive.smk's seed table first). A new
# rule file is one more line here.
include: "workflow/rules/common.smk"
include: "workflow/rules/adaptive.smk"
include: "workflow/rules/metrics.smk"
include: "workflow/rules/products.smk"
include: "workflow/rules/report.smk"
include: "workflow/rules/train.smk"


# A real run (never planning) records in the sweep's folder which config made it
# (workflow.sweep: planning and status then tell this sweep's folder from another's), writes
# the products' captions where Snakemake's report reads them (products.smk) and sets the
# environment its jobs see (workflow.jobenv: this checkout's packages and interpreter, the
# sbatch that retries a busy scheduler).
onstart:
    sweep.write_record(CFG)
    product_registry.write_captions(CAPTIONS_DIR)
    jobenv.export(workflow.basedir)
    interrupt.install()
    console.watch(LOGS_DIR)  # each training pack's phases and progress, at least every 30 s


# Ctrl-C, SIGINT or SIGTERM (workflow.interrupt): the jobs have checkpointed; one line says how
# many runs a rerun resumes, and the controller exits 130 / 143 instead of with a WorkflowError.
onerror:
    interrupt.report(f"{RUNS_ROOT}/{run}" for pack in PACKS for run in pack.pending)


# The runs and their summaries are listed too: Snakemake only regenerates a deleted
# intermediate file when a target asks for it, and a deleted run must be retrained.
rule all:
    default_target: True
    localrule: True
    input:
        lambda wildcards: [path for name in RUN_FILES for path in all_runs(name)],
        lambda wildcards: all_runs(run_layout.SUMMARY),
        STALE_FLAGS.values(),
        AGGREGATE_FILES.values(),
        TIER_FILES.values(),
        PRODUCT_TARGETS,
        REPORT,


# Snakemake applies a profile's set-threads / set-resources by rule name and ignores a name
# that is no rule; training rules are named per pack (train_goal_ppo_p0), so a `train:` entry
# would silently give them nothing.
if (_unknown := profile_names_without_rule()):
    raise WorkflowError(f"the profile's set-threads/set-resources name no rule: {', '.join(_unknown)}; training rules are "
                        "named per pack (train_<task>_<algo>_p<k>) and take default-resources and config train.threads "
                        "(docs/workflow.md)")
