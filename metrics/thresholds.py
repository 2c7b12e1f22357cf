"""Tier thresholds (the paper's Table 1, docs/protocol.md) as configuration: loading, validation, tier assignment.

A thresholds mapping gives, per tier name, upper limits on metric values. Tiers are nested:
tier k is reached when every condition of tiers 1..k holds; comparisons are ``value <= limit``
on unrounded values (a NaN value fails every condition).
"""

from __future__ import annotations

import json
import math
import os
from numbers import Real

import numpy as np

from .schema import METRICS, ThresholdError

TIER_NAMES = ("minimal", "moderate", "substantial", "strict")  # tiers 1..4; tier 0 is "unsafe"
N_TIERS = len(TIER_NAMES) + 1
PAPER_THRESHOLDS = {
    "minimal": {"Dnorm": 0.0},
    "moderate": {"V": 0.5},
    "substantial": {"V": 0.1, "Dnorm_plus": 0.1},
    "strict": {"V": 0.0, "Dnorm_plus": 0.0},
}


def validate_thresholds(raw, source="thresholds") -> dict:
    """A checked copy {tier: {metric: float}} in tier order; raises ThresholdError naming the problem."""
    if not isinstance(raw, dict):
        raise ThresholdError(f"{source}: expected a mapping of tier name to limits, got {type(raw).__name__}")
    unknown = [t for t in raw if t not in TIER_NAMES]
    if unknown:
        raise ThresholdError(f"{source}: unknown tier(s) {', '.join(map(repr, unknown))} (tiers: {', '.join(TIER_NAMES)})")
    missing = [t for t in TIER_NAMES if t not in raw]
    if missing:
        raise ThresholdError(f"{source}: missing tier(s) {', '.join(missing)} (give {{}} for a tier without extra conditions)")
    out = {}
    for tier in TIER_NAMES:
        limits = raw[tier] if raw[tier] is not None else {}
        if not isinstance(limits, dict):
            raise ThresholdError(f"{source}: tier {tier}: expected a mapping of metric to limit, got {limits!r}")
        out[tier] = {}
        for metric, limit in limits.items():
            if metric not in METRICS:
                raise ThresholdError(f"{source}: tier {tier}: unknown metric {metric!r} (metrics: {', '.join(METRICS)})")
            if isinstance(limit, bool) or not isinstance(limit, Real) or math.isnan(limit):
                raise ThresholdError(f"{source}: tier {tier}, metric {metric}: limit must be a number, got {limit!r}")
            out[tier][metric] = float(limit)
    return out


def load_thresholds(path=None) -> dict:
    """Thresholds from a YAML or JSON file; the paper's Table 1 when path is None."""
    if path is None:
        return validate_thresholds(PAPER_THRESHOLDS, "PAPER_THRESHOLDS")
    path = os.fspath(path)
    try:
        with open(path) as fh:
            text = fh.read()
    except OSError as err:
        raise ThresholdError(f"{path}: cannot read thresholds: {err}") from err
    try:
        raw = json.loads(text)
    except json.JSONDecodeError:
        try:
            import yaml  # only needed for YAML threshold files
        except ImportError as err:
            raise ThresholdError(f"{path}: not JSON, and reading YAML needs pyyaml") from err
        try:
            from metrics import strict_yaml

            raw = strict_yaml.load(text)
        except yaml.YAMLError as err:
            raise ThresholdError(f"{path}: not valid YAML or JSON: {err}") from err
    return validate_thresholds(raw, path)


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
