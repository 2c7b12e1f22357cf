"""Tier thresholds (the paper's Table 1, docs/protocol.md) as configuration: loading, validation, tier assignment.

A thresholds mapping gives, per tier name, upper limits on metric values, merged over Table 1
(`validate_thresholds`: the one meaning, for files, the sweep config and the API). Tiers are nested:
tier k is reached when every condition of tiers 1..k holds; comparisons are ``value <= limit``
on unrounded values (a NaN value fails every condition).
"""

from __future__ import annotations

import json
import math
import os
from numbers import Real

import numpy as np

from . import strict_yaml
from .schema import ThresholdError

TIER_NAMES = ("minimal", "moderate", "substantial", "strict")  # tiers 1..4; tier 0 is "unsafe"
N_TIERS = len(TIER_NAMES) + 1
PAPER_THRESHOLDS = {
    "minimal": {"Dnorm": 0.0},
    "moderate": {"V": 0.5},
    "substantial": {"V": 0.1, "Dnorm_plus": 0.1},
    "strict": {"V": 0.0, "Dnorm_plus": 0.0},
}


# The metrics a tier may test and the values each can take: a limit outside them is a typo
# that would put every algorithm in one tier (V is a share of episodes, Dnorm+ = max(Dnorm, 0);
# Dnorm is unbounded, costs may be negative).
LIMIT_RANGES = {"V": (0.0, 1.0), "Dnorm": (-math.inf, math.inf), "Dnorm_plus": (0.0, math.inf)}


def shown(value, width: int = 40) -> str:
    """repr of a value for an error message, cut to `width` characters (a 400-digit int)."""
    try:
        text = repr(value)
    except ValueError:  # an int past Python's 4300-digit conversion limit
        return f"an integer of {value.bit_length():,} bits"
    return text if len(text) <= width else f"{text[:width - 5]}...{text[-2:]}"


def _limit(value, metric: str, where: str) -> float:
    """A limit as a float: a finite number within its metric's range, else ThresholdError."""
    if isinstance(value, bool) or not isinstance(value, Real):
        raise ThresholdError(f"{where}: {shown(value)} is not a number")
    try:
        limit = float(value)
    except OverflowError:  # an int past the float range
        limit = math.inf
    if not math.isfinite(limit):
        raise ThresholdError(f"{where}: {shown(value)} must be a finite number")
    low, high = LIMIT_RANGES[metric]
    if not low <= limit <= high:
        raise ThresholdError(f"{where}: {shown(value)} is outside [{low:g}, {high:g}], the values {metric} can take")
    return limit + 0.0  # -0.0 -> 0.0


def validate_thresholds(raw, source: str = "thresholds key", prefix: str = "") -> dict:
    """The thresholds in force, {tier: {metric: float}} in tier order, or ThresholdError.

    The one meaning of a thresholds mapping wherever it comes from (a --thresholds file, the
    sweep's `thresholds:` key, the Python API): it is merged over the paper's Table 1 tier by
    tier and metric by metric, as the sweep merges config layers. A tier not named, empty
    (`{}`) or null keeps Table 1's conditions; a metric named moves that limit (or adds a
    condition). A limit is moved, never removed: the loosest a tier's condition can be is the
    lower tier's limit, which adds nothing (V: 1 for moderate's; any large Dnorm for minimal's).
    So the result holds every condition of Table 1, and is its own input (validating it again
    changes nothing). Then one check: known names, finite limits in their range, nested tiers
    (a metric's limit never looser than a lower tier's). Errors read
    ``{source} '{prefix}tier.metric': problem``, e.g. ``t.yaml: key 'moderate.V': ...`` or
    ``config key 'thresholds.moderate.V': ...``."""
    def key(*parts) -> str:
        named = [p if isinstance(p, str) and p.isprintable() and len(p) <= 40 else shown(p) for p in parts]
        return f"{source} '{prefix}{'.'.join(named)}'"

    if not isinstance(raw, dict):
        raise ThresholdError(f"{source} '{prefix.rstrip('.') or '<top level>'}': expected a mapping of "
                             f"tier name to limits, got {type(raw).__name__}")
    unknown = [t for t in raw if t not in TIER_NAMES]
    if unknown:
        raise ThresholdError(f"{key(unknown[0])}: unknown tier {shown(unknown[0])}; the tiers are "
                             f"{', '.join(TIER_NAMES)}")
    out, loosest = {}, {}
    for tier in TIER_NAMES:
        given = raw.get(tier)
        given = {} if given is None else given
        if not isinstance(given, dict):
            raise ThresholdError(f"{key(tier)}: expected a mapping of metric to limit, got {shown(given)}")
        limits = {**PAPER_THRESHOLDS[tier], **given}
        out[tier] = {}
        for metric, value in limits.items():
            if metric not in LIMIT_RANGES:
                raise ThresholdError(f"{key(tier, metric)}: unknown metric {shown(metric)}; a tier may test "
                                     f"{', '.join(LIMIT_RANGES)}")
            limit = _limit(value, metric, key(tier, metric))
            if metric in loosest and limit > loosest[metric][1]:
                prev_tier, prev = loosest[metric]
                whose = "" if metric in given else " (Table 1's, not set here)"
                raise ThresholdError(
                    f"{key(tier, metric)}: {shown(value)}{whose} is looser than '{prefix}{prev_tier}.{metric}' = {prev}; "
                    f"tiers are nested ({', '.join(TIER_NAMES)}), so a limit must not increase")
            loosest[metric] = (tier, limit)
            out[tier][metric] = limit
    return out


