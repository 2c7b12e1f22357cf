"""Resolve and validate the sweep configuration before anything runs.

The user's config (config/config.yaml plus `snakemake --config` overrides) names a preset
(config/presets/<name>.yaml); its other keys override the preset's, nested mappings merged
key by key. A preset holds only what differs from config/base.yaml, or from the preset it
names with `extends: NAME`; `train.total_steps: from_trainer` (likewise num_envs,
episode_length, eval_episodes) takes the value of the trainer preset (algos.config), so the
budget is stated once. The merged mapping is checked against
workflow/schemas/config.schema.yaml, whose lists of allowed tasks, algorithms and trainer
presets are filled in from the registries (envs.TASK_TABLE, algos/registry.py,
algos.config.PRESETS), and then for what a schema cannot say: the tier thresholds (checked by
metrics.thresholds, as the engine checks a thresholds file), seeds in the trainer's range, bounds that give a valid path label, and every trainer
option as the trainer itself would check it (`run_specs`: every run's spec is built by
algos.config, so a value the trainer would refuse -
`train.num_envs` not dividing the batch, an unknown or identity `train.set` key - is refused
here, before any job starts). Every error names the key, and the file that set it
(config/config.yaml, a preset file, a --configfile, --config) where the caller says which
files it merged (`resolve(..., layers=...)`; the Snakefile does, through `resolve_snakemake`).

    python -m workflow.config_validation [CONFIG.yaml] [--set key=value ...]

prints the resolved configuration or the error.
"""
from __future__ import annotations

import copy
import json
import math
import re
import sys
from pathlib import Path
from typing import Any, Mapping

import jsonschema
import yaml

from metrics import strict_yaml
from metrics.thresholds import PAPER_THRESHOLDS

REPO = Path(__file__).resolve().parent.parent
PRESETS_DIR = REPO / "config" / "presets"
BASE_CONFIG = REPO / "config" / "base.yaml"
SCHEMA_FILE = Path(__file__).resolve().parent / "schemas" / "config.schema.yaml"
DEFAULT_CONFIG = REPO / "config" / "config.yaml"


class ConfigError(ValueError):
    """A configuration value is invalid; the message names the key and the value, and `key`
    (a tuple of keys and list indices, when known) lets `resolve` name the file that set it."""

    def __init__(self, message, key: tuple | None = None):
        super().__init__(message)
        self.key = key


def available_presets(presets_dir: Path = PRESETS_DIR) -> list[str]:
    return sorted(p.stem for p in presets_dir.glob("*.yaml"))


def _load_yaml(path: Path) -> Any:
    try:
        return strict_yaml.load_file(path)
    except strict_yaml.FileError as e:
        raise ConfigError(str(e)) from None


def check_config_files(paths) -> None:
    """Read each config file strictly (Snakemake's own reading keeps the last of two equal
    keys without a word); ConfigError naming the file, key and lines."""
    for path in paths:
        _load_yaml(Path(path))


def deep_merge(base: Mapping, override: Mapping) -> dict:
    """`override` on top of `base`; mappings merge recursively, anything else replaces."""
    merged = copy.deepcopy(dict(base))
    for key, value in override.items():
        if isinstance(value, Mapping) and isinstance(merged.get(key), Mapping):
            merged[key] = deep_merge(merged[key], value)
        else:
            merged[key] = copy.deepcopy(value)
    return merged


def _key_path(path) -> str:
    out = ""
    for part in path:
        out += f"[{part}]" if isinstance(part, int) else (f".{part}" if out else str(part))
    return out or "<top level>"


