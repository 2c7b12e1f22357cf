# Configuration, the grid and the paths every rule file shares; no rules. The functions the
# rule files call are here too, and the Snakefile includes this file first.
#
# Names the other files of workflow/rules/ may use:
#   CFG                  the validated config (workflow/config_validation.py), seeds as a list
#   TASKS, BOUNDS, ALGOS, SEEDS   the grid; TASKS are task ids (goal, safe_goal_point@l2),
#                        BOUNDS every bound's path label (25, 12.5), TASK_BOUNDS each task's
#   RESULTS_DIR          the sweep's own folder (workflow.sweep): results/ for the default
#                        preset, results-<preset>/ for the others, or config `results_dir`
#   RUNS_ROOT, RUN_DIR   RESULTS_DIR/runs, RUNS_ROOT/{task}/d{bound}/{algo}/seed{seed}
#   RUN_IDS              every run's wildcards as dicts (task, bound, algo, seed); in an
#                        adaptive sweep every run it may train (selected_run_ids(): those chosen)
#   METRICS_DIR, TABLES_DIR, FIGURES_DIR, LOGS_DIR
#   AGGREGATE_FILES      stage-2 outputs (threshold-free) by name, e.g. AGGREGATE_FILES["iqm"]
#   TIER_FILES           stage-3 outputs (threshold-dependent): tiers, conditions
#   run_path(name, **wildcards)    a file inside one run's folder
#   run_of(wildcards)    the run id of a job's wildcards (task/d<bound>/algo/seed<seed>)
#   RUN_FILES            the files of a complete run folder (runs.run_layout names them)
#   PACKS                the packs of the grid (workflow/packs.py), each with its pending runs
#   STALE_FLAGS          {run id: flag file} of the pending runs whose run.json exists; the
#                        targets that ask for every run (all, runs, metrics) ask for these too
# A rule file that makes products appends their paths to PRODUCT_TARGETS; the target `all`
# and the report collect them.
import itertools
import os
import sys

from runs import run_layout
from runs.run_layout import RUN_FILES, bound_label
from metrics.aggregate import META_FILE, OUTPUT_FILES
from metrics.tiers import TIER_FILES as _TIER_FILE_NAMES
from metrics.thresholds import thresholds_notice
from workflow import adaptive, clock, jobenv, joblog, packs, sweep
from workflow.config_validation import ConfigError, bounds_of, resolve_snakemake
from workflow.products import registry as product_registry

try:  # each config file read again strictly; an error names the file or option that set the key
    CFG = resolve_snakemake(config, workflow)
except ConfigError as e:
    raise WorkflowError(f"invalid configuration: {e}") from None
if (_notice := thresholds_notice(CFG["thresholds"], "the config's thresholds")):
    print(_notice, file=sys.stderr)  # the sweep's tiers are not Table 1's: say so first


TASKS = CFG["tasks"]
BOUNDS = [bound_label(b) for b in CFG["bounds"]]
ALGOS = CFG["algos"]
SEEDS = CFG["seeds"]

# The sweep's own folder; the first line this Snakefile logs names it. A folder that holds
# another sweep's runs is refused before planning (workflow.sweep.check: a dry run says so too);
# sweep.json, which records the sweep in its folder, is written when a real run starts (onstart
# in the Snakefile), never while planning. Jobs that re-read the workflow (cluster jobs) skip both.
RESULTS_DIR = sweep.results_dir(CFG)
RUNS_ROOT = sweep.runs_root(CFG)
RUN_DIR = f"{RUNS_ROOT}/{{task}}/d{{bound}}/{{algo}}/seed{{seed}}"
METRICS_DIR = f"{RESULTS_DIR}/metrics"
TABLES_DIR = f"{RESULTS_DIR}/tables"
FIGURES_DIR = f"{RESULTS_DIR}/figures"
LOGS_DIR = f"{RESULTS_DIR}/logs"
REPORT = f"{RESULTS_DIR}/report.html"

clock.tolerate_skew()  # outputs written now may be dated before future-dated inputs

if workflow.is_main_process:
    _verdict = sweep.check(CFG)
    logger.info(sweep.headline(CFG, len(CFG["specs"])))
    if (_clock := sweep.clock_notice(CFG)):
        logger.warning(_clock)  # Snakemake compares dates; say when they cannot be trusted
    if _verdict.kind == "other":
        raise WorkflowError(_verdict.message)
    if _verdict.kind == "changed":
        logger.warning(_verdict.message)
    elif _verdict.kind == "new" and sweep.other_sweeps(CFG):
        logger.info(f"{RESULTS_DIR}/ is new: this sweep starts from scratch; other sweeps here: "
                    f"{', '.join(sweep.other_sweeps(CFG))} (--config preset=NAME acts on one)")
    joblog.shorten_job_listing()

