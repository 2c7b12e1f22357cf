"""Which sweep a command acts on, and the results folder that is that sweep's own.

Every preset has its own folder, so two sweeps never share run folders, tables or reports:
`results/` for the `default` preset (the paths README shows), `results-<preset>/` for the
others, and the `results_dir` config key for a user config that wants its own. A folder
records which config made it in `sweep.json` (the preset and a hash of the training-relevant
config: the backend and `train`, less `threads` and `pack_size`), written when a real run
starts (the Snakefile's onstart), never by planning or status.

`check(cfg)` compares a folder with a config before anything runs:
- new: no folder yet, or one without runs;
- same: made by this sweep (sweep.json; a folder from before sweep.json: its runs are runs
  of this config);
- changed: made by the same preset with another training config (a preset edited since, or
  `--config train.total_steps=...` without `results_dir`): the runs the change affects
  retrain in place, and planning and status say so first;
- other: it holds runs of another sweep (another preset; a `results/` that the `tiny` preset
  filled before each preset had its own folder): the Snakefile refuses, status names it,
  both with the fix.
"""
from __future__ import annotations

import glob
import hashlib
import json
import os
from dataclasses import dataclass
from typing import Mapping

DEFAULT_PRESET = "default"
RESULTS = "results"  # the default preset's folder
SWEEP_FILE = "sweep.json"
NOT_TRAINING = ("threads", "pack_size", "memory_gb")  # train keys that never change a run (not rerun triggers)


def preset_of(cfg: Mapping) -> str:
    return str(cfg.get("preset") or DEFAULT_PRESET)


def default_results_dir(preset: str) -> str:
    return RESULTS if preset == DEFAULT_PRESET else f"{RESULTS}-{preset}"


def results_dir(cfg: Mapping) -> str:
    """The sweep's folder, relative to the working directory (no trailing slash)."""
    explicit = cfg.get("results_dir")
    if explicit:
        return os.path.normpath(str(explicit)).replace(os.sep, "/")
    return default_results_dir(preset_of(cfg))


def runs_root(cfg: Mapping) -> str:
    return f"{results_dir(cfg)}/runs"


def training_config(cfg: Mapping) -> dict:
    """What makes the sweep's runs what they are, apart from the grid: the backend and the
    trainer options (`train.set` less the options that are no part of a run's identity)."""
    from algos.config import NOT_IDENTITY

    train = {k: v for k, v in dict(cfg.get("train") or {}).items() if k not in NOT_TRAINING}
    if isinstance(train.get("set"), Mapping):
        train["set"] = {k: v for k, v in train["set"].items() if k not in NOT_IDENTITY}
    return json.loads(json.dumps({"backend": cfg.get("backend"), "train": train}, sort_keys=True))


def training_hash(cfg: Mapping) -> str:
    return hashlib.sha256(json.dumps(training_config(cfg), sort_keys=True).encode()).hexdigest()[:8]


def curve_flags(cfg: Mapping) -> list[str]:
    """The training job's flags for the config's `curves` (runs.train: --no-tensorboard, --wandb
    ...): no part of a run's identity, so they change no run and retrain none. W&B's group is
    named by the sweep (preset and training config hash) unless the config names one."""
    curves = dict(cfg.get("curves") or {})
    flags = [] if curves.get("tensorboard", True) else ["--no-tensorboard"]
    wandb = dict(curves.get("wandb") or {})
    if wandb.get("enabled"):
        flags += ["--wandb", str(wandb.get("mode") or "offline"),
                  "--wandb-project", str(wandb.get("project") or "saferl-eval"),
                  "--wandb-group", str(wandb.get("group") or f"{preset_of(cfg)}-{training_hash(cfg)}")]
        if wandb.get("entity"):
            flags += ["--wandb-entity", str(wandb["entity"])]
    return flags


def record(cfg: Mapping) -> dict:
    """sweep.json's content for this config."""
    return {"preset": preset_of(cfg), "results_dir": results_dir(cfg), "training_hash": training_hash(cfg),
            "training": training_config(cfg)}


def read_record(folder: str | os.PathLike) -> dict | None:
    try:
        with open(os.path.join(folder, SWEEP_FILE)) as f:
            rec = json.load(f)
        return rec if isinstance(rec, dict) and isinstance(rec.get("preset"), str) else None
    except (OSError, ValueError):
        return None


