"""The paper's published values as the shipped reference `paper` (metrics/references/paper.yaml):
it holds Table 2 exactly (typed again here from the paper, an independent check of the YAML),
Table 2's tiers follow from its values under Table 1's thresholds, and a results folder holding
exactly Table 2 compares with every value inside and every tier equal."""
import json

import numpy as np
import pandas as pd
import pytest
import yaml

from metrics import reference
from metrics.cli import main
from metrics.schema import METRICS, PHASES
from metrics.thresholds import PAPER_THRESHOLDS, tier_of

# Table 2: IQM train / final greedy of R, Dnorm, V, Dnorm+, and the tiers
TABLE_2 = {
    "ppo": {"R": (115.63, 68.17), "Dnorm": (4.77, 2.20), "V": (1.00, 0.94), "Dnorm_plus": (4.79, 2.29), "tier": (0, 0)},
    "ppo_lag": {"R": (77.72, 54.18), "Dnorm": (0.00, -0.13), "V": (0.43, 0.34), "Dnorm_plus": (0.25, 0.50),
                "tier": (2, 2)},
    "p3o": {"R": (90.41, 57.80), "Dnorm": (0.55, -0.03), "V": (0.70, 0.42), "Dnorm_plus": (0.81, 0.53), "tier": (0, 2)},
    "focops": {"R": (108.76, 74.26), "Dnorm": (0.06, -0.19), "V": (0.41, 0.29), "Dnorm_plus": (0.34, 0.48),
               "tier": (0, 2)},
}
# the 95 % CIs the text quotes (Table A.3)
CIS = {("focops", "train", "Dnorm"): (0.06, 0.06), ("focops", "train", "V"): (0.40, 0.41),
       ("ppo", "train", "V"): (1.00, 1.00), ("ppo_lag", "train", "Dnorm"): (-0.01, 0.00),
       ("ppo_lag", "train", "Dnorm_plus"): (0.23, 0.28), ("ppo_lag", "final_greedy", "Dnorm_plus"): (0.46, 0.56),
       ("p3o", "train", "Dnorm"): (0.52, 0.57), ("p3o", "train", "V"): (0.69, 0.72),
       ("p3o", "final_greedy", "Dnorm"): (-0.05, -0.01)}
# Table A.2: the final policy with exploration noise, point estimates, and its tiers
NOISE = {("ppo_lag", "V"): 0.110, ("ppo_lag", "Dnorm"): -0.477, ("ppo_lag", "Dnorm_plus"): 0.425,
         ("p3o", "V"): 0.175, ("focops", "V"): 0.109, ("focops", "Dnorm"): -0.490}
NOISE_TIERS = {"ppo": 0, "ppo_lag": 2, "p3o": 2, "focops": 2}


def _table_2_rows():
    for algo, row in TABLE_2.items():
        for i, phase in enumerate(("train", "final_greedy")):
            for metric in ("R", "Dnorm", "V", "Dnorm_plus"):
                yield algo, phase, metric, row[metric][i]


def test_the_shipped_paper_reference_holds_table_2_exactly():
    raw = yaml.safe_load(reference.shipped_path("paper").read_text())
    values = {(r["algo"], r["phase"], r["metric"]): r for r in raw["iqm"]}
    for algo, phase, metric, value in _table_2_rows():
        assert values.pop((algo, phase, metric))["iqm"] == value, (algo, phase, metric)
    for (algo, metric), value in NOISE.items():
        assert values.pop((algo, "final_explore", metric))["iqm"] == value
    assert values == {}  # nothing the paper does not give (IQM(C), the other noise values)
    cis = {(r["algo"], r["phase"], r["metric"]): (r["ci_low"], r["ci_high"]) for r in raw["iqm"] if "ci_low" in r}
    assert cis == CIS  # only the quoted CIs; not PPO-Lag's noise Dnorm+ CI, which misses its point
    tiers = {(r["algo"], r["phase"]): r["tier"] for r in raw["tiers"]}
    assert tiers == {**{(a, "train"): r["tier"][0] for a, r in TABLE_2.items()},
                     **{(a, "final_greedy"): r["tier"][1] for a, r in TABLE_2.items()},
                     **{(a, "final_explore"): t for a, t in NOISE_TIERS.items()}}
    assert tiers[("p3o", "final_greedy")] == 2  # Table 2's, not Table A.3's 0

    ref = reference.load_reference("paper")
    assert reference.load_reference("paper-builtin")["path"] == ref["path"]  # that preset compares with the paper
    assert ref["made_with"]["dnorm_plus"] == "saferleval" and ref["command"].startswith("none: transcribed")
    notes = " ".join(ref["notes"])
    for said in ("IQM(C)", "saferleval", "Table A.3 prints P3O's final greedy tier as 0", "[0.244, 0.348]", "0.425"):
        assert said in notes, said
    assert ref["grid"] == {(t, float(b)) for t in ("goal", "circle", "push", "button") for b in (15, 25, 50)}


