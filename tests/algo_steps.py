"""An algorithm's hooks called one at a time, as the core calls them, for the unit tests."""
import jax
import jax.numpy as jnp

from algos import registry
from algos.ppo import standardise
from algos.interface import LossInputs, update_stats


def init_algo_state(algo, h):
    """The algorithm's initial state."""
    return registry.get(algo).hooks_obj.init(h)


def policy_loss(algo, log_ratio, adv, cost_adv, state, h, transform_state=()):
    """The algorithm's policy loss on one minibatch (adv: raw reward advantages), its multiplier
    read from its state as the core reads it (Hooks.multiplier)."""
    hooks = registry.get(algo).hooks_obj
    state = jax.lax.stop_gradient(state)
    multiplier = jnp.float32(0.0) if hooks.multiplier is None else hooks.multiplier(state, h)
    return hooks.loss(LossInputs(ratio=jnp.exp(log_ratio), log_ratio=log_ratio, adv=standardise(adv),
                                 cost_adv=cost_adv, multiplier=multiplier, state=state), h)


def update_multiplier(algo, state, mean_step_cost, h, episode_length):
    """One update of the algorithm's state by the per-step violation c - d/T."""
    hooks = registry.get(algo).hooks_obj
    return state if hooks.update is None else hooks.update(state, update_stats(mean_step_cost, h, episode_length), h)


def trained_whole_and_resumed(cfg, out):
    """Train `cfg` into out/whole, and into out/resumed stopped after one chunk and resumed; check
    the two give the same episodes and trace bit for bit; returns (episodes, trace) of the whole."""
    import json
    import os

    import pandas as pd

    from runs import train

    def tables(folder):
        episodes = pd.read_parquet(os.path.join(folder, "episodes.parquet"))
        return episodes, pd.read_parquet(os.path.join(folder, "trace.parquet")).drop(columns="wall_time")

    whole, resumed = os.path.join(out, "whole"), os.path.join(out, "resumed")
    assert train.run(cfg, whole, quiet=True) == 0
    assert train.run(cfg, resumed, quiet=True, stop_after_chunks=1) == train.EXIT_TEMPFAIL
    assert os.path.exists(os.path.join(resumed, "checkpoint", "state-0.json"))
    assert train.run(cfg, resumed, quiet=True) == 0
    (ep_a, tr_a), (ep_b, tr_b) = tables(whole), tables(resumed)
    pd.testing.assert_frame_equal(ep_a, ep_b, check_exact=True)
    pd.testing.assert_frame_equal(tr_a, tr_b, check_exact=True)
    assert json.load(open(os.path.join(resumed, "run.json")))["restarts"] == 1
    return ep_a, tr_a