def _schema_error_message(error: jsonschema.ValidationError) -> str:
    key = _key_path(error.absolute_path)
    if error.validator == "additionalProperties":
        allowed = sorted(error.schema.get("properties", {}))
        extra = sorted(set(error.instance) - set(allowed)) if isinstance(error.instance, dict) else []
        where = "top level" if key == "<top level>" else f"'{key}'"
        return f"config {where}: unknown key(s) {extra}; allowed: {allowed}"
    if error.validator == "type" and isinstance(error.instance, str) and _number(error.instance) is not None:
        return f"config key '{key}': {error.instance!r} is text, not a number; write it without quotes"
    if error.validator == "enum":
        return f"config key '{key}': {error.instance!r} is not one of {error.validator_value}"
    if error.validator == "minItems" and error.validator_value == 1:
        return f"config key '{key}': the list is empty, so the grid would be empty"
    if error.validator == "oneOf":
        # a list or mapping of the right form but a bad item (bounds): name the item, not the form
        branch = {list: 0, dict: 1}.get(type(error.instance)) if list(error.absolute_path) == ["bounds"] else None
        inner = [e for e in error.context if branch is not None and list(e.schema_path)[:1] == [branch]]
        if inner:
            return _schema_error_message(min(inner, key=lambda e: list(map(str, e.absolute_path))))
        form = error.schema.get("description", "one of the allowed forms")
        return f"config key '{key}': {error.instance!r} is not valid; expected {form}"
    if error.validator == "pattern" and "expected" in error.schema:
        return f"config key '{key}': {error.instance!r} is not valid; expected {error.schema['expected']}"
    if error.validator == "exclusiveMinimum":
        return f"config key '{key}': {error.instance!r} must be > {error.validator_value}"
    return f"config key '{key}': {error.message}"


def schema() -> dict:
    """The config schema with the registries' names as the allowed algos and trainer presets
    (tasks are checked by check_tasks: CRAX's names come from its registry)."""
    from algos.config import ALGOS, PRESETS

    out = _load_yaml(SCHEMA_FILE)
    props = out["properties"]
    props["algos"]["items"]["enum"] = list(ALGOS)
    props["train"]["properties"]["preset"]["enum"] = list(PRESETS)
    return out


def _in_schema_order(cfg: Mapping, node: Mapping) -> dict:
    """The keys the schema lists in its order, then any others as merged (stable output)."""
    props = node.get("properties", {})
    if not isinstance(cfg, Mapping) or not props:
        return cfg
    ordered = {k: _in_schema_order(cfg[k], props[k]) for k in props if k in cfg}
    return {**ordered, **{k: v for k, v in cfg.items() if k not in props}}


# `snakemake -n` plans 10,032 runs in 37.5 CPU s, 3.7 s per 1,000 runs (benchmarks/plan_scale.py):
# much past this limit, planning takes over a minute. The paper's grid is 1,440 runs.
MAX_RUNS = 10_000
# JSON Schema's "integer" admits 2.0; a count or seed written as a float is refused instead
# (range(2.0) and the trainer's int32 seeds would fail later, far from the config).
_Validator = jsonschema.validators.extend(
    jsonschema.Draft202012Validator,
    type_checker=jsonschema.Draft202012Validator.TYPE_CHECKER.redefine(
        "integer", lambda _, value: isinstance(value, int) and not isinstance(value, bool)))


def check_thresholds(thresholds) -> dict:
    """The thresholds as metrics.thresholds checks them everywhere (files, the engine's API),
    with its error naming the config key."""
    from metrics.schema import ThresholdError
    from metrics.thresholds import validate_thresholds

    try:
        return validate_thresholds(thresholds, "config key", "thresholds.")
    except ThresholdError as err:
        raise ConfigError(str(err)) from None