def write_record(cfg: Mapping, root: str | os.PathLike = ".") -> bool:
    """Write the folder's sweep.json (only when it changed); the Snakefile's onstart calls it."""
    from metrics.atomic import write_text

    folder = os.path.join(root, results_dir(cfg))
    if read_record(folder) == record(cfg):
        return False
    os.makedirs(folder, exist_ok=True)
    write_text(os.path.join(folder, SWEEP_FILE), json.dumps(record(cfg), indent=1, sort_keys=True) + "\n")
    return True


def headline(cfg: Mapping, n_runs: int | None = None) -> str:
    """The first line of every command that acts on a sweep: which sweep, which folder."""
    explicit = " (results_dir)" if cfg.get("results_dir") else ""
    runs = f"{n_runs} runs, " if n_runs is not None else ""
    return (f"sweep {preset_of(cfg)} in {results_dir(cfg)}/{explicit} "
            f"({runs}training config {training_hash(cfg)})")


@dataclass(frozen=True)
class Verdict:
    kind: str  # new, same, changed, other
    message: str = ""  # what to tell the user ('' for new and same)
    preset: str | None = None  # the preset that made the folder, when known


CLOCK_SLACK_S = 60.0  # files dated less than this ahead are ordinary clock jitter


def future_files(folder: str | os.PathLike, now: float | None = None) -> tuple[int, float]:
    """(how many files under `folder` are dated more than CLOCK_SLACK_S after `now`, the largest lead
    in seconds): a shared filesystem whose clock runs ahead of this host's."""
    import time

    now = time.time() if now is None else now
    count, lead = 0, 0.0
    for top, dirs, files in os.walk(folder):
        for name in files:
            try:
                ahead = os.stat(os.path.join(top, name), follow_symlinks=False).st_mtime - now
            except OSError:
                continue
            if ahead > CLOCK_SLACK_S:
                count, lead = count + 1, max(lead, ahead)
    return count, lead


def clock_notice(cfg: Mapping, root: str | os.PathLike = ".") -> str | None:
    """A one-line warning when files of the sweep's folder are dated in the future, else None."""
    count, lead = future_files(os.path.join(root, results_dir(cfg)))
    if not count:
        return None
    ahead = f"{lead / 3600:.1f} h" if lead >= 3000 else f"{lead / 60:.0f} min"
    return (f"warning: {count} file(s) in {results_dir(cfg)}/ are dated in the future, up to {ahead} ahead of this "
            f"host's clock (a shared filesystem whose clock runs ahead?); complete runs are judged by their "
            f"contents, not their dates, and are not retrained; new outputs are dated like their newest input")


def _run_jsons(folder: str) -> list[str]:
    return sorted(glob.glob(os.path.join(glob.escape(folder), "runs", "*", "d*", "*", "seed*", "run.json")))


def _run_id(path: str) -> str:
    return "/".join(path.replace(os.sep, "/").split("/")[-5:-1])


def _matches(cfg: Mapping, configs: dict[str, dict]) -> int:
    """How many of the folder's runs (run id -> run.json config) are runs of `cfg`."""
    from runs.runfolder import config_difference

    specs = cfg["specs"]
    return sum(1 for run, config in configs.items()
               if run in specs and not config_difference(config, specs[run]["config"]))


def _configs(paths: list[str]) -> dict[str, dict]:
    from runs.runfolder import read_json

    out = {}
    for path in paths:
        meta = read_json(path)
        if isinstance(meta, dict) and isinstance(meta.get("config"), dict):
            out[_run_id(path)] = meta["config"]
    return out


def _guess_preset(cfg: Mapping, configs: dict[str, dict]) -> str | None:
    """The preset whose runs a folder without sweep.json holds, when one matches exactly."""
    from workflow import config_validation as cv

    names = [preset_of(cfg)] + [p for p in cv.available_presets() if p != preset_of(cfg)]
    for name in names:
        try:
            if _matches(cv.resolve({"preset": name}), configs):
                return name
        except cv.ConfigError:
            continue
    return None


def _differences(before: Mapping, after: Mapping, prefix: str = "") -> list[str]:
    out = []
    for key in sorted(set(before) | set(after)):
        a, b = before.get(key), after.get(key)
        if isinstance(a, Mapping) and isinstance(b, Mapping):
            out += _differences(a, b, f"{prefix}{key}.")
        elif a != b:
            out.append(f"{prefix}{key} {a} -> {b}")
    return out


