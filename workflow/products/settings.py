"""The `products` configuration: plot and table settings, with defaults and a clear error
for a bad value. None of these reach the training or metrics rules, so changing one reruns
only the products (Snakemake's params rerun trigger)."""
from __future__ import annotations

import copy

DEFAULTS = {
    "baseline": "ppo",              # the unconstrained baseline: never bold in the tables
    "bold": "paper",                # paper: best per column among non-baseline algorithms; safe: also tier >= 1
    "figure1": {"task": "circle", "bound": 25, "algo": "ppo_lag", "seed": 0},
    "smoothing_window": 5,          # moving-average window of the training curves (iterates)
    "cdf_xmax": {"figure2": 2.0, "figureA1": 20.0},
    "multiplier_yscale": "linear",  # linear, log or symlog
    "decimals": {"R": 1, "C": 1, "Dnorm": 2, "V": 2, "Dnorm_plus": 2},
    "font_size": 9,
    "dpi": 150,
    # Tier sensitivity: each threshold (tier.metric) is moved over [low, high] in `points` steps.
    "sensitivity": {
        "points": 201,
        "ranges": {
            "minimal.Dnorm": [-0.5, 0.5],
            "moderate.V": [0.0, 1.0],
            "substantial.V": [0.0, 0.5],
            "substantial.Dnorm_plus": [0.0, 0.5],
            "strict.V": [0.0, 0.2],
            "strict.Dnorm_plus": [0.0, 0.2],
        },
    },
}


def _coerce(value, default):
    """Numbers given as text (Snakemake's `--config key={...}` passes nested values as strings)."""
    if isinstance(value, str) and isinstance(default, (int, float)) and not isinstance(default, bool):
        for kind in (int, float):
            try:
                return kind(value)
            except ValueError:
                pass
    if isinstance(value, (list, tuple)) and all(isinstance(v, str) for v in value):
        return [_coerce(v, 0.0) for v in value]
    return value


def _merge(base: dict, override: dict, where: str) -> dict:
    out = copy.deepcopy(base)
    for key, value in (override or {}).items():
        if key not in base and where != "products.sensitivity.ranges" and where != "products.decimals":
            raise ValueError(f"config {where}: unknown key {key!r}; known: {sorted(base)}")
        if isinstance(base.get(key), dict):
            if not isinstance(value, dict):
                raise ValueError(f"config {where}.{key}: expected a mapping, got {value!r}")
            out[key] = _merge(base[key], value, f"{where}.{key}")
        else:
            default = base.get(key, 0.0 if where in ("products.sensitivity.ranges", "products.decimals") else None)
            out[key] = _coerce(value, default)
    return out


def resolve(products: dict | None) -> dict:
    """Defaults overridden by the config's `products` mapping, checked."""
    s = _merge(DEFAULTS, products or {}, "products")
    if not isinstance(s["smoothing_window"], int) or s["smoothing_window"] < 1:
        raise ValueError(f"config products.smoothing_window: expected an integer >= 1, got {s['smoothing_window']!r}")
    if s["bold"] not in ("paper", "safe"):
        raise ValueError(f"config products.bold: expected paper or safe, got {s['bold']!r}")
    if s["multiplier_yscale"] not in ("linear", "log", "symlog"):
        raise ValueError(f"config products.multiplier_yscale: expected linear, log or symlog, "
                         f"got {s['multiplier_yscale']!r}")
    for name, xmax in s["cdf_xmax"].items():
        if not isinstance(xmax, (int, float)) or xmax <= 0:
            raise ValueError(f"config products.cdf_xmax.{name}: expected a number > 0, got {xmax!r}")
    points = s["sensitivity"]["points"]
    if not isinstance(points, int) or points < 2:
        raise ValueError(f"config products.sensitivity.points: expected an integer >= 2, got {points!r}")
    for key, rng in s["sensitivity"]["ranges"].items():
        if "." not in key:
            raise ValueError(f"config products.sensitivity.ranges: key {key!r} must be tier.metric, e.g. moderate.V")
        if not (isinstance(rng, (list, tuple)) and len(rng) == 2 and rng[0] < rng[1]):
            raise ValueError(f"config products.sensitivity.ranges.{key}: expected [low, high] with low < high, "
                             f"got {rng!r}")
    if not isinstance(s["figure1"]["bound"], (int, float)) or s["figure1"]["bound"] <= 0:
        raise ValueError(f"config products.figure1.bound: expected a number > 0, got {s['figure1']['bound']!r}")
    return s


def figure1_run(settings: dict, tasks, bounds, algos, seeds) -> dict:
    """The run Figure 1 shows: the configured one if the sweep has it, else the nearest
    stand-in (first task, the bound closest to the configured one, first constrained
    algorithm, first seed), so a smaller sweep still gets a Figure 1."""
    want = settings["figure1"]
    seeds = list(range(seeds)) if isinstance(seeds, int) else list(seeds)
    task = want["task"] if want["task"] in tasks else list(tasks)[0]
    bound = min(bounds, key=lambda b: (abs(float(b) - float(want["bound"])), float(b)))
    constrained = [a for a in algos if a != settings["baseline"]] or list(algos)
    algo = want["algo"] if want["algo"] in algos else constrained[0]
    seed = want["seed"] if want["seed"] in seeds else seeds[0]
    return {"task": task, "bound": bound, "algo": algo, "seed": seed}
