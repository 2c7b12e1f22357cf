"""Packs: which runs train together in one job, and which of them still need training.

The runs of one program (same task and algorithm; bounds and seeds are runtime values of it)
are cut, in (bound, seed) order, into packs of `train.pack_size` (in an adaptive sweep, the
runs of each round of seeds separately: workflow.adaptive). A pack is fixed by the grid
alone, so it does not change while its pack-mates finish. At planning time a pack's *pending*
members are those whose folder is not a complete run of their spec (runs.runfolder): only
they are the outputs of the pack's training job, so a rerun retrains a failed or missing run
without its finished pack-mates, and a changed spec (another budget, a task option) retrains
exactly the runs it changes. Thresholds, plots and the pack size are not in any spec.

Planning only reads. A pending run whose run.json exists (trained for another spec, or
damaged) is not missing to Snakemake; its flag (`stale_flags`) is: a file the targets ask for
and its pack's job takes as input, so the job is planned (workflow/rules/train.smk).
"""
from __future__ import annotations

import hashlib
import json
import os
from typing import NamedTuple

from algos import registry
from runs import runfolder
from runs import run_layout

STALE_DIR = "results/logs/stale"  # the default sweep's flags of pending runs whose files exist (stale_dir)
STALE_DIGEST = 12  # hex digits of a flag's name


class Pack(NamedTuple):
    name: str  # a rule-name suffix: task_algo_pK
    runs: tuple  # run ids of the pack, complete or not
    pending: tuple  # run ids that need training
    program: str = ""  # the compiled program it shares with other packs: task/algorithms (compiles_first)


def compiles_first(packs) -> set[str]:
    """Names of the packs that compile a program first: the first pending pack of each task x
    algorithms that share a sequential program (algos.registry.program_algos). Their jobs go
    first (rule priority), so the other packs of the program find it in the persistent
    compilation cache instead of compiling it beside them."""
    first: dict[str, str] = {}
    for pack in packs:
        if pack.pending:
            first.setdefault(pack.program, pack.name)
    return set(first.values())


def stale_dir(results_dir: str = run_layout.RESULTS_DIR) -> str:
    """Where a sweep's flags of pending runs whose files exist go: why each retrained."""
    return f"{results_dir}/logs/stale"


def pending_reason(folder: str | os.PathLike, spec: dict, verify: bool = False) -> str | None:
    """Why the run folder needs training for `spec`, or None when it holds that run complete
    (a damaged table counts as incomplete: runs.runfolder.incomplete_reason)."""
    reason = runfolder.incomplete_reason(folder, verify)
    if reason is not None:
        return reason
    differ = runfolder.config_difference((runfolder.read_run_json(folder) or {}).get("config"), spec["config"])
    return f"trained with another config (fields {differ})" if differ else None


def plan(cfg: dict, root: str | os.PathLike = ".") -> list[Pack]:
    """Every pack of the grid, each with its pending members."""
    from workflow import adaptive, sweep
    from workflow.config_validation import bounds_of

    runs_root = sweep.runs_root(cfg)
    seed_rounds = adaptive.rounds(cfg)  # one round (every seed) unless the sweep is adaptive
    sizes = pack_sizes(cfg)
    packs = []
    for task in cfg["tasks"]:
        for algo in cfg["algos"]:
            size = sizes[task, algo]
            for rnd, seeds in enumerate(seed_rounds):
                runs = [run_layout.run_id(task, b, algo, s) for b in bounds_of(cfg, task) for s in seeds]
                name = task.replace(run_layout.LEVEL_MARK, "_l")  # a rule name: no '@'
                prefix = f"{name}_{algo}_r{rnd}" if adaptive.enabled(cfg) else f"{name}_{algo}"
                for k in range(0, len(runs), size):
                    members = tuple(runs[k:k + size])
                    pending = tuple(r for r in members
                                    if pending_reason(os.path.join(root, runs_root, r), cfg["specs"][r]))
                    packs.append(Pack(f"{prefix}_p{k // size}", members, pending,
                                      f"{task}/{'+'.join(registry.program_algos(algo))}"))
    return packs