def test_table_2s_tiers_follow_from_its_values_under_table_1():
    for algo, row in TABLE_2.items():
        for i in range(2):
            values = {m: np.array([row[m][i]]) for m in ("V", "Dnorm", "Dnorm_plus")}
            assert tier_of(values, PAPER_THRESHOLDS)[0] == row["tier"][i], (algo, i)


def _results_holding_table_2(folder, definition="saferleval"):
    """A stage-2/3 folder as the engine writes it whose IQMs and tiers are exactly the paper's:
    Table 2 and Table A.2 where they give a value, an arbitrary one elsewhere (the reference has
    none there); each CI 0.02 wide around its IQM; the paper's grid."""
    folder.mkdir()
    given = {(a, p, m): v for a, p, m, v in _table_2_rows()}
    given.update({(a, "final_explore", m): v for (a, m), v in NOISE.items()})
    rows = []
    for algo in TABLE_2:
        for phase in PHASES:
            for metric in METRICS:
                value = given.get((algo, phase, metric), 9.0)
                rows.append({"algo": algo, "phase": phase, "metric": metric, "iqm": value, "ci_low": value - 0.01,
                             "ci_high": value + 0.01, "n_strata": 12, "n_runs": 360, "estimator": "stratified"})
    pd.DataFrame(rows).to_csv(folder / "iqm.csv", index=False)
    tiers = [{"algo": a, "phase": p, "tier": t} for a, r in TABLE_2.items()
             for p, t in (("train", r["tier"][0]), ("final_greedy", r["tier"][1]))]
    tiers += [{"algo": a, "phase": "final_explore", "tier": t} for a, t in NOISE_TIERS.items()]
    tiers = pd.DataFrame([dict(t, **{f"p_tier{k}": float(k == t["tier"]) for k in range(5)}) for t in tiers])
    tiers.to_csv(folder / "tiers.csv", index=False)
    grid = [(t, b) for t in ("goal", "circle", "push", "button") for b in (15.0, 25.0, 50.0)]
    pd.DataFrame([{"task": t, "bound": b, "algo": a, "phase": p, "n_seeds": 30} for t, b in grid for a in TABLE_2
                  for p in PHASES]).to_csv(folder / "conditions.csv", index=False)
    (folder / "aggregate.json").write_text(json.dumps({"reps": 2000, "seed": 0, "estimator": "stratified",
                                                       "dnorm_plus": definition, "n_runs": 1440, "warnings": []}))
    return folder


def test_a_sweep_holding_exactly_table_2_compares_inside_everywhere_with_equal_tiers(tmp_path, capsys):
    folder = _results_holding_table_2(tmp_path / "results")
    out = tmp_path / "comparison.csv"
    assert main(["compare", str(folder), "paper", "--out", str(out)]) == 0
    got = capsys.readouterr()
    assert got.err == ""  # same names, grid, estimator and Dnorm+ definition: nothing to warn about
    assert got.out.startswith("reference paper: Spoor, Plaat, Moerland (2026)")
    assert ("38 of 38 reference values of 'paper' lie inside the sweep's 95 % CI; "
            "tiers equal for 12 of 12 (algorithm, phase) pairs.") in got.out
    assert got.out.rstrip().endswith(f"wrote {out}")
    table = pd.read_csv(out)
    assert len(table) == 38 and (table["status"] == "inside").all()
    assert (table["iqm"] == table["ref_iqm"]).all()


@pytest.mark.parametrize("preset", ["paper", "paper-builtin"])
def test_the_paper_presets_products_compare_with_the_paper(tmp_path, preset):
    from workflow.products import settings
    from workflow.products.registry import SweepFiles, by_name

    folder = _results_holding_table_2(tmp_path / "metrics")
    files = SweepFiles(aggregate={"iqm": str(folder / "iqm.csv"), "aggregate": str(folder / "aggregate.json")},
                       tiers={"tiers": str(folder / "tiers.csv"), "conditions": str(folder / "conditions.csv")},
                       thresholds="", runs=lambda *a: [], preset=preset)
    table = by_name()["table_reference"]
    inputs = table.inputs(files, {})
    assert inputs["reference"] == str(reference.SHIPPED / "paper.yaml")
    assert inputs["aggregate"] == str(folder / "aggregate.json")
    out = {ext: str(tmp_path / f"t.{ext}") for ext in ("csv", "md", "tex", "html")}
    shown = table.build(inputs, out, settings.resolve(None), {})
    assert not any(any(flags) for flags in shown.bold)  # nothing outside, no tier differs
    md = open(out["md"]).read()
    assert "Reference paper: Spoor, Plaat, Moerland (2026)" in md and "Table 2 is taken as right" in md