def check_grid_values(cfg: Mapping) -> None:
    """Bounds that make a path label the trainer reads back exactly; seeds the trainer accepts."""
    from algos.config import SEED_LIMIT
    from runs.run_layout import bound_label

    lists = cfg["bounds"].items() if isinstance(cfg["bounds"], Mapping) else [(None, cfg["bounds"])]
    for group, bounds in lists:
        for i, bound in enumerate(bounds):
            key = f"bounds[{i}]" if group is None else f"bounds.{group}[{i}]"
            if not math.isfinite(bound):
                raise ConfigError(f"config key '{key}': {bound!r} must be finite")
            try:  # the folder label's one rule (length, exact round trip), checked here, before any job
                bound_label(bound)
            except ValueError as err:
                raise ConfigError(f"config key '{key}': {err}") from None
    seeds = cfg["seeds"]
    if isinstance(seeds, int) and seeds > SEED_LIMIT:
        raise ConfigError(f"config key 'seeds': {seeds} seeds would go past the trainer's largest seed "
                          f"{SEED_LIMIT - 1}")
    for i, seed in enumerate(seeds if isinstance(seeds, list) else []):
        if seed >= SEED_LIMIT:
            raise ConfigError(f"config key 'seeds[{i}]': {seed} must be < 2**31 = {SEED_LIMIT} (the trainer's "
                              f"seed range)")
    n_seeds = seeds if isinstance(seeds, int) else len(seeds)
    if cfg.get("adaptive"):  # the grid a sweep may grow to
        n_seeds = max(n_seeds, cfg["adaptive"]["max_seeds"])
    n_runs = sum(len(b) for b in task_bounds(cfg).values()) * len(cfg["algos"]) * n_seeds
    if n_runs > MAX_RUNS:
        raise ConfigError(f"config key 'seeds': {n_seeds:,} seeds give a grid of {n_runs:,} runs (tasks x bounds x "
                          f"algos x seeds); more than {MAX_RUNS:,} is refused: Snakemake would take minutes to plan "
                          "it (docs/faults.md); split the grid into sweeps of fewer seeds or bounds")


def check_tasks(cfg: Mapping) -> None:
    """Every task id names a task the backend has at that level (runs.run_layout.task_id):
    builtin, a task of envs.TASKS at level 1; crax, a built-in alias or any CRAX safe task at a
    level CRAX has for it (envs.crax_registry.catalogue: CRAX's registry, read once per CRAX
    version in a subprocess, so this process stays free of JAX). Refusals name the closest
    valid names and the task's levels."""
    import difflib

    import envs
    from runs.run_layout import parse_task_id

    tasks = None
    for i, text in enumerate(cfg["tasks"]):
        key = f"config key 'tasks[{i}]'"
        try:
            name, level = parse_task_id(text)
        except ValueError as err:
            raise ConfigError(f"{key}: {err}", ("tasks", i)) from None
        if cfg["backend"] == "builtin":
            if name not in envs.TASKS:
                close = difflib.get_close_matches(name, envs.TASKS, n=3, cutoff=0.5)
                raise ConfigError(f"{key}: {text!r} is not a built-in task; "
                                  + (f"closest: {', '.join(close)}; " if close else "")
                                  + f"built-in tasks: {', '.join(envs.TASKS)} (backend: crax has CRAX's safe tasks)",
                                  ("tasks", i))
            if level not in envs.LEVELS:
                raise ConfigError(f"{key}: {text!r}: the built-in tasks have level 1 only (backend: crax has "
                                  "levels 1-3)", ("tasks", i))
            continue
        from envs import crax_registry

        try:
            tasks = tasks or crax_registry.catalogue()
            crax_registry.check(name, level, tasks)
        except (ValueError, ImportError) as err:
            raise ConfigError(f"{key}: {err}", ("tasks", i)) from None


def check_task_sizes(cfg: Mapping) -> None:
    """Refuse an algorithm with a size limit (algos/registry.py, max_sizes: PPO-Shield's cost
    model) on a CRAX task larger than it takes, before any job runs (the trainer would fail
    only when it builds its program). Sizes come from envs.crax_registry.sizes (cached; measured
    in a subprocess). The built-in tasks, a point robot's, fit every limit (tests/test_crax_tasks.py)."""
    from algos import registry
    from runs.run_layout import parse_task_id

    limited = [(i, a, registry.get(a).max_sizes) for i, a in enumerate(cfg["algos"])
               if registry.get(a).max_sizes is not None]
    if cfg["backend"] != "crax" or not limited:
        return
    from envs import crax_registry

    tasks = {text: parse_task_id(text) for text in cfg["tasks"]}
    sizes = crax_registry.sizes(sorted(set(tasks.values())))
    for i, algo, (max_obs, max_act) in limited:
        for text, pair in tasks.items():
            obs, act = sizes[pair]
            if obs > max_obs or act > max_act:
                raise ConfigError(
                    f"config key 'algos[{i}]': {algo} cannot train task {text!r}: it takes at most {max_obs} "
                    f"observation entries and {max_act} action dimensions, the task has {obs} and {act} "
                    f"(algos/registry.py, max_sizes); drop {algo} or the task, or sweep them apart", ("algos", i))


