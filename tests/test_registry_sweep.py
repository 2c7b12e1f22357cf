"""Adding an algorithm is one table entry plus its hook functions: in a copy of the repository
a toy algorithm is added exactly so (algos/registry.py and its own module, nothing else) and
a tiny sweep trains it and computes its metrics up to tiers.csv."""
from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from toy_sweep import toy_sweep

pytestmark = pytest.mark.slow

# A penalty method whose weight grows only while the cost is above the bound and never shrinks.
TOY_ENTRY = '''    "ratchet": Algorithm(
        label="Ratchet", uses_cost_critic=True,
        loss=lambda: algos.ratchet.ratchet_loss, update=lambda: algos.ratchet.ratchet_update,
        multiplier_init="ratchet_init", scalars={"ratchet_init": 0.25, "ratchet_rate": 2.0}),
'''
TOY_MODULE = '''"""Ratchet: a penalty weight that only grows."""
import jax.numpy as jnp

from algos.config import Hyper
from algos.interface import LossInputs
from algos.ppo import clipped_surrogate, standardise


def ratchet_loss(x: LossInputs, h: Hyper):
    return clipped_surrogate(x.ratio, x.adv - x.multiplier * standardise(x.cost_adv), h.clip_eps)


def ratchet_update(m, violation, h: Hyper):
    return m + h.ratchet_rate * jnp.maximum(violation, 0.0)
'''


@pytest.fixture(scope="module")
def toy_work(tmp_path_factory) -> Path:
    return toy_sweep(tmp_path_factory.mktemp("toy_algo"), TOY_ENTRY, {"algos/ratchet.py": TOY_MODULE},
                     "preset: tiny\nalgos: [ratchet]\n")


def test_a_toy_algorithm_added_through_the_registry_trains_and_is_evaluated(toy_work):
    runs = sorted((toy_work / "results-tiny" / "runs" / "circle").glob("d*/ratchet/seed*"))
    assert [r.relative_to(toy_work / "results-tiny" / "runs").as_posix() for r in runs] == [
        "circle/d15/ratchet/seed0", "circle/d15/ratchet/seed1", "circle/d25/ratchet/seed0", "circle/d25/ratchet/seed1"]
    for run in runs:
        trace = pd.read_parquet(run / "trace.parquet")
        m = trace["multiplier"].to_numpy()
        # starts at its scalar's default, only ever grows (the toy's rule), and was trained with
        # a cost critic (the table says so)
        # (the first iterate is logged once every env has finished an episode: after update 0
        # only where an update's rollout covers a whole episode)
        first = trace["update"].iloc[0]
        assert (m[0] == np.float32(0.25) if first == 0 else m[0] >= np.float32(0.25)) and np.all(np.diff(m) >= 0)
        assert np.isfinite(trace["cost_value_loss"].iloc[-1])  # NaN only before the first update
        episodes = pd.read_parquet(run / "episodes.parquet")
        assert set(episodes["algo"]) == {"ratchet"}
        assert set(episodes["phase"]) == {"train", "final_explore", "final_greedy"}
        config = json.loads((run / "run.json").read_text())["config"]
        assert (config["algo"], config["ratchet_init"], config["ratchet_rate"]) == ("ratchet", 0.25, 2.0)
    tiers = pd.read_csv(toy_work / "results-tiny" / "metrics" / "tiers.csv")
    assert set(tiers["algo"]) == {"ratchet"} and set(tiers["phase"]) == {"train", "final_explore", "final_greedy"}
    iqm = pd.read_csv(toy_work / "results-tiny" / "metrics" / "iqm.csv")
    assert set(iqm["algo"]) == {"ratchet"}
