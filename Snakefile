"""saferl-eval sweep: train -> per-run summary -> aggregate + bootstrap -> tiers ->
tables, figures -> report. See docs/workflow.md.

    snakemake --workflow-profile cluster_profiles/local                    # default preset, results/
    snakemake --workflow-profile cluster_profiles/local --config preset=tiny  # results-tiny/
"""
import glob
import os
import sys

# `workflow` (this package) must be importable by the rule files; the Snakemake object
# named `workflow` in this file is a different thing and stays untouched.
sys.path.insert(0, workflow.basedir)


configfile: os.path.join(workflow.basedir, "config", "config.yaml")


# sbatch that retries a busy scheduler's transient errors (workflow/slurm_bin/sbatch), first
# on the PATH where the SLURM executor plugin runs sbatch; only sbatch is wrapped there.
_SLURM_BIN = os.path.join(workflow.basedir, "workflow", "slurm_bin")
if _SLURM_BIN not in os.environ.get("PATH", "").split(os.pathsep):
    os.environ["PATH"] = _SLURM_BIN + os.pathsep + os.environ.get("PATH", "")


# common.smk first (it defines the grid and the paths), then every other rule file, so a
# new workflow/rules/*.smk plugs in by existing.
include: "workflow/rules/common.smk"


for _rules_file in sorted(glob.glob(os.path.join(workflow.basedir, "workflow", "rules", "*.smk"))):
    if os.path.basename(_rules_file) != "common.smk":
        include: _rules_file

# Tables, figures and the report are light: run them in the controller, never as cluster
# jobs (so the scheduler sees only training and aggregation).
localrules: all, runs, metrics, write_thresholds, tiers, report


workflow.localrules(*SUMMARISE_RULES)


workflow.localrules(*[r.name for r in workflow.rules if os.path.basename(r.snakefile) == "products.smk"])


# A real run records in the sweep's folder which config made it (workflow.sweep): planning
# and status then tell this sweep's folder from another's.
onstart:
    sweep.write_record(CFG)


# The runs and their summaries are listed too: Snakemake only regenerates a deleted
# intermediate file when a target asks for it, and a deleted run must be retrained.
rule all:
    default_target: True
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
_unknown = sorted((set(workflow.resource_settings.overwrite_threads) | set(workflow.resource_settings.overwrite_resources))
                  - {r.name for r in workflow.rules})
if _unknown:
    raise WorkflowError(f"the profile's set-threads/set-resources name no rule: {', '.join(_unknown)}; training rules are "
                        "named per pack (train_<task>_<algo>_p<k>) and take default-resources and config train.threads "
                        "(docs/workflow.md)")
