"""Reference results, and a sweep compared against them ("is my result normal?").

A reference is a YAML file: what it is (`name`, `source`, the `command` that makes it), what
made it (`made_with`: the engine's version, the code versions the runs recorded, the bootstrap
settings and the Dnorm+ definition), per algorithm and phase the IQM of each metric (with its
95 % CI where the source gives one) and the tier (with P(tier) where known), per condition the
mean and std over seeds where known, and `notes`. Shipped references live in
metrics/references/ and are named by preset.

`compare` sets a sweep's IQMs, CIs and tiers (stage 2 and 3's iqm.csv and tiers.csv) beside a
reference's: per algorithm, phase and metric whether the reference value lies inside the
sweep's 95 % CI, and per algorithm and phase the tier on each side. Where the two sides average
Dnorm+ by different definitions (metrics.dnorm_plus), `matching_definition` first recomputes the
sweep's Dnorm+ and tiers by the reference's, from the sweep's stage-2 files; `mismatches` says
what else keeps the two apart (algorithm names, the task x bound grid, the estimator).
"""

from __future__ import annotations

import difflib
import json
import os
import re
import warnings
from dataclasses import dataclass, replace
from pathlib import Path

import numpy as np
import pandas as pd
import yaml

from . import strict_yaml
from .atomic import write_text
from .dnorm_plus import DEFINITIONS as DNORM_PLUS
from .safe_text import read_csv
from .schema import METRICS, PHASES, RUN_KEYS, EpisodeTableError, MetricsWarning, require_columns

FORMAT = "saferl-eval reference"
VERSION = 1
SHIPPED = Path(__file__).resolve().parent / "references"
# presets that compare against another preset's reference (the paper's protocol on other tasks)
PRESET_REFERENCE = {"paper-builtin": "paper"}
IQM_FIELDS = ("algo", "phase", "metric", "iqm")
TIER_FIELDS = ("algo", "phase", "tier")
CONDITION_FIELDS = ("task", "bound", "algo", "phase")
CONDITION_NUMBERS = ("bound", "n_seeds", "tier") + tuple(f"{m}_{s}" for m in METRICS for s in ("mean", "std"))
ESTIMATORS = ("stratified", "pooled")  # metrics.aggregate's; not imported, so loading stays light
N_TIERS = 5
TABLE_1 = "the paper's Table 1"
# the stage-2 files the sweep's Dnorm+ is recomputed from under another definition
RECOMPUTE_FILES = ("run_metrics.parquet", "iterates.parquet", "final_episodes.parquet", "aggregate.json")


class ReferenceError(ValueError):
    """A reference file is malformed."""


def shipped_path(name: str) -> Path:
    """The shipped reference file for a reference or preset name (it may not exist)."""
    return SHIPPED / f"{PRESET_REFERENCE.get(name, name)}.yaml"


def resolve(name_or_path) -> Path:
    """A path, or the name of a shipped reference (`paper`, `default`, ...)."""
    path = Path(name_or_path)
    if path.suffix in (".yaml", ".yml", ".json") or path.exists():
        return path
    shipped = shipped_path(str(name_or_path))
    if not shipped.exists():
        known = sorted(p.stem for p in SHIPPED.glob("*.yaml"))
        raise ReferenceError(f"{name_or_path}: neither a file nor a shipped reference (shipped: {', '.join(known) or 'none'})")
    return shipped


