"""The sweep beside a reference (metrics.reference.compare) as a table and a figure."""
from __future__ import annotations

import os

import numpy as np
import pandas as pd

from metrics.reference import compare, load_reference, matching_definition, mismatches, read_sweep
from metrics.schema import METRICS, PHASES

from .style import METRIC_LABELS, PHASE_LABELS, algo_label, ordered_algos
from .tablefmt import Table

NO_REFERENCE = ("No reference is shipped for this sweep's preset (metrics/references/); compare with any "
                "reference file by `saferl-eval compare results/metrics REFERENCE`.")


def read_comparison(inputs):
    """(reference or None, metrics, tiers) of the sweep against the reference input, if any."""
    if not inputs.get("reference"):
        return None, None, None
    ref = load_reference(inputs["reference"])
    # the sweep's stage-2/3 files share one folder (results/metrics)
    sweep, done = matching_definition(read_sweep(os.path.dirname(os.path.abspath(inputs["iqm"]))), ref,
                                      inputs.get("thresholds"))
    got, tiers = compare(sweep.iqm, sweep.tiers, ref, sweep.not_comparable)
    # what the table's notes say beside the reference's own: a recomputed Dnorm+, a different grid
    return dict(ref, notes=list(ref["notes"]) + done + mismatches(sweep, ref)), got, tiers


def _ordered_keys(frame: pd.DataFrame) -> list[tuple[str, str]]:
    algos = ordered_algos(frame["algo"].unique())
    keys = set(zip(frame["phase"], frame["algo"]))
    return [(p, a) for p in PHASES for a in algos if (p, a) in keys]


def reference_table(ref, got: pd.DataFrame | None, tiers: pd.DataFrame | None, decimals: int = 2) -> Table:
    """One row per phase and algorithm of the reference; per metric the sweep's IQM [95 % CI] and
    the reference value, bold when it lies outside the CI; the tier on each side, bold when they differ."""
    if ref is None:
        return Table(title="Comparison with a reference", row_header=["Reference"], rows=[["none"]],
                     columns=[("", "")], cells=[[""]], bold=[[False]],
                     data=pd.DataFrame({"reference": ["none"], "note": [NO_REFERENCE]}), notes=[NO_REFERENCE])
    metrics = [m for m in METRICS if m in set(got["metric"])]
    keys = _ordered_keys(pd.concat([got[["phase", "algo"]], tiers[["phase", "algo"]]]))
    by = got.set_index(["phase", "algo", "metric"])
    tier_by = tiers.set_index(["phase", "algo"])
    fmt = lambda v: "-" if pd.isna(v) else f"{v:.{decimals}f}"  # noqa: E731
    cells, bold = [], []
    for key in keys:
        row, flags = [], []
        for m in metrics:
            if (*key, m) in by.index:
                r = by.loc[(*key, m)]
                row += [f"{fmt(r['iqm'])} [{fmt(r['ci_low'])}, {fmt(r['ci_high'])}]", fmt(r["ref_iqm"])]
                flags += [False, r["status"] == "outside"]
            else:
                row += ["-", "-"]
                flags += [False, False]
        if key in tier_by.index:
            t = tier_by.loc[key]
            row += ["-" if pd.isna(t["tier"]) else f"{int(t['tier'])} (P {t['p_tier']:.2f})", str(int(t["ref_tier"]))]
            flags += [False, not bool(t["equal"])]
        else:
            row += ["-", "-"]
            flags += [False, False]
        cells.append(row)
        bold.append(flags)
    columns = [(METRIC_LABELS[m], side) for m in metrics for side in ("sweep [95 % CI]", "reference")]
    columns += [("Tier", "sweep"), ("Tier", "reference")]
    data = got.merge(tiers.rename(columns={"tier": "sweep_tier", "p_tier": "sweep_p_tier"}), on=["algo", "phase"],
                     how="outer")
    notes = [f"Reference {ref['name']}: {ref['source']}.",
             "Bold: the reference value lies outside the sweep's 95 % stratified-bootstrap CI, or the tiers differ."]
    notes += [f"Note: {n}" for n in ref.get("notes") or []]
    return Table(title=f"The sweep beside the reference {ref['name']!r}", row_header=["Phase", "Algorithm"],
                 rows=[[PHASE_LABELS[p], algo_label(a)] for p, a in keys], columns=columns, cells=cells, bold=bold,
                 data=data, notes=notes)


def figure_reference(ref, got: pd.DataFrame | None):
    """Rows: metrics; columns: phases. Per algorithm the sweep's IQM with its 95 % CI and the
    reference value (a diamond, filled red when outside the CI)."""
    import matplotlib.pyplot as plt

    from .style import BOUND_COLOR, apply_rc

    apply_rc()
    if ref is None or got.empty:
        fig, ax = plt.subplots(figsize=(6, 1.5))
        ax.axis("off")
        ax.text(0.5, 0.5, NO_REFERENCE.replace("; ", ";\n"), ha="center", va="center", wrap=True)
        return fig
    metrics = [m for m in METRICS if m in set(got["metric"])]
    phases = [p for p in PHASES if p in set(got["phase"])]
    algos = ordered_algos(got["algo"].unique())
    fig, axes = plt.subplots(len(metrics), len(phases), squeeze=False, sharex=True,
                             figsize=(2.8 * len(phases) + 1.0, 1.9 * len(metrics) + 1.2))
    x = np.arange(len(algos))
    for r, m in enumerate(metrics):
        for c, phase in enumerate(phases):
            ax = axes[r][c]
            here = got[(got["metric"] == m) & (got["phase"] == phase)].set_index("algo").reindex(algos)
            ax.errorbar(x - 0.1, here["iqm"], yerr=[here["iqm"] - here["ci_low"], here["ci_high"] - here["iqm"]],
                        fmt="o", color="black", capsize=3, label="this sweep: IQM, 95 % CI")
            outside = (here["status"] == "outside").to_numpy()
            ax.scatter(x[~outside] + 0.1, here["ref_iqm"][~outside], marker="D", facecolor="white",
                       edgecolor="black", label="reference, inside the CI")
            ax.scatter(x[outside] + 0.1, here["ref_iqm"][outside], marker="D", color=BOUND_COLOR,
                       label="reference, outside the CI")
            ax.set_xticks(x, [algo_label(a) for a in algos], rotation=30, ha="right")
            if r == 0:
                ax.set_title(PHASE_LABELS[phase])
            if c == 0:
                ax.set_ylabel(f"IQM({METRIC_LABELS[m]})")
    handles, labels = axes[0][0].get_legend_handles_labels()
    fig.legend(handles, labels, loc="outside lower center", ncols=3, frameon=False)
    fig.suptitle(f"This sweep beside the reference {ref['name']!r}")
    return fig
