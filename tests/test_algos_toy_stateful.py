"""Adding a stateful algorithm is one module plus one table entry: in a copy of the repository a
toy algorithm with its own state (a Lagrange multiplier moved with momentum) is added exactly so
(algos/momentum.py and one entry in algos/registry.py, nothing else) and a tiny sweep trains it,
traces its state and computes its metrics up to tiers.csv."""
from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from toy_sweep import toy_sweep

pytestmark = pytest.mark.slow

TOY_MODULE = '''"""A Lagrange multiplier moved with momentum: its own two-leaf state, one traced column."""
from typing import NamedTuple

import jax.numpy as jnp

from algos.ppo_lag import ppo_lag_loss
from algos.interface import Hooks


class State(NamedTuple):
    lam: jnp.ndarray
    velocity: jnp.ndarray


def init(h):
    return State(jnp.float32(0.0), jnp.float32(0.0))


def update(s, stats, h):
    velocity = h.momentum_beta * s.velocity + stats.violation
    return State(jnp.maximum(0.0, s.lam + h.momentum_lr * velocity), velocity)


def trace(s, transform_state, h):
    return s.lam, s.velocity


HOOKS = Hooks(init=init, trace=trace, update=update, loss=ppo_lag_loss)
'''
TOY_ENTRY = '''    "momentum": Algorithm(
        label="Momentum-Lag", uses_cost_critic=True, hooks=lambda: algos.momentum.HOOKS,
        multiplier="lambda (momentum)", state_columns=("momentum_velocity",),
        scalars={"momentum_lr": 3.0, "momentum_beta": 0.9}),
'''


@pytest.fixture(scope="module")
def toy_work(tmp_path_factory) -> Path:
    return toy_sweep(tmp_path_factory.mktemp("toy_stateful"), TOY_ENTRY, {"algos/momentum.py": TOY_MODULE},
                     "preset: tiny\nalgos: [momentum]\nbounds: [15]\n")


def test_a_stateful_toy_added_in_one_module_trains_traces_its_state_and_is_evaluated(toy_work):
    runs = sorted((toy_work / "results-tiny" / "runs" / "circle").glob("d*/momentum/seed*"))
    assert [r.relative_to(toy_work / "results-tiny" / "runs").as_posix() for r in runs] == [
        "circle/d15/momentum/seed0", "circle/d15/momentum/seed1"]
    for run in runs:
        trace = pd.read_parquet(run / "trace.parquet")
        assert "momentum_velocity" in trace.columns  # the entry's state column, traced per iterate
        lam, velocity = trace["multiplier"].to_numpy(), trace["momentum_velocity"].to_numpy()
        if trace["update"].iloc[0] == 0:  # the first iterate precedes any update only where a rollout spans an episode
            assert lam[0] == 0.0 and velocity[0] == 0.0
        assert (lam >= 0).all() and np.isfinite(velocity).all()
        assert np.any(velocity != 0.0)  # the state moved
        config = json.loads((run / "run.json").read_text())["config"]
        assert (config["algo"], config["momentum_lr"], config["momentum_beta"]) == ("momentum", 3.0, 0.9)
    tiers = pd.read_csv(toy_work / "results-tiny" / "metrics" / "tiers.csv")
    assert set(tiers["algo"]) == {"momentum"}