def _records(path, ref: dict, key: str, fields, numeric) -> pd.DataFrame:
    rows = ref.get(key) or []
    if not isinstance(rows, list):
        raise ReferenceError(f"{path}: field {key!r} must be a list of entries, got {type(rows).__name__}")
    for i, row in enumerate(rows):
        if not isinstance(row, dict):
            raise ReferenceError(f"{path}: {key}[{i}] must be a mapping, got {row!r}")
        missing = [f for f in fields if f not in row]
        if missing:
            raise ReferenceError(f"{path}: {key}[{i}] lacks field(s) {missing}")
        if row["phase"] not in PHASES:
            raise ReferenceError(f"{path}: {key}[{i}].phase {row['phase']!r} is not one of {', '.join(PHASES)}")
        if "metric" in row and row["metric"] not in METRICS:
            raise ReferenceError(f"{path}: {key}[{i}].metric {row['metric']!r} is not one of {', '.join(METRICS)}")
        for f in numeric:
            value = row.get(f)
            if value is not None and (isinstance(value, bool) or not isinstance(value, (int, float))):
                raise ReferenceError(f"{path}: {key}[{i}].{f} must be a number, got {value!r}")
        tier = row.get("tier")
        if tier is not None and tier not in range(N_TIERS):  # a hand-typed 2.5 or 5 is a typo
            raise ReferenceError(f"{path}: {key}[{i}].tier must be one of 0..{N_TIERS - 1}, got {tier!r}")
        # a CI the source does not give is absent; half of one is a typo
        if ("ci_low" in row) != ("ci_high" in row):
            raise ReferenceError(f"{path}: {key}[{i}] gives only one of ci_low, ci_high ({row!r})")
        low, high = row.get("ci_low"), row.get("ci_high")
        if low is not None and high is not None and low > high:
            raise ReferenceError(f"{path}: {key}[{i}].ci_low {low!r} exceeds ci_high {high!r}")
    names = [f for f in fields if f not in ("iqm", "tier")]  # what identifies an entry
    seen = set()
    for i, row in enumerate(rows):
        k = tuple(row[f] for f in names)
        if k in seen:
            raise ReferenceError(f"{path}: {key}[{i}] repeats an earlier entry's {', '.join(names)} {k!r}")
        seen.add(k)
    return pd.DataFrame(rows)


def _made_with(path, ref: dict) -> dict:
    made = ref.get("made_with") or {}
    if not isinstance(made, dict):
        raise ReferenceError(f"{path}: field 'made_with' must be a mapping, got {made!r}")
    for field, allowed in (("dnorm_plus", DNORM_PLUS), ("estimator", ESTIMATORS)):
        if field in made and made[field] not in allowed:
            raise ReferenceError(f"{path}: made_with.{field} is {made[field]!r}, not one of {', '.join(allowed)}")
    return made


def _grid(path, ref: dict, conditions: pd.DataFrame):
    """The reference's (task, bound) grid: its `grid` field (tasks x bounds), else its conditions',
    else None (unknown)."""
    grid = ref.get("grid")
    if grid is None:
        return frozenset(zip(conditions["task"], conditions["bound"].astype(float))) if len(conditions) else None
    tasks, bounds = (grid.get(k) if isinstance(grid, dict) else None for k in ("tasks", "bounds"))
    if not (isinstance(tasks, list) and tasks and all(isinstance(t, str) for t in tasks)):
        raise ReferenceError(f"{path}: grid.tasks must be a list of task names, got {tasks!r}")
    if not (isinstance(bounds, list) and bounds and all(isinstance(b, (int, float)) and not isinstance(b, bool)
                                                        and b > 0 for b in bounds)):
        raise ReferenceError(f"{path}: grid.bounds must be a list of positive numbers, got {bounds!r}")
    return frozenset((t, float(b)) for t in tasks for b in bounds)


def load_reference(name_or_path) -> dict:
    """A checked reference: its header fields plus `iqm` and `tiers` as DataFrames."""
    path = resolve(name_or_path)
    try:
        ref = strict_yaml.load(path.read_text())  # the project's one YAML reader (alias bombs, repeated keys)
    except (OSError, yaml.YAMLError) as err:
        raise ReferenceError(f"{path}: cannot be read as a reference: {str(err).splitlines()[0]}") from None
    if not isinstance(ref, dict) or ref.get("format") != FORMAT:
        raise ReferenceError(f"{path}: not a saferl-eval reference (field 'format' must be {FORMAT!r})")
    if ref.get("version") != VERSION:
        raise ReferenceError(f"{path}: field 'version' is {ref.get('version')!r}; this engine reads version {VERSION}")
    for field in ("name", "source"):
        if not ref.get(field):
            raise ReferenceError(f"{path}: field {field!r} is missing")
    for field in ("command",):
        if field in ref and not isinstance(ref[field], str):
            raise ReferenceError(f"{path}: field {field!r} must be text, got {ref[field]!r}")
    notes = ref.get("notes") or []
    if not (isinstance(notes, list) and all(isinstance(n, str) for n in notes)):
        raise ReferenceError(f"{path}: field 'notes' must be a list of texts, got {notes!r}")
    out = dict(ref, path=str(path), notes=notes, made_with=_made_with(path, ref))
    out["iqm"] = _records(path, ref, "iqm", IQM_FIELDS, ("iqm", "ci_low", "ci_high"))
    out["tiers"] = _records(path, ref, "tiers", TIER_FIELDS, ("tier", "p_tier"))
    out["conditions"] = _records(path, ref, "conditions", CONDITION_FIELDS, CONDITION_NUMBERS)
    out["grid"] = _grid(path, ref, out["conditions"])
    if out["iqm"].empty and out["tiers"].empty:
        raise ReferenceError(f"{path}: holds no 'iqm' and no 'tiers' entries")
    return out


