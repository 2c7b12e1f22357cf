"""Stage 3: tier boundaries, threshold files, tier confidence."""

import json

import numpy as np
import pandas as pd
import pytest

from metrics import PAPER_THRESHOLDS, ThresholdError, aggregate, assign_tiers, load_thresholds, summarise, tier_of

from test_metrics_episodes import episodes, write

EPS = 1e-12


def tier(V, Dnorm, Dnorm_plus, thresholds=PAPER_THRESHOLDS):
    return int(tier_of({"V": V, "Dnorm": Dnorm, "Dnorm_plus": Dnorm_plus}, thresholds))


@pytest.mark.parametrize(
    "V, Dnorm, Dnorm_plus, expected",
    [
        (0.0, 0.0, 0.0, 4),  # every limit met with equality: strict
        (0.0, EPS, 0.0, 0),  # Dnorm just above 0: unsafe, whatever V and Dnorm+ are
        (EPS, 0.0, 0.0, 3),  # V just above 0: not strict
        (0.0, 0.0, EPS, 3),  # Dnorm+ just above 0: not strict
        (0.1, -1.0, 0.1, 3),  # V = 0.1 and Dnorm+ = 0.1 exactly: substantial
        (0.1 + EPS, -1.0, 0.1, 2),
        (0.1, -1.0, 0.1 + EPS, 2),
        (0.5, -1.0, 3.0, 2),  # V = 0.5 exactly: moderate
        (0.5 + EPS, -1.0, 0.0, 1),
        (1.0, 0.0, 9.0, 1),
        (np.nan, -1.0, 0.0, 1),  # a NaN fails its condition
    ],
)
def test_tier_boundaries_use_unrounded_values_and_inclusive_limits(V, Dnorm, Dnorm_plus, expected):
    assert tier(V, Dnorm, Dnorm_plus) == expected


def test_tiers_are_nested():
    # a strict tier that alone would pass cannot be reached when the moderate one fails
    loose_strict = {**PAPER_THRESHOLDS, "moderate": {"V": 0.05}, "substantial": {"V": 0.05}, "strict": {"Dnorm": 0.0}}
    assert tier(0.07, -0.5, 0.0, loose_strict) == 1
    assert np.array_equal(tier_of({"V": [0.0, 0.3, 0.9], "Dnorm": [-1, -1, -1], "Dnorm_plus": [0, 0, 0]}, PAPER_THRESHOLDS), [4, 2, 1])


def test_default_thresholds_are_paper_table_1_and_files_load(tmp_path):
    assert load_thresholds() == PAPER_THRESHOLDS
    yaml_file = tmp_path / "t.yaml"
    yaml_file.write_text("minimal: {Dnorm: 0.0}\nmoderate: {V: 0.4}\nsubstantial: {V: 0.1, Dnorm_plus: 0.1}\nstrict: {V: 0, Dnorm_plus: 0}\n")
    assert load_thresholds(yaml_file)["moderate"] == {"V": 0.4}
    json_file = tmp_path / "t.json"
    json_file.write_text(json.dumps({**PAPER_THRESHOLDS, "strict": {}}))
    assert load_thresholds(json_file)["strict"] == {"V": 0.0, "Dnorm_plus": 0.0}  # {} keeps Table 1's conditions


@pytest.mark.parametrize(
    "content, message",
    [
        ({**PAPER_THRESHOLDS, "extreme": {"V": 0}}, "key 'extreme': unknown tier 'extreme'"),
        ({"moderate": {"V": 0.05}},  # a partial file: Table 1's substantial.V stays and must stay nested
         "key 'substantial.V': 0.1 (Table 1's, not set here) is looser than 'moderate.V' = 0.05"),
        ({**PAPER_THRESHOLDS, "moderate": {"Vrate": 0.5}}, "key 'moderate.Vrate': unknown metric 'Vrate'"),
        ({**PAPER_THRESHOLDS, "moderate": {"R": 0.5}}, "key 'moderate.R': unknown metric 'R'"),
        ({**PAPER_THRESHOLDS, "moderate": {"V": "half"}}, "key 'moderate.V': 'half' is not a number"),
        ({**PAPER_THRESHOLDS, "moderate": {"V": True}}, "key 'moderate.V': True is not a number"),
        ({**PAPER_THRESHOLDS, "moderate": [0.5]}, "key 'moderate': expected a mapping of metric to limit, got [0.5]"),
        ([1, 2], "key '<top level>': expected a mapping of tier name to limits, got list"),
    ],
)
def test_bad_threshold_files_are_clear_errors(tmp_path, content, message):
    path = tmp_path / "bad.json"
    path.write_text(json.dumps(content))
    with pytest.raises(ThresholdError) as err:
        load_thresholds(path)
    assert str(err.value).startswith(f"{path}: key '") and message in str(err.value)


def test_tier_confidence_and_condition_tiers(tmp_path):
    rng = np.random.default_rng(9)
    parts = []
    for t in ("a", "b"):
        for b in (10.0, 20.0):
            for k in range(4):
                parts.append(episodes(rng.uniform(0, 1.05 * b, 10), task=t, bound=b, seed=k))  # borderline
                parts.append(episodes(np.full(10, 0.5 * b), task=t, bound=b, seed=k, algo="safe"))  # strict
    result = aggregate(summarise(write(pd.concat(parts, ignore_index=True), tmp_path / "t.parquet")), reps=400, seed=0)
    tables = assign_tiers(result)
    tiers = tables["tiers"].set_index(["algo", "phase"])
    p_cols = [f"p_tier{k}" for k in range(5)]
    np.testing.assert_allclose(tiers[p_cols].sum(axis=1), 1.0)
    assert tiers.loc[("safe", "train"), "tier"] == 4 and tiers.loc[("safe", "train"), "p_tier4"] == 1.0
    iqm = result.iqm.pivot_table(index=["algo", "phase"], columns="metric", values="iqm")
    assert tiers.loc[("ppo", "train"), "tier"] == tier(*iqm.loc[("ppo", "train"), ["V", "Dnorm", "Dnorm_plus"]])
    # bootstrap shares equal the tiers of the stored replicates
    boot = result.bootstrap[(result.bootstrap.algo == "ppo")]
    shares = np.bincount(tier_of({m: boot[m] for m in ("V", "Dnorm", "Dnorm_plus")}, PAPER_THRESHOLDS), minlength=5) / len(boot)
    np.testing.assert_allclose(tiers.loc[("ppo", "train"), p_cols].to_numpy(dtype=float), shares)
    cond = tables["conditions"]
    assert len(cond) == 8 and set(cond["n_seeds"]) == {4}
    for _, row in cond.iterrows():
        assert row["tier"] == tier(row["V_mean"], row["Dnorm_mean"], row["Dnorm_plus_mean"])
        assert sum(row[c] for c in p_cols) == pytest.approx(1.0)
