"""The tier-sensitivity figure: how firmly each algorithm holds its tier (beyond the paper)."""
from workflow.products.registry import ALL_PHASES, FIGURE, Product
from workflow.products.outputs import save_figure
from workflow.products.sweep_io import apply_settings


SENSITIVITY = {
    "points": 201,  # values tried per threshold
    "ranges": {     # each threshold (tier.metric) is moved over [low, high]
        "minimal.Dnorm": [-0.5, 0.5],
        "moderate.V": [0.0, 1.0],
        "substantial.V": [0.0, 0.5],
        "substantial.Dnorm_plus": [0.0, 0.5],
        "strict.V": [0.0, 0.2],
        "strict.Dnorm_plus": [0.0, 0.2],
    },
}


def inputs(files, wildcards):
    return {"iqm": files.aggregate["iqm"], "tiers": files.tiers["tiers"], "thresholds": files.thresholds}


def check(settings):
    points = settings["sensitivity"]["points"]
    if isinstance(points, bool) or not isinstance(points, int) or points < 2:
        raise ValueError(f"config products.sensitivity.points: expected an integer >= 2, got {points!r}")
    for key, rng in settings["sensitivity"]["ranges"].items():
        if "." not in key:
            raise ValueError(f"config products.sensitivity.ranges: key {key!r} must be tier.metric, e.g. moderate.V")
        if not (isinstance(rng, (list, tuple)) and len(rng) == 2 and rng[0] < rng[1]):
            raise ValueError(f"config products.sensitivity.ranges.{key}: expected [low, high] with low < high, "
                             f"got {rng!r}")


def build(inputs, outputs, settings, wildcards):
    """Returns (shares, sweep) as drawn. The shares are tiers.csv's; the sweep moves each
    threshold with the metrics engine's `tier_of` (thresholds validated once, when read)."""
    from metrics import load_thresholds
    from metrics.safe_text import read_csv

    from workflow.products import fig_sensitivity

    thresholds = load_thresholds(inputs["thresholds"])
    sens = settings["sensitivity"]
    shares = read_csv(inputs["tiers"])
    sweep = fig_sensitivity.tier_sweep(read_csv(inputs["iqm"]), thresholds, sens["ranges"], sens["points"])
    apply_settings(settings)
    save_figure(fig_sensitivity.figure_tier_sensitivity(shares, sweep, thresholds), outputs, settings)
    return shares, sweep


CAPTION = """
**Tier sensitivity: how firmly each algorithm holds its tier** (a view beyond the paper's figures), one row
per phase (training with noise, final with noise, final greedy).

- Left: the share of stratified-bootstrap replicates whose IQMs land in each tier (0 Unsafe, 1 Minimal:
  IQM(Dnorm) <= 0, 2 Moderate: also IQM(V) <= 0.5, 3 Substantial: also IQM(V) <= 0.1 and IQM(Dnorm+) <= 0.1,
  4 Strict: IQM(V) = IQM(Dnorm+) = 0 with the paper's thresholds). A bar split between colours means the
  tier depends on which seeds were run.
- Other columns: one threshold (tier: metric <= x) moved over a range while the others stay as configured;
  the colour is the tier the algorithm's IQMs would get at that x, the dashed line the configured value.
  A colour change near the dashed line means the tier hinges on that threshold.
- *V*: share of episodes over the bound; *Dnorm*: (C - d) / d; *Dnorm+*: mean (c - d) / d of violating episodes.
"""

PRODUCT = Product(
    kind=FIGURE, category=ALL_PHASES, settings={"sensitivity": SENSITIVITY}, check=check,
    caption=CAPTION, inputs=inputs, build=build)