# File names come from the metrics package that writes them (never restated here).
AGGREGATE_FILES = {name: f"{METRICS_DIR}/{filename}" for name, filename in OUTPUT_FILES.items()}
AGGREGATE_FILES["aggregate"] = f"{METRICS_DIR}/{META_FILE}"
THRESHOLDS_FILE = f"{METRICS_DIR}/thresholds.yaml"
TIER_FILES = {name: f"{METRICS_DIR}/{filename}" for name, filename in _TIER_FILE_NAMES.items()}

TASK_BOUNDS = {t: [bound_label(b) for b in bounds_of(CFG, t)] for t in TASKS}  # a preset may give bounds per task
RUN_IDS = [dict(task=t, bound=b, algo=a, seed=s)
           for t in TASKS for b, a, s in itertools.product(TASK_BOUNDS[t], ALGOS, SEEDS)]

# Which runs train together and which still need training: decided here, from the run
# folders, before the DAG is built; planning only reads (train.smk's jobs write the specs).
if (_blocked := packs.not_folders(CFG)):  # planning would read into them and fail with a traceback
    raise WorkflowError(packs.not_folders_message(_blocked))
PACKS = packs.plan(CFG)
STALE_FLAGS = packs.stale_flags(CFG, PACKS)

if "PRODUCT_TARGETS" not in globals():
    PRODUCT_TARGETS = []


def run_path(name, **wildcards):
    return os.path.join(RUN_DIR, name).format(**wildcards)


def run_of(wildcards):
    """The run id (task/d<bound>/algo/seed<seed>) of a job's wildcards."""
    return run_layout.run_id(wildcards.task, wildcards.bound, wildcards.algo, wildcards.seed)


def run_ids_of(seeds_by_algo):
    """The runs of the grid with each algorithm's own seeds."""
    return [dict(task=t, bound=b, algo=a, seed=s)
            for t in TASKS for b, a in itertools.product(TASK_BOUNDS[t], ALGOS) for s in seeds_by_algo[a]]


LAST_ROUND = len(adaptive.rounds(CFG)) - 1  # 0 unless the sweep is adaptive


def decided_seeds(round_no):
    """Each algorithm's seeds once round `round_no` is decided (workflow/rules/adaptive.smk's
    checkpoint; round 0 is the start seeds). Only inside input functions: it waits for the
    checkpoint."""
    if round_no == 0:
        return adaptive.start_seeds(CFG)
    return adaptive.seeds_of(adaptive.read_decision(checkpoints.seed_round.get(round=round_no).output[0]))


def selected_run_ids():
    """The runs the sweep trains: the grid, or in an adaptive sweep the seeds its rounds chose."""
    return run_ids_of(decided_seeds(LAST_ROUND)) if adaptive.enabled(CFG) else RUN_IDS


def all_runs(name):
    """A file of each run the sweep trains (call it in input functions: an adaptive sweep's
    runs are known only as its rounds are decided)."""
    return [run_path(name, **run) for run in selected_run_ids()]


wildcard_constraints:
    **run_layout.WILDCARD_PATTERNS,


def product_outputs(product, directories, captions_dir):
    """A product's outputs by format (products.smk), its report copy flagged with its caption
    (captions_dir/{name}.rst, once a run has written it) and category."""
    paths = product.outputs(directories[product.kind], **({"task": "{task}"} if product.per_task else {}))
    paths = paths if isinstance(paths, dict) else dict(zip(product_registry.FORMATS[product.kind], paths))
    caption = os.path.abspath(os.path.join(captions_dir, f"{product.name}.rst"))
    flag = lambda path: report(path, caption=caption if os.path.exists(caption) else None, category=product.category,
                               **({"subcategory": "{task}"} if product.per_task else {}))
    shown = product_registry.REPORT_FORMAT[product.kind]
    return {ext: flag(path) if ext == shown else path for ext, path in paths.items()}


def profile_names_without_rule():
    """The rule names the profile's set-threads / set-resources give that no rule has (the
    Snakefile refuses them once every rule is defined)."""
    settings = workflow.resource_settings
    return sorted((set(settings.overwrite_threads) | set(settings.overwrite_resources))
                  - {r.name for r in workflow.rules})