def _engine_version() -> str:
    try:
        from importlib.metadata import version

        return f"saferl-eval {version('saferl-eval')}"
    except Exception:  # a checkout that is not installed
        return "saferl-eval (not installed)"


def _code_versions(runs_root) -> list[str]:
    versions = set()
    for path in Path(runs_root).rglob("run.json"):
        try:
            meta = json.loads(path.read_text())
        except (OSError, ValueError):
            raise EpisodeTableError(f"{path}: cannot be read as JSON") from None
        versions.update(meta.get("code_versions") or [meta.get("code_version") or "not recorded"])
    return sorted(versions)


def _plain(df: pd.DataFrame) -> list[dict]:
    """Rows as plain Python values (YAML without numpy tags), NaN as null."""
    return [{k: (None if isinstance(v, float) and np.isnan(v) else v.item() if hasattr(v, "item") else v)
             for k, v in row.items()} for row in df.to_dict("records")]


def make_reference(results_dir, name: str, source: str, command: str, runs_root=None) -> dict:
    """A reference from a finished sweep's stage-2 and stage-3 folder (iqm.csv, tiers.csv,
    conditions.csv, aggregate.json); the runs' code versions from their run.json files."""
    folder = Path(results_dir)
    try:
        iqm = read_csv(folder / "iqm.csv")  # names as text: an algorithm named NA stays one
        tiers = read_csv(folder / "tiers.csv")
        conditions = read_csv(folder / "conditions.csv")
        meta = json.loads((folder / "aggregate.json").read_text())
    except (OSError, ValueError) as err:
        raise EpisodeTableError(f"{folder}: not a finished results folder ({err}); run `saferl-eval evaluate`") from None
    tiers = tiers.assign(p_tier=[row[f"p_tier{int(row['tier'])}"] for _, row in tiers.iterrows()])
    cond_cols = ["task", "bound", "algo", "phase", "n_seeds"] + [f"{m}_{s}" for m in METRICS for s in ("mean", "std")]
    cond_cols += ["tier"]
    return {
        "format": FORMAT, "version": VERSION, "name": name, "source": source, "command": command,
        "made_with": {"engine": _engine_version(),
                      "code_versions": _code_versions(runs_root) if runs_root else ["not recorded"],
                      **{k: meta.get(k) for k in ("reps", "seed", "estimator", "dnorm_plus", "n_runs")}},
        "notes": [],
        "grid": {"tasks": sorted(conditions["task"].unique().tolist()),
                 "bounds": sorted(float(b) for b in conditions["bound"].unique())},
        "iqm": _plain(iqm[["algo", "phase", "metric", "iqm", "ci_low", "ci_high"]]),
        "tiers": _plain(tiers[["algo", "phase", "tier", "p_tier"]]),
        "conditions": _plain(conditions[[c for c in cond_cols if c in conditions.columns]]),
    }


def write_reference(ref: dict, path) -> None:
    write_text(path, yaml.safe_dump(ref, sort_keys=False, width=120))