def task_bounds(cfg: Mapping) -> dict[str, list[float]]:
    """Each task id's bounds. `bounds` is one list for every task, or a mapping whose keys are
    task ids, shell patterns over task ids (`safe_velocity_*`) or `default`: a task takes its
    own key, else the longest pattern that matches it, else `default`."""
    import fnmatch

    bounds = cfg["bounds"]
    if not isinstance(bounds, Mapping):
        return {task: list(bounds) for task in cfg["tasks"]}
    out = {}
    for task in cfg["tasks"]:
        matches = sorted((k for k in bounds if k != "default" and fnmatch.fnmatchcase(task, k)),
                         key=lambda k: (k != task, -len(k)))
        key = matches[0] if matches else "default" if "default" in bounds else None
        if key is None:
            raise ConfigError(f"config key 'bounds': no bounds for task {task!r}: give it its own key, a pattern "
                              f"that matches it, or 'default' (keys: {', '.join(bounds)})", ("bounds",))
        out[task] = list(bounds[key])
    unused = [k for k in bounds if k != "default" and not any(fnmatch.fnmatchcase(t, k) for t in cfg["tasks"])]
    if unused:
        raise ConfigError(f"config key 'bounds.{unused[0]}': matches none of the tasks "
                          f"{', '.join(cfg['tasks'])}", ("bounds", unused[0]))
    return out


def bounds_of(cfg: Mapping, task: str) -> list:
    """A task's bounds in a resolved config (task_bounds); a config without them (built by hand)
    gives every task `bounds`."""
    return cfg.get("task_bounds", {}).get(task, cfg["bounds"])


def check_adaptive(cfg: Mapping) -> dict:
    """The adaptive settings with `start` (the first round's seed count, from `seeds`)."""
    seeds, adaptive = cfg["seeds"], dict(cfg["adaptive"])
    if not isinstance(seeds, int) or seeds < 2:
        raise ConfigError(f"config key 'seeds': {seeds!r}: with 'adaptive', seeds is the count the sweep starts "
                          "with, at least 2 (a tier's P needs two seeds per stratum)")
    if adaptive["max_seeds"] < seeds:
        raise ConfigError(f"config key 'adaptive.max_seeds': {adaptive['max_seeds']} is fewer than the {seeds} "
                          "seeds the sweep starts with")
    return {**adaptive, "start": seeds}


def run_spec(cfg: Mapping, task: str, bound: float, algo: str, seed: int) -> dict:
    """One run's spec (runs.runfolder.spec_of): its trainer preset and resolved config, what
    the workflow writes into the run folder and the trainer trains. Raises the trainer's
    ConfigFieldError for a value it refuses."""
    from algos.config import BUDGET_FIELDS, make_config
    from runs.runfolder import spec_of

    from runs.run_layout import parse_task_id

    train = cfg["train"]
    name, level = parse_task_id(task)
    overrides = dict(task=name, level=level, bound=float(bound), algo=algo, seed=int(seed), backend=cfg["backend"])
    overrides.update({k: int(train[k]) for k in BUDGET_FIELDS if train.get(k) is not None})
    sets = [f"{key}={value}" for key, value in sorted(train.get("set", {}).items())]
    return spec_of(train["preset"], make_config(train["preset"], overrides, sets))


def _sweep_key(field: str, cfg: Mapping) -> str:
    """The sweep config key that sets a trainer config field."""
    from algos.config import BUDGET_FIELDS

    if field in cfg["train"].get("set", {}):
        return f"train.set.{field}"
    if field in BUDGET_FIELDS:
        return f"train.{field}"
    return {"seed": "seeds", "bound": "bounds", "task": "tasks", "level": "tasks", "algo": "algos",
            "backend": "backend"}.get(field, "train")