def pack_sizes(cfg: dict) -> dict[tuple[str, str], int]:
    """Runs per pack of each (task, algorithm): `train.pack_size`, capped where `train.memory_gb`
    is set by how many members' training states fit in it (runs.memory: the off-policy core's
    replay buffers make a member's state hundreds of MB). Measured once per program and code
    version (a subprocess on a cache miss)."""
    from runs import memory

    size = int(cfg["train"].get("pack_size", 1))
    pairs = [(task, algo) for task in cfg["tasks"] for algo in cfg["algos"]]
    memory_gb = cfg["train"].get("memory_gb")
    if not memory_gb:
        return {pair: size for pair in pairs}
    from workflow import adaptive
    from workflow.config_validation import bounds_of

    seed = adaptive.rounds(cfg)[0][0]  # the runs of a program share its state's shapes: the first speaks for all
    first = {(task, algo): cfg["specs"][run_layout.run_id(task, bounds_of(cfg, task)[0], algo, seed)]["config"]
             for task, algo in pairs}
    cache_dir = os.environ.get("JAX_COMPILATION_CACHE_DIR") or os.path.abspath(".jax_cache")
    per_member = memory.planned_state_bytes(list(first.values()), cache_dir)
    return {pair: min(size, memory.members_that_fit(memory_gb, b)) for pair, b in zip(first, per_member)}


def not_folders(cfg: dict, root: str | os.PathLike = ".") -> list[str]:
    """The paths where a run folder (or a folder above it, up to the runs folder) should be
    but something else is (a file, a broken link): nothing can be trained or read there."""
    from workflow import sweep

    runs_root = sweep.runs_root(cfg)
    found = set()
    for run in cfg["specs"]:
        path = os.path.join(runs_root, run)
        while path != runs_root and path:
            full = os.path.join(root, path)
            if os.path.lexists(full):
                if not os.path.isdir(full):
                    found.add(path)
                break
            path = os.path.dirname(path)
    return sorted(found)


def not_folders_message(paths: list[str]) -> str:
    shown = ", ".join(paths[:3]) + (f" and {len(paths) - 3} more" if len(paths) > 3 else "")
    return (f"{len(paths)} run folder path(s) hold a file, not a folder: {shown}; "
            f"move them away (or delete them), then run the same command again")


def write_specs(cfg: dict, runs, root: str | os.PathLike = ".") -> None:
    """spec.json into each run folder named (rewritten only where it changed)."""
    from workflow import sweep

    for run in runs:
        runfolder.write_spec(os.path.join(root, sweep.runs_root(cfg), run), cfg["specs"][run])


def stale_flags(cfg: dict, packs, root: str | os.PathLike = ".") -> dict[str, str]:
    """{run id: its flag} for every pending run of `packs` whose run.json exists."""
    from workflow import sweep

    folder = sweep.results_dir(cfg)
    flags = {run: stale_flag(run, cfg["specs"][run], root, folder) for pack in packs for run in pack.pending}
    return {run: flag for run, flag in flags.items() if flag}


def stale_flag(run: str, spec: dict, root: str | os.PathLike = ".",
               results_dir: str = run_layout.RESULTS_DIR) -> str | None:
    """For a pending run whose run.json exists: the flag file its pack's job waits for, named
    after the spec and run.json's bytes, so the flag of an earlier state of the folder (kept
    as the record of why it retrained) never stands for this one; None without run.json."""
    run_json = os.path.join(root, results_dir, "runs", run, run_layout.RUN_JSON)
    try:
        with open(run_json, "rb") as f:
            state = f.read()
    except FileNotFoundError:
        return None  # run.json is missing: Snakemake plans the job for it anyway
    digest = hashlib.sha256(json.dumps(spec, sort_keys=True).encode() + b"\0" + state).hexdigest()[:STALE_DIGEST]
    return f"{stale_dir(results_dir)}/{run}.{digest}.txt"


def verify_for_summary(folder: str | os.PathLike) -> None:
    """Before a run is summarised: its tables hashed in full. A damaged run's run.json is
    moved aside (run.json.damaged, kept as evidence), so the next run of the same command
    plans it for training; raises ValueError naming the folder and the damage."""
    reason = runfolder.incomplete_reason(folder, verify=True)
    if reason is not None:
        run_json = os.path.join(folder, run_layout.RUN_JSON)
        if os.path.exists(run_json):
            os.replace(run_json, run_json + ".damaged")
        raise ValueError(f"{folder}: not summarised: {reason}; {run_layout.RUN_JSON} moved to "
                         f"{run_layout.RUN_JSON}.damaged, so rerunning the same command retrains the run")
