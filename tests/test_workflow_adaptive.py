"""Adaptive seeds (workflow.adaptive, workflow/rules/adaptive.smk): the rounds, the decision
rule on runs tables with a known tier confidence, the config check, and a tiny adaptive
sweep that adds seeds round by round, stops at its budget, and plans nothing when rerun."""
from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from workflow import adaptive, packs, status
from workflow import config_validation as cv

REPO = Path(__file__).resolve().parent.parent
SETTINGS = {"target": 0.9, "step": 2, "max_seeds": 6}
pytestmark = pytest.mark.filterwarnings("ignore::metrics.schema.MetricsWarning")


def cfg(**adaptive_settings):
    return cv.resolve({"preset": "tiny", "seeds": 2, "adaptive": {**SETTINGS, **adaptive_settings}})


def runs_table(values_by_algo):
    """Stage-1 runs: per algo, Dnorm of seed s in stratum (task, bound) = values[s][stratum]."""
    rows = []
    for algo, values in values_by_algo.items():
        for s in range(len(values)):
            for k, (task, bound) in enumerate([("a", 10.0), ("a", 20.0), ("b", 10.0), ("b", 20.0)]):
                d = values[s][k]
                for phase in ("train", "final_explore", "final_greedy"):
                    rows.append({"task": task, "bound": bound, "algo": algo, "seed": s, "phase": phase, "R": 1.0,
                                 "C": bound * (1 + d), "V": 0.3, "Dnorm": d, "Dnorm_plus": max(d, 0.0),
                                 "source": f"{algo}.parquet"})
    return pd.DataFrame(rows)


def test_rounds_cover_the_budget_in_steps_and_packs_follow_them():
    c = cfg(step=3, max_seeds=7)
    assert adaptive.rounds(c) == [[0, 1], [2, 3, 4], [5, 6]]
    assert c["seeds"] == list(range(7))  # every run a round may add has a spec
    names = [p.name for p in packs.plan(c) if p.name.startswith("circle_ppo_r")]
    assert names == ["circle_ppo_r0_p0", "circle_ppo_r1_p0", "circle_ppo_r2_p0"]
    by_name = {p.name: p for p in packs.plan(c)}
    assert all(r.endswith(("seed2", "seed3", "seed4")) for r in by_name["circle_ppo_r1_p0"].runs)


def test_the_decision_adds_seeds_to_the_unsure_algorithm_only():
    rng = np.random.default_rng(0)
    clear = -0.5 + 0.01 * rng.standard_normal((2, 4))  # Dnorm far below the `minimal` limit 0
    on_threshold = np.array([[-0.3, 0.3, -0.3, 0.3], [0.3, -0.3, 0.3, -0.3]])  # IQM straddles Dnorm 0
    c = cfg()
    c["algos"] = ["ppo", "ppo_lag"]
    first = adaptive.decide(c, 1, runs_table({"ppo": clear, "ppo_lag": on_threshold}), None)
    assert first["algos"]["ppo"]["state"] == "settled" and first["algos"]["ppo"]["seeds"] == [0, 1]
    assert first["algos"]["ppo_lag"]["state"] == "adding" and first["algos"]["ppo_lag"]["seeds"] == [0, 1, 2, 3]
    assert "< 0.9" in first["algos"]["ppo_lag"]["why"]
    # round 2: the settled one stays settled; the unsure one, still unsure, gets round 2's seeds
    more = np.vstack([on_threshold, on_threshold])
    second = adaptive.decide(c, 2, runs_table({"ppo": clear, "ppo_lag": more}), first)
    assert second["algos"]["ppo"] == first["algos"]["ppo"] | {"confidence": second["algos"]["ppo"]["confidence"]}
    assert second["algos"]["ppo_lag"]["seeds"] == [0, 1, 2, 3, 4, 5]
    # at the budget it stops and says so
    last = adaptive.decide(cfg(max_seeds=6, step=2) | {"algos": ["ppo", "ppo_lag"]}, 2,
                           runs_table({"ppo": clear, "ppo_lag": np.vstack([more, on_threshold])}),
                           second | {"algos": {**second["algos"], "ppo_lag": {**second["algos"]["ppo_lag"]}}})
    assert last["algos"]["ppo_lag"]["state"] == "budget" and "seed budget (6) reached" in last["algos"]["ppo_lag"]["why"]