def compare(iqm: pd.DataFrame, tiers: pd.DataFrame, reference: dict,
            not_comparable=()) -> tuple[pd.DataFrame, pd.DataFrame]:
    """(metrics, tiers) of a sweep against a reference.

    metrics: per algo, phase, metric of the reference: the sweep's iqm, ci_low, ci_high, the
    reference's value (ref_iqm, and its ref_ci_low/high where given) and status: `inside` (the
    reference lies in the sweep's 95 % CI), `outside`, `not in sweep`, or `not comparable` (a
    metric of `not_comparable`: the two sides define it differently).
    tiers: per algo and phase of the reference: the sweep's tier and P(tier), the reference's
    tier and whether they are equal."""
    require_columns(iqm, ["algo", "phase", "metric", "iqm", "ci_low", "ci_high"], "iqm.csv")
    require_columns(tiers, ["algo", "phase", "tier"], "tiers.csv")
    ref = reference["iqm"]
    keys = ["algo", "phase", "metric"]
    if ref.empty:
        metrics = pd.DataFrame(columns=keys + ["iqm", "ci_low", "ci_high", "ref_iqm", "status"])
    else:
        ref = ref.rename(columns={"iqm": "ref_iqm", "ci_low": "ref_ci_low", "ci_high": "ref_ci_high"})
        metrics = ref.merge(iqm[keys + ["iqm", "ci_low", "ci_high"]], on=keys, how="left")
        inside = (metrics["ci_low"] <= metrics["ref_iqm"]) & (metrics["ref_iqm"] <= metrics["ci_high"])
        metrics["status"] = np.where(metrics["iqm"].isna(), "not in sweep", np.where(inside, "inside", "outside"))
        metrics.loc[metrics["metric"].isin(list(not_comparable)), "status"] = "not comparable"
        metrics = metrics[keys + ["iqm", "ci_low", "ci_high"] + [c for c in ("ref_iqm", "ref_ci_low", "ref_ci_high")
                                                                 if c in metrics.columns] + ["status"]]
    rt = reference["tiers"]
    if rt.empty:
        tier_table = pd.DataFrame(columns=["algo", "phase", "tier", "p_tier", "ref_tier", "equal"])
    else:
        own = tiers.assign(p_tier=[row.get(f"p_tier{int(row['tier'])}", np.nan) for _, row in tiers.iterrows()])
        tier_table = (rt.rename(columns={"tier": "ref_tier", "p_tier": "ref_p_tier"})
                      .merge(own[["algo", "phase", "tier", "p_tier"]], on=["algo", "phase"], how="left"))
        tier_table["equal"] = tier_table["tier"] == tier_table["ref_tier"]
        tier_table = tier_table[["algo", "phase", "tier", "p_tier", "ref_tier", "equal"]]
    return metrics.reset_index(drop=True), tier_table.reset_index(drop=True)


def n_comparable(metrics: pd.DataFrame, tier_table: pd.DataFrame) -> int:
    """How many values and tiers the two sides have in common."""
    return int(metrics["status"].isin(["inside", "outside"]).sum() + tier_table["tier"].notna().sum())


def summary_line(metrics: pd.DataFrame, tier_table: pd.DataFrame, name: str) -> str:
    n_in = int((metrics["status"] == "inside").sum())
    n_sweep = int(metrics["status"].isin(["inside", "outside"]).sum())
    left = [f"{n} {'is' if n == 1 else 'are'} {said}" for status, said in (("not in sweep", "not in the sweep"),
                                                                        ("not comparable", "not comparable"))
            if (n := int((metrics["status"] == status).sum()))]
    known = tier_table[tier_table["tier"].notna()]
    return (f"{n_in} of {n_sweep} reference values of {name!r} lie inside the sweep's 95 % CI"
            f"{''.join('; ' + x for x in left)}; "
            f"tiers equal for {int(known['equal'].sum())} of {len(known)} (algorithm, phase) pairs.")


def read_results(results_dir) -> tuple[pd.DataFrame, pd.DataFrame]:
    folder = os.fspath(results_dir)
    try:
        return read_csv(os.path.join(folder, "iqm.csv")), read_csv(os.path.join(folder, "tiers.csv"))
    except (OSError, ValueError) as err:
        raise EpisodeTableError(f"{folder}: needs iqm.csv and tiers.csv ({err}); run `saferl-eval evaluate`") from None


@dataclass(frozen=True)
class Sweep:
    """A results folder as `compare` reads it: iqm.csv and tiers.csv, and where present
    aggregate.json (`meta`) and the (task, bound) grid (conditions.csv, else run_metrics.parquet)."""
    folder: str
    iqm: pd.DataFrame
    tiers: pd.DataFrame
    meta: dict | None = None
    grid: frozenset | None = None
    not_comparable: tuple = ()  # metrics defined differently on the two sides, not recomputable


