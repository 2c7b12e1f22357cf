"""The fixed grid on which (c - d) / d is histogrammed, so that CDFs are exact at its points.

Grid points are kappa_k = k / 100 for k = -100 .. 2000, i.e. -1.00, -0.99, ..., 20.00 (2101
points; each is the double nearest to k/100, so 0.0 and 0.1 are exact literals). Bins are
right-closed, which makes the cumulative count at kappa_k exactly #{(c-d)/d <= kappa_k}:

- bin 0            : (-inf, -1.00]   (cost 0 lands here: (0 - d)/d = -1; so does any cost < 0)
- bin k, 1..2100   : (kappa_{k-1}, kappa_k]
- bin 2101         : (20.00, +inf)   (overflow: counted in the totals, never in F(kappa) on the grid)

So F(kappa_k) = (count of bins 0..k) / (all episodes), with no approximation at grid points.
"""

import numpy as np

from .buffers import empty

GRID_MIN_HUNDREDTHS = -100
GRID_MAX_HUNDREDTHS = 2000
KAPPA = np.arange(GRID_MIN_HUNDREDTHS, GRID_MAX_HUNDREDTHS + 1) / 100.0
N_BINS = KAPPA.size + 1  # one overflow bin past the last point
GRID_SPEC = {"min": float(KAPPA[0]), "max": float(KAPPA[-1]), "step": 0.01, "points": int(KAPPA.size)}


def normalised_excess(cost, bound):
    """(c - d) / d per episode."""
    excess = empty(np.size(cost), np.float64).reshape(np.shape(cost))
    np.subtract(cost, bound, out=excess)
    excess /= bound
    return excess


def bin_index(kappa_values):
    """Bin of each value: the smallest k with value <= KAPPA[k], or KAPPA.size past the end.

    Same result as np.searchsorted(KAPPA, values, side="left"), but by arithmetic: a first
    guess g = ceil(100 x) in hundredths, corrected by one step where rounding put it next to
    the right bin (KAPPA[k] is the double nearest to (k + GRID_MIN_HUNDREDTHS) / 100, so each
    check divides by 100 as KAPPA did), then clipped to the grid. On a few reused buffers: at
    millions of values the temporaries, not the arithmetic, would cost the time.
    """
    x = np.asarray(kappa_values, dtype=np.float64)
    g, kappa = (empty(x.size, np.float64).reshape(x.shape) for _ in range(2))
    flag = empty(x.size, bool).reshape(x.shape)
    np.multiply(x, 100.0, out=g)
    np.ceil(g, out=g)
    np.divide(g, 100.0, out=kappa)
    g += np.greater(x, kappa, out=flag)  # guess too low
    np.subtract(g, 1.0, out=kappa)
    kappa /= 100.0
    g -= np.less_equal(x, kappa, out=flag)  # guess too high: x <= the point below
    np.clip(g, GRID_MIN_HUNDREDTHS, GRID_MAX_HUNDREDTHS + 1, out=g)
    g -= GRID_MIN_HUNDREDTHS
    bins = empty(x.size, np.intp).reshape(x.shape)
    bins[...] = g
    return bins