def thresholds_notice(thresholds, source: str) -> str | None:
    """One line giving the thresholds in force when they differ from the paper's Table 1 (None
    when they do not), so a tier table is never read against the wrong thresholds."""
    paper = validate_thresholds(PAPER_THRESHOLDS)
    if thresholds == paper:
        return None
    moved = [f"{t}.{m} {paper[t][m]:.12g} -> {v:.12g}" if m in paper[t] else f"{t}.{m} <= {v:.12g} (added)"
             for t in TIER_NAMES for m, v in thresholds[t].items() if paper[t].get(m) != v]
    tiers = "; ".join(f"{t} " + ", ".join(f"{m} <= {v:.12g}" for m, v in thresholds[t].items()) for t in TIER_NAMES)
    return (f"note: thresholds in force ({source} over the paper's Table 1): {tiers} "
            f"[changed: {', '.join(moved)}]")


def load_thresholds(path=None) -> dict:
    """Thresholds from a YAML or JSON file; the paper's Table 1 when path is None."""
    if path is None:
        return validate_thresholds(PAPER_THRESHOLDS, "PAPER_THRESHOLDS")
    path = os.fspath(path)
    try:
        raw = _read(path)
    except strict_yaml.FileError as err:
        raise ThresholdError(str(err)) from None
    if raw is None:
        raise ThresholdError(f"{path}: empty; expected a mapping of tier name to limits")
    return validate_thresholds(raw, f"{path}: key")


def _read(path: str):
    """A file's JSON or, when it is not JSON, YAML content (JSON is nearly YAML, but YAML reads
    1e-3 as a string); either refuses a repeated key."""
    text = strict_yaml.read_text(path)
    try:
        return json.loads(text, object_pairs_hook=lambda pairs: _json_object(pairs, path))
    except strict_yaml.FileError:  # a repeated key
        raise
    except (ValueError, RecursionError):  # not JSON (or a number JSON cannot hold): YAML's error then
        return strict_yaml.load_text(text, path)


def _json_object(pairs, path: str) -> dict:
    keys = [k for k, _ in pairs]
    repeated = next((k for k in keys if keys.count(k) > 1), None)
    if repeated is not None:
        raise strict_yaml.FileError(f"{path}: duplicate key {shown(repeated)}")
    return dict(pairs)


def tier_of(values, thresholds, *, validate: bool = True) -> np.ndarray:
    """Tier 0..4 of each entry: ``values`` maps metric name -> array (or scalar) of values.

    ``validate=False`` skips the check for thresholds that `validate_thresholds` or
    `load_thresholds` already returned (callers that assign tiers many times)."""
    if validate:
        thresholds = validate_thresholds(thresholds)
    shape = np.broadcast(*[np.asarray(v, dtype=np.float64) for v in values.values()]).shape if values else ()
    reached = np.ones(shape, bool)
    tier = np.zeros(shape, np.int64)
    for k, name in enumerate(TIER_NAMES, start=1):
        for metric, limit in thresholds[name].items():
            if metric not in values:
                raise ThresholdError(f"tier {name} needs metric {metric}, which the values do not have")
            reached &= np.asarray(values[metric], dtype=np.float64) <= limit
        tier = np.where(reached, k, tier)
    return tier