def test_a_target_reached_after_more_seeds_stops_the_algorithm():
    c = cfg()
    c["algos"] = ["ppo"]
    rng = np.random.default_rng(1)
    tight = -0.5 + 0.01 * rng.standard_normal((4, 4))
    decision = adaptive.decide(c, 2, runs_table({"ppo": tight}),
                               {"round": 1, "algos": {"ppo": {"seeds": [0, 1, 2, 3], "state": "adding", "why": ""}}})
    assert decision["algos"]["ppo"]["state"] == "settled" and decision["algos"]["ppo"]["seeds"] == [0, 1, 2, 3]
    assert "with 4 seeds" in decision["algos"]["ppo"]["why"]


@pytest.mark.parametrize("override, words", [
    ({"seeds": 1}, "config key 'seeds': 1: with 'adaptive', seeds is the count the sweep starts with, at least 2"),
    ({"seeds": [0, 1]}, "config key 'seeds': [0, 1]: with 'adaptive'"),
    ({"adaptive": {**SETTINGS, "max_seeds": 1}}, "config key 'adaptive.max_seeds'"),
    ({"adaptive": {**SETTINGS, "target": 1.5}}, "config key 'adaptive.target'"),
    ({"adaptive": {"target": 0.9}}, "config key 'adaptive'"),
])
def test_bad_adaptive_settings_are_refused_naming_the_key(override, words):
    with pytest.raises(cv.ConfigError) as err:
        cv.resolve({"preset": "tiny", "seeds": 2, "adaptive": SETTINGS, **override})
    assert words in str(err.value)


@pytest.mark.slow
def test_an_adaptive_tiny_sweep_adds_seeds_per_round_to_its_budget_and_a_rerun_plans_nothing(tmp_path):
    # The Dnorm limit of `strict` inside the final-greedy bootstrap spread of both algorithms
    # (at this budget PPO-Lag's multiplier is still 0, so the two train alike): both stay unsure
    # and get every round's seeds up to the budget; the decision rule's choice between
    # algorithms is tested above on runs with a known spread.
    (tmp_path / "a.yaml").write_text(
        "preset: tiny\nseeds: 2\nadaptive: {target: 0.99, step: 1, max_seeds: 3}\n"
        "thresholds:\n  minimal: {Dnorm: 0.0}\n  moderate: {V: 0.5}\n  substantial: {V: 0.1, Dnorm_plus: 0.1}\n"
        "  strict: {V: 0.0, Dnorm_plus: 0.0, Dnorm: -0.924}\n")
    cmd = [sys.executable, "-m", "snakemake", "--snakefile", str(REPO / "Snakefile"), "--workflow-profile",
           str(REPO / "cluster_profiles" / "local"), "--configfile", "a.yaml"]
    proc = subprocess.run(cmd, cwd=tmp_path, capture_output=True, text=True)
    assert proc.returncode == 0, proc.stderr[-3000:]
    decision = json.loads((tmp_path / adaptive.decision_path(1, "results-tiny")).read_text())
    table = pd.read_csv(tmp_path / adaptive.seed_table_path("results-tiny")).set_index("algo")
    for algo, d in decision["algos"].items():
        p = min(c["p_tier"] for c in d["confidence"].values())
        assert (d["state"] == "adding") == (p < 0.99)
        assert d["seeds"] == ([0, 1, 2] if p < 0.99 else [0, 1])
        assert table.loc[algo, "seeds"] == len(d["seeds"])
    assert any(d["state"] == "adding" for d in decision["algos"].values()), decision
    trained = {p.relative_to(tmp_path / "results-tiny/runs").parent.as_posix()
               for p in (tmp_path / "results-tiny/runs").rglob("run.json")}
    wanted = {f"circle/d{b}/{a}/seed{s}" for a, d in decision["algos"].items() for s in d["seeds"] for b in (15, 25)}
    assert trained == wanted  # no seed beyond what the decision chose
    runs = pd.read_parquet(tmp_path / "results-tiny/metrics/run_metrics.parquet")
    assert {(a, s) for a, s in zip(runs["algo"], runs["seed"])} == {(a, s) for a, d in decision["algos"].items()
                                                                   for s in d["seeds"]}
    states = status.sweep_status(cv.resolve({"preset": "tiny", "seeds": 2, "adaptive": {"target": 0.99, "step": 1,
                                                                                         "max_seeds": 3}}), tmp_path)
    assert {s.state for s in states} == {"done"} and len(states) == len(wanted)
    again = subprocess.run([*cmd, "--dry-run"], cwd=tmp_path, capture_output=True, text=True)
    assert again.returncode == 0 and "Nothing to be done" in again.stdout + again.stderr
    assert "seeds.csv" in (tmp_path / "results-tiny/report.html").read_text()