def run_specs(cfg: Mapping) -> dict[str, dict]:
    """Every run's spec, by run id (runs.run_layout.run_id): building them is the trainer's check of
    the sweep's options; a refusal becomes a ConfigError naming the sweep config key."""
    from algos.config import ConfigFieldError
    from runs.run_layout import run_id

    env_keys = [key for key in cfg["train"].get("set", {}) if key.startswith("env.")]
    specs = {}
    for task in cfg["tasks"]:
        if env_keys and cfg["backend"] == "builtin":  # imports the task (JAX) only when options are set
            import envs

            for key in env_keys:
                try:
                    envs.check_task_options(task, [key[4:]])
                except ValueError as err:
                    raise ConfigError(f"config key 'train.set.{key}': the trainer refuses it for task {task}: "
                                      f"{err}") from None
        for algo in cfg["algos"]:
            for bound in cfg["task_bounds"][task]:
                for seed in cfg["seeds"]:
                    try:
                        specs[run_id(task, bound, algo, seed)] = run_spec(cfg, task, bound, algo, seed)
                    except ConfigFieldError as err:
                        raise ConfigError(f"config key '{_sweep_key(err.field, cfg)}': the trainer refuses it for "
                                          f"task {task}, algo {algo}: {err}") from None
    return specs


def validate(cfg: Mapping) -> dict:
    """Check a merged config; returns it with `seeds` expanded to a list."""
    validator = _Validator(schema())
    errors = sorted(validator.iter_errors(cfg), key=lambda e: list(map(str, e.absolute_path)))
    if errors:
        key = tuple(errors[0].absolute_path)
        if errors[0].validator == "additionalProperties" and isinstance(errors[0].instance, dict):
            allowed = errors[0].schema.get("properties", {})
            key += tuple(sorted(k for k in errors[0].instance if k not in allowed))[:1]
        raise ConfigError(_schema_error_message(errors[0]), key)
    check_tasks(cfg)
    check_task_sizes(cfg)
    check_grid_values(cfg)
    out = copy.deepcopy(dict(cfg))
    out["task_bounds"] = task_bounds(cfg)
    # every bound of the sweep, for what lists them all (the run grid takes task_bounds)
    out["bounds"] = sorted({b for bounds in out["task_bounds"].values() for b in bounds})
    out["thresholds"] = check_thresholds(cfg["thresholds"])
    seeds = cfg["seeds"]
    out["seeds"] = list(range(seeds)) if isinstance(seeds, int) else sorted(seeds)
    if cfg.get("adaptive"):
        out["adaptive"] = check_adaptive(cfg)
        out["seeds"] = list(range(out["adaptive"]["max_seeds"]))  # every seed a round may add
    check_curves(cfg)
    out["specs"] = run_specs(out)
    return out


def check_curves(cfg: Mapping) -> None:
    """W&B asked for (`curves.wandb.enabled`) needs wandb installed: said before any job starts
    (found without importing it)."""
    import importlib.util

    if ((cfg.get("curves") or {}).get("wandb") or {}).get("enabled") and importlib.util.find_spec("wandb") is None:
        raise ConfigError("config key 'curves.wandb.enabled': true, but wandb is not installed: "
                          'pip install -e ".[wandb]"', ("curves", "wandb", "enabled"))


# What the engine defines and the sweep uses as it is unless a config says otherwise: the tier
# thresholds are the paper's Table 1 as metrics.thresholds holds them (not restated in a file).
ENGINE_DEFAULTS = {"thresholds": PAPER_THRESHOLDS}
ENGINE_SOURCE = "metrics.thresholds.PAPER_THRESHOLDS"


def _shown_path(path) -> str:
    """A config file as an error names it: relative to the repository when inside it."""
    path = Path(path)
    try:
        return str(path.resolve().relative_to(REPO))
    except (ValueError, OSError):
        return str(path)


def _sets(layer: Mapping, key: tuple) -> bool:
    """Whether a layer sets `key` (a list or value replaces everything below it; a key of
    train.set may hold dots, `env.walls`)."""
    node = layer
    for i, part in enumerate(key):
        if not isinstance(node, Mapping):
            return True
        if ".".join(map(str, key[i:])) in node:
            return True
        if part not in node:
            return False
        node = node[part]
    return True


def _key_of(err: ConfigError) -> tuple | None:
    """The key an error is about: its own, else the one its message names (`config key 'a.b[0]'`)."""
    if err.key is not None:
        return err.key
    found = re.search(r"config key '([^']*)'", str(err))
    if not found:
        return None
    return tuple(int(p) if p.isdigit() else p for p in re.findall(r"[^.\[\]]+", found.group(1)))