def check(cfg: Mapping, root: str | os.PathLike = ".") -> Verdict:
    """Whether the sweep's folder under `root` is this sweep's (reads only)."""
    folder = results_dir(cfg)
    path = os.path.join(root, folder)
    here, preset = preset_of(cfg), None
    rec = read_record(path)
    own = f"give this config its own folder: --config results_dir=NAME (or results_dir: NAME in a --configfile)"
    if rec is not None:
        preset = rec["preset"]
        if preset != here:
            return Verdict("other", f"{folder}/ holds runs of another sweep (preset {preset}, {SWEEP_FILE}), not of "
                                    f"sweep {here}: {own}, or name --config preset={preset} to act on that sweep",
                           preset)
        if rec.get("training_hash") == training_hash(cfg):
            return Verdict("same", preset=preset)
        changes = "; ".join(_differences(rec.get("training") or {}, training_config(cfg))) or "training config"
        return Verdict("changed", f"{folder}/ holds runs of sweep {here} trained with another config ({changes}): "
                                  f"the runs it changes retrain in place; to keep them, {own}", preset)
    paths = _run_jsons(path)
    if not paths:
        return Verdict("new")
    configs = _configs(paths)
    if _matches(cfg, configs):
        return Verdict("same", preset=here)
    preset = _guess_preset(cfg, configs)
    made = f"{len(paths)} run folders, e.g. {_run_id(paths[0])}; no {SWEEP_FILE}: made before each sweep had its own folder"
    if preset == here:
        return Verdict("changed", f"{folder}/ holds runs of sweep {here} trained with another config ({made}): "
                                  f"the runs it changes retrain in place; to keep them, {own}", preset)
    if preset is None and any(run in cfg["specs"] for run in configs):
        return Verdict("changed", f"{folder}/ holds runs trained with another config ({made}): the runs of this "
                                  f"grid retrain in place; to keep them, {own}")
    where = f"the {preset} preset" if preset else "a preset or config not current"
    move = (f"mv {folder} {default_results_dir(preset)} (the {preset} sweep's folder now)"
            if preset and default_results_dir(preset) != folder else f"mv {folder} {folder}-old")
    return Verdict("other", f"{folder}/ holds runs of another sweep ({where}; {made}), not of sweep {here}; "
                            f"move it: {move}; or {own}", preset)


def other_sweeps(cfg: Mapping, root: str | os.PathLike = ".") -> list[str]:
    """Other results folders in `root` with their preset, e.g. 'results-tiny/ (tiny)'."""
    mine = os.path.normpath(os.path.join(root, results_dir(cfg)))
    out = []
    for path in sorted(glob.glob(os.path.join(glob.escape(str(root)), f"{RESULTS}*", SWEEP_FILE))):
        folder = os.path.dirname(path)
        rec = read_record(folder)
        if rec is not None and os.path.normpath(folder) != mine:
            out.append(f"{os.path.relpath(folder, root)}/ ({rec['preset']})")
    return out


def folder_in(sweep_dir: str | os.PathLike, preset: str | None = None) -> str:
    """The results folder a script reads in the folder a sweep ran in: `results-NAME/` (or
    `results/`) of `preset` when named; else `sweep_dir` itself when it is a results folder
    (holds sweep.json or runs/), `results/` when present, or the one `results*/` folder there.
    Raises SystemExit naming the folders when it cannot tell which sweep is meant."""
    root = str(sweep_dir)
    if preset:
        return os.path.join(root, default_results_dir(preset))
    if os.path.isfile(os.path.join(root, SWEEP_FILE)):
        return root
    if os.path.isdir(os.path.join(root, RESULTS)):
        return os.path.join(root, RESULTS)
    # a results folder without sweep.json (an older sweep's); a checkout's runs/ is the trainer's package
    if os.path.isdir(os.path.join(root, "runs")) and not os.path.isfile(os.path.join(root, "runs", "__init__.py")):
        return root
    found = sorted(p for p in glob.glob(os.path.join(glob.escape(root), f"{RESULTS}-*")) if os.path.isdir(p))
    if len(found) == 1:
        return found[0]
    names = ", ".join(os.path.basename(p) + "/" for p in found) or "none"
    raise SystemExit(f"{root}: which sweep? results folders there: {names}; name one with --preset NAME "
                     "or give the results folder itself")


def preset_args(args: list[str], preset: str | None) -> list[str]:
    """Snakemake arguments with `preset=NAME` added to their --config (one --config: Snakemake
    keeps only the last of several)."""
    args = list(args)
    if not preset:
        return args
    if "--config" in args:
        i = args.index("--config")
        return args[:i + 1] + [f"preset={preset}"] + args[i + 1:]
    return args + ["--config", f"preset={preset}"]