def read_sweep(results_dir) -> Sweep:
    folder = os.fspath(results_dir)
    iqm, tiers = read_results(folder)
    meta, grid = None, None
    path = os.path.join(folder, "aggregate.json")
    try:
        if os.path.exists(path):
            meta = json.loads(Path(path).read_text())
        path = os.path.join(folder, "conditions.csv")
        if os.path.exists(path):
            cond = read_csv(path)[["task", "bound"]]
        else:
            path = os.path.join(folder, "run_metrics.parquet")
            cond = pd.read_parquet(path, columns=["task", "bound"]) if os.path.exists(path) else None
        if cond is not None:
            grid = frozenset(zip(cond["task"].astype(str), cond["bound"].astype(float)))
    except (OSError, ValueError) as err:
        raise EpisodeTableError(f"{path}: cannot be read ({str(err).splitlines()[0]})") from None
    return Sweep(folder, iqm, tiers, meta if isinstance(meta, dict) else None, grid)


def sweep_definition(sweep: Sweep) -> str | None:
    """The sweep's Dnorm+ definition (aggregate.json), None when unknown; a folder from before
    the option existed (no key) used eq. 5 and 6, `paper`."""
    return None if sweep.meta is None else sweep.meta.get("dnorm_plus", "paper")


def _recomputed(sweep: Sweep, definition: str, thresholds):
    """Stage 2 and 3 again on the sweep's own runs, with Dnorm+ by `definition`: (iqm, tiers)."""
    from .aggregate import aggregate
    from .summary import Summary, sort_frame
    from .thresholds import load_thresholds
    from .tiers import assign_tiers

    folder = sweep.folder
    runs = pd.read_parquet(os.path.join(folder, "run_metrics.parquet"))
    iterates = pd.read_parquet(os.path.join(folder, "iterates.parquet"))
    if sweep_definition(sweep) == "saferleval":  # back to eq. 6: a run's training Dnorm+ over all its iterates
        keys = list(RUN_KEYS) + ["phase"]
        train = sort_frame(iterates[iterates["phase"] == "train"], keys + ["iteration"])
        per_run = train.groupby(keys, sort=False)["Dnorm_plus"].agg(["sum", "size"])
        mean = (per_run["sum"] / per_run["size"]).reindex(pd.MultiIndex.from_frame(runs[keys])).to_numpy()
        is_train = (runs["phase"] == "train").to_numpy()
        runs.loc[is_train, "Dnorm_plus"] = mean[is_train]
    # CDFs are not needed: no histograms (so the CDF step divides 0 by 0, harmlessly); the
    # warnings about the sweep's strata were printed when it was aggregated
    histograms = pd.DataFrame({**{k: runs[k].iloc[:0] for k in list(RUN_KEYS) + ["phase"]},
                               "bin": np.zeros(0, np.int64), "count": np.zeros(0, np.int64)})
    meta = sweep.meta
    with warnings.catch_warnings(), np.errstate(invalid="ignore", divide="ignore"):
        warnings.simplefilter("ignore", MetricsWarning)
        again = aggregate(Summary(iterates, runs, histograms, pd.read_parquet(os.path.join(folder, "final_episodes.parquet"))),
                          reps=meta.get("reps", 2000), seed=meta.get("seed", 0),
                          estimator=meta.get("estimator", "stratified"), dnorm_plus=definition)
    return again.iqm, assign_tiers(again, load_thresholds(thresholds))["tiers"]


