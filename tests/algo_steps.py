"""An algorithm's hooks called one at a time, as the core calls them, for the unit tests."""
import jax
import jax.numpy as jnp

from algos import registry
from algos.hooks import standardise
from algos.interface import LossInputs, update_stats


def init_algo_state(algo, h):
    """The algorithm's initial state."""
    return registry.get(algo).hooks_obj.init(h)


def policy_loss(algo, log_ratio, adv, cost_adv, state, h, transform_state=()):
    """The algorithm's policy loss on one minibatch (adv: raw reward advantages), its multiplier
    read from its state as the core reads it."""
    hooks = registry.get(algo).hooks_obj
    state = jax.lax.stop_gradient(state)
    multiplier = hooks.trace(state, transform_state, h)[0]
    return hooks.loss(LossInputs(jnp.exp(log_ratio), log_ratio, standardise(adv), cost_adv, multiplier,
                                 jnp.float32(0.0), state), h)


def update_multiplier(algo, state, mean_step_cost, h, episode_length):
    """One update of the algorithm's state by the per-step violation c - d/T."""
    hooks = registry.get(algo).hooks_obj
    return state if hooks.update is None else hooks.update(state, update_stats(mean_step_cost, h, episode_length), h)