def _with_source(err: ConfigError, layers: list) -> ConfigError:
    """The error with the file (or option) that set its key in front: the last layer setting it."""
    key = _key_of(err)
    source = next((name for name, layer in reversed(layers) if name and _sets(layer, key)), None) \
        if key is not None else None
    return ConfigError(f"{source}: {err}", err.key) if source else err


def load_preset(name: str, presets_dir: Path = PRESETS_DIR, base_file: Path = BASE_CONFIG) -> dict:
    """A preset merged onto what it extends: `extends: NAME` (another preset), else the base config."""
    merged = {}
    for _, layer in preset_layers(name, presets_dir, base_file):
        merged = deep_merge(merged, layer)
    return merged


def preset_layers(name: str, presets_dir: Path = PRESETS_DIR, base_file: Path = BASE_CONFIG) -> list:
    """(source, mapping) in merge order: the engine's defaults, the base config, then the preset
    chain from the one furthest down `extends` to `name`."""
    presets = available_presets(presets_dir)
    layers, key = [], "preset"
    while name is not None:
        if name not in presets:
            raise ConfigError(f"config key '{key}': {name!r} is not one of {presets} (in {presets_dir})")
        if name in (n for n, _ in layers):
            chain = " -> ".join([n for n, _ in layers] + [name])
            raise ConfigError(f"{presets_dir / (name + '.yaml')}: 'extends' goes round in a circle: {chain}")
        layer = _load_mapping(presets_dir / f"{name}.yaml")
        layers.append((name, layer))
        name, key = layer.get("extends"), f"extends' in '{name}.yaml"
    return ([(ENGINE_SOURCE, ENGINE_DEFAULTS), (_shown_path(base_file), _load_mapping(base_file))]
            + [(_shown_path(presets_dir / f"{n}.yaml"), {k: v for k, v in layer.items() if k != "extends"})
               for n, layer in reversed(layers)])


def _load_mapping(path: Path) -> dict:
    data = _load_yaml(path)
    if data is None:  # only comments: nothing differs
        return {}
    if not isinstance(data, Mapping):
        raise ConfigError(f"{path}: expected a mapping of config keys, got {type(data).__name__}")
    return dict(data)


FROM_TRAINER = "from_trainer"


def fill_from_trainer(cfg: Mapping) -> dict:
    """`train.KEY: from_trainer` becomes the trainer preset's value (algos.config), so a sweep
    preset can list the budget (a Snakemake param, shown in the report) without restating it."""
    train = cfg.get("train")
    if not isinstance(train, Mapping) or FROM_TRAINER not in train.values():
        return dict(cfg)
    from algos.config import BUDGET_FIELDS, PRESETS, make_config

    if train.get("preset") not in PRESETS:
        raise ConfigError(f"config key 'train.preset': {train.get('preset')!r} is not one of {list(PRESETS)}")
    trainer = make_config(train["preset"])
    filled = dict(train)
    for key, value in train.items():
        if value == FROM_TRAINER:
            if key not in BUDGET_FIELDS:
                raise ConfigError(f"config key 'train.{key}': {FROM_TRAINER} is allowed only for "
                                  f"{', '.join(BUDGET_FIELDS)}")
            filled[key] = getattr(trainer, key)
    return {**cfg, "train": filled}


def resolve(user_cfg: Mapping, presets_dir: Path = PRESETS_DIR, base_file: Path = BASE_CONFIG,
            layers: list | None = None) -> dict:
    """Merge `user_cfg` onto the preset it names and validate the result. `layers`: the user's
    (source, mapping) in merge order (`user_layers`), whose sources an error then names."""
    layers = list(layers or [])
    try:
        name = user_cfg.get("preset", "default")
        below = preset_layers(name, presets_dir, base_file)
        layers = below + layers
        preset = merged_user_config(below)
        overrides = {k: v for k, v in user_cfg.items() if k != "preset"}
        merged = _in_schema_order(deep_merge(preset, overrides), _load_yaml(SCHEMA_FILE))
        return validate({**fill_from_trainer(merged), "preset": name})
    except ConfigError as err:
        raise _with_source(err, layers) from None