def matching_definition(sweep: Sweep, reference: dict, thresholds=None) -> tuple[Sweep, list[str]]:
    """The sweep with Dnorm+ as the reference defines it (made_with.dnorm_plus), and what was done.

    Where the definitions differ, the sweep's Dnorm+ IQMs, CIs and its tiers (Dnorm+ decides
    tiers 3 and 4) are recomputed from its stage-2 files with its own bootstrap settings; the
    tiers with `thresholds` (a file), else the folder's thresholds.yaml (the sweep writes one),
    else the paper's Table 1. Without those files Dnorm+ is `not comparable`."""
    want, have = (reference.get("made_with") or {}).get("dnorm_plus"), sweep_definition(sweep)
    if want is None or want == have:
        return sweep, []
    if have is None:
        return sweep, [f"the sweep's Dnorm+ definition is unknown ({sweep.folder} has no aggregate.json); "
                       f"the reference's is {want!r}: Dnorm+ compared as it is"]
    missing = [f for f in RECOMPUTE_FILES if not os.path.exists(os.path.join(sweep.folder, f))]
    if missing:
        return replace(sweep, not_comparable=("Dnorm_plus",)), [
            f"the sweep's Dnorm+ follows {have!r}, the reference's {want!r}, and {sweep.folder} lacks "
            f"{', '.join(missing)} to recompute it: Dnorm+ not compared"]
    if thresholds is None and os.path.exists(os.path.join(sweep.folder, "thresholds.yaml")):
        thresholds = os.path.join(sweep.folder, "thresholds.yaml")
    iqm, tiers = _recomputed(sweep, want, thresholds)
    redone = iqm[iqm["metric"] == "Dnorm_plus"]
    kept = sweep.iqm[sweep.iqm["metric"] != "Dnorm_plus"]
    return replace(sweep, iqm=pd.concat([kept, redone[kept.columns.intersection(redone.columns)]], ignore_index=True),
                   tiers=tiers), [
        f"the sweep's Dnorm+ follows {have!r}, the reference's {want!r}: the sweep's Dnorm+ and tiers are "
        f"recomputed by {want!r} from its run_metrics.parquet and iterates.parquet "
        f"(thresholds: {thresholds or TABLE_1})"]


def _key(name: str) -> str:
    return re.sub(r"[^0-9a-z]", "", str(name).lower())  # PPOLag, ppo_lag and PPO-Lag alike


def _closest(name, others) -> str:
    by_key = {}
    for other in sorted(others):
        by_key.setdefault(_key(other), other)
    found = difflib.get_close_matches(_key(name), list(by_key), n=2, cutoff=0.5)
    return ", ".join(by_key[k] for k in found) or "none"


def _grid_text(grid) -> str:
    tasks = sorted({t for t, _ in grid})
    bounds = sorted({b for _, b in grid})
    return f"tasks {', '.join(tasks)} and bounds {', '.join(f'{b:g}' for b in bounds)}"


def mismatches(sweep: Sweep, reference: dict) -> list[str]:
    """Why the sweep and the reference may not compare like with like, one sentence each:
    reference algorithms the sweep lacks (with the closest names on each side), different task x
    bound grids, different estimators."""
    out = []
    name = reference["name"]
    ours = set(sweep.iqm["algo"].astype(str)) | set(sweep.tiers["algo"].astype(str))
    theirs = set(reference["iqm"].get("algo", pd.Series(dtype=str))) | set(reference["tiers"].get("algo", pd.Series(dtype=str)))
    if theirs - ours:
        # a name on both sides is matched already: the candidates are the unmatched ones
        only_ref = "; ".join(f"{a} (closest in the sweep: {_closest(a, ours - theirs)})" for a in sorted(theirs - ours))
        only_sweep = "; ".join(f"{a} (closest in the reference: {_closest(a, theirs - ours)})"
                               for a in sorted(ours - theirs))
        out.append(f"algorithm names differ: only in reference {name!r}: {only_ref}"
                   + (f"; only in the sweep: {only_sweep}" if only_sweep else ""))
    if sweep.grid is not None and reference.get("grid") is not None and sweep.grid != reference["grid"]:
        ours_text, theirs_text = _grid_text(sweep.grid), _grid_text(reference["grid"])
        if ours_text == theirs_text:  # the same tasks and bounds, not the same pairs
            ours_text += f" ({len(sweep.grid)} pairs)"
            theirs_text += f" ({len(reference['grid'])} pairs)"
        out.append(f"the task x bound grids differ, so the IQMs average different conditions: the sweep has "
                   f"{ours_text}; reference {name!r} has {theirs_text}")
    want = (reference.get("made_with") or {}).get("estimator")
    have = None if sweep.meta is None else sweep.meta.get("estimator")
    if want and have and want != have:
        out.append(f"the sweep's IQMs use the {have!r} estimator, reference {name!r}'s the {want!r} one")
    return out


__all__ = ["ReferenceError", "Sweep", "compare", "load_reference", "make_reference", "matching_definition",
           "mismatches", "n_comparable", "read_results", "read_sweep", "resolve", "shipped_path", "summary_line",
           "write_reference"]
