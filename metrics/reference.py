"""Reference results, and a sweep compared against them ("is my result normal?").

A reference is a YAML file: what it is (`name`, `source`, the `command` that makes it), what
made it (`made_with`: the engine's version, the code versions the runs recorded, the bootstrap
settings and the Dnorm+ definition), per algorithm and phase the IQM of each metric (with its
95 % CI where the source gives one) and the tier (with P(tier) where known), per condition the
mean and std over seeds where known, and `notes`. Shipped references live in
metrics/references/ and are named by preset.

`compare` sets a sweep's IQMs, CIs and tiers (stage 2 and 3's iqm.csv and tiers.csv) beside a
reference's: per algorithm, phase and metric whether the reference value lies inside the
sweep's 95 % CI, and per algorithm and phase the tier on each side.
"""

from __future__ import annotations

import json
import os
from pathlib import Path

import numpy as np
import pandas as pd
import yaml

from .atomic import write_text
from .schema import METRICS, PHASES, EpisodeTableError, require_columns

FORMAT = "saferl-eval reference"
VERSION = 1
SHIPPED = Path(__file__).resolve().parent / "references"
# presets that compare against another preset's reference (the paper's protocol on other tasks)
PRESET_REFERENCE = {"paper-builtin": "paper"}
IQM_FIELDS = ("algo", "phase", "metric", "iqm")
TIER_FIELDS = ("algo", "phase", "tier")


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
    return pd.DataFrame(rows)


def load_reference(name_or_path) -> dict:
    """A checked reference: its header fields plus `iqm` and `tiers` as DataFrames."""
    path = resolve(name_or_path)
    try:
        ref = yaml.safe_load(path.read_text())
    except (OSError, yaml.YAMLError) as err:
        raise ReferenceError(f"{path}: cannot be read as a reference: {str(err).splitlines()[0]}") from None
    if not isinstance(ref, dict) or ref.get("format") != FORMAT:
        raise ReferenceError(f"{path}: not a saferl-eval reference (field 'format' must be {FORMAT!r})")
    if ref.get("version") != VERSION:
        raise ReferenceError(f"{path}: field 'version' is {ref.get('version')!r}; this engine reads version {VERSION}")
    for field in ("name", "source"):
        if not ref.get(field):
            raise ReferenceError(f"{path}: field {field!r} is missing")
    out = dict(ref, path=str(path))
    out["iqm"] = _records(path, ref, "iqm", IQM_FIELDS, ("iqm", "ci_low", "ci_high"))
    out["tiers"] = _records(path, ref, "tiers", TIER_FIELDS, ("tier", "p_tier"))
    out["conditions"] = pd.DataFrame(ref.get("conditions") or [])
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
        iqm = pd.read_csv(folder / "iqm.csv")
        tiers = pd.read_csv(folder / "tiers.csv")
        conditions = pd.read_csv(folder / "conditions.csv")
        meta = json.loads((folder / "aggregate.json").read_text())
    except (OSError, ValueError) as err:
        raise EpisodeTableError(f"{folder}: not a finished results folder ({err}); run `python -m metrics evaluate`") from None
    tiers = tiers.assign(p_tier=[row[f"p_tier{int(row['tier'])}"] for _, row in tiers.iterrows()])
    cond_cols = ["task", "bound", "algo", "phase", "n_seeds"] + [f"{m}_{s}" for m in METRICS for s in ("mean", "std")]
    cond_cols += ["tier"]
    return {
        "format": FORMAT, "version": VERSION, "name": name, "source": source, "command": command,
        "made_with": {"engine": _engine_version(),
                      "code_versions": _code_versions(runs_root) if runs_root else ["not recorded"],
                      **{k: meta.get(k) for k in ("reps", "seed", "estimator", "dnorm_plus", "n_runs")}},
        "notes": [],
        "iqm": _plain(iqm[["algo", "phase", "metric", "iqm", "ci_low", "ci_high"]]),
        "tiers": _plain(tiers[["algo", "phase", "tier", "p_tier"]]),
        "conditions": _plain(conditions[[c for c in cond_cols if c in conditions.columns]]),
    }


def write_reference(ref: dict, path) -> None:
    write_text(path, yaml.safe_dump(ref, sort_keys=False, width=120))


def compare(iqm: pd.DataFrame, tiers: pd.DataFrame, reference: dict) -> tuple[pd.DataFrame, pd.DataFrame]:
    """(metrics, tiers) of a sweep against a reference.

    metrics: per algo, phase, metric of the reference: the sweep's iqm, ci_low, ci_high, the
    reference's value (ref_iqm, and its ref_ci_low/high where given) and status: `inside` (the
    reference lies in the sweep's 95 % CI), `outside`, or `not in sweep`.
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


def summary_line(metrics: pd.DataFrame, tier_table: pd.DataFrame, name: str) -> str:
    n_in = int((metrics["status"] == "inside").sum())
    n_sweep = int((metrics["status"] != "not in sweep").sum())
    known = tier_table[tier_table["tier"].notna()]
    return (f"{n_in} of {n_sweep} reference values of {name!r} lie inside the sweep's 95 % CI"
            f"{'; ' + str(len(metrics) - n_sweep) + ' are not in the sweep' if n_sweep < len(metrics) else ''}; "
            f"tiers equal for {int(known['equal'].sum())} of {len(known)} (algorithm, phase) pairs.")


def read_results(results_dir) -> tuple[pd.DataFrame, pd.DataFrame]:
    folder = os.fspath(results_dir)
    try:
        return pd.read_csv(os.path.join(folder, "iqm.csv")), pd.read_csv(os.path.join(folder, "tiers.csv"))
    except (OSError, ValueError) as err:
        raise EpisodeTableError(f"{folder}: needs iqm.csv and tiers.csv ({err}); run `python -m metrics evaluate`") from None


__all__ = ["ReferenceError", "compare", "load_reference", "make_reference", "read_results", "resolve", "shipped_path",
           "summary_line", "write_reference"]