def _number(text: str):
    """The number a text reads as by Snakemake's --config parser (int, else float), else None."""
    for kind in (int, float):
        try:
            return kind(text)
        except ValueError:  # also an int past Python's digit limit
            pass
    return None


def _typed(value, top: bool = True):
    """Snakemake's --config value with the numbers inside lists and mappings as numbers (its parser
    types a top-level value but leaves `bounds=[15,25]` as ['15', '25'])."""
    if isinstance(value, Mapping):
        return {k: _typed(v, False) for k, v in value.items()}
    if isinstance(value, list):
        return [_typed(v, False) for v in value]
    if isinstance(value, str) and not top:
        number = _number(value)
        return value if number is None else number
    return value


def user_layers(paths, overrides: Mapping | None = None, flag: str = "--config") -> list:
    """(source, mapping) of each config file in merge order, then the command line's overrides."""
    layers = [(_shown_path(p), load_user_config(p)) for p in paths]
    return layers + ([(flag, dict(overrides))] if overrides else [])


def merged_user_config(layers: list) -> dict:
    """The layers' mappings merged in order."""
    user = {}
    for _, layer in layers:
        user = deep_merge(user, layer)
    return user


def resolve_snakemake(config: Mapping, workflow) -> dict:
    """`resolve` of the config Snakemake merged, for the Snakefile: each config file read again
    strictly (a key written twice is an error; Snakemake keeps the last), --config's numbers in
    lists and mappings as numbers, and every error naming the file or option that set the key.
    Snakemake's order: the Snakefile's configfile (config/config.yaml), each --configfile, --config."""
    settings = workflow.config_settings
    cli_files = [Path(p).resolve() for p in settings.configfiles]
    own = [] if getattr(settings, "replace_workflow_config", False) else \
        [p for p in workflow.configfiles if Path(p).resolve() not in cli_files]
    overrides = _typed(dict(settings.config)) if settings.config else {}
    layers = user_layers([*own, *cli_files], overrides, "--config")
    # Snakemake applied --config last; applying its typed values again gives the same config, typed
    return resolve(deep_merge(config, overrides), layers=layers)


def parse_overrides(items: list[str], flag: str = "--set") -> dict:
    """`a.b=value` pairs (value parsed as YAML) into a nested mapping; `flag` names the
    command-line option in errors."""
    out: dict = {}
    for item in items:
        key, sep, raw = item.partition("=")
        if not sep:
            raise ConfigError(f"{flag} {item!r}: expected KEY=VALUE")
        node = out
        *parents, leaf = key.split(".")
        for part in parents:
            node = node.setdefault(part, {})
            if not isinstance(node, dict):
                raise ConfigError(f"{flag} {item!r}: {part!r} is set to a value above, not a mapping")
        try:
            node[leaf] = strict_yaml.load(raw)
        except (yaml.YAMLError, ValueError, RecursionError) as err:
            raise ConfigError(f"{flag} {item!r}: the value is not valid YAML: {' '.join(str(err).split())}") from None
    return out


def load_user_config(path) -> dict:
    """A user's config file (config/config.yaml's form): a mapping of config keys, or nothing."""
    return _load_mapping(Path(path))


def main(argv: list[str] | None = None) -> int:
    from metrics.cli import OneLineParser, one_line

    parser = OneLineParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("config", nargs="?", default=str(DEFAULT_CONFIG))
    parser.add_argument("--set", action="append", default=[], metavar="KEY=VALUE",
                        help="override a key (dots for nesting), e.g. --set preset=tiny")
    args = parser.parse_args(argv)
    try:
        layers = user_layers([args.config], parse_overrides(args.set), "--set")
        resolved = resolve(merged_user_config(layers), layers=layers)
    except ConfigError as e:
        print(f"invalid configuration: {one_line(e)}", file=sys.stderr)
        return 1
    specs = resolved.pop("specs")
    json.dump(resolved, sys.stdout, indent=2)
    print(f"({len(specs)} run specs)", file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())
