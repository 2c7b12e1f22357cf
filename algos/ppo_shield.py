"""PPO-Shield: PPO-Lag behind a safety layer (Dalal, Dvijotham, Vecerik, Hester, Paduraru and
Tassa 2018, "Safe exploration in continuous action spaces"), aimed at few violations in training.

A learned linear-in-action cost model c(s, a) ~ f(s) + g(s) . a (one MLP of the policy
observation, outputs f and g) predicts each step's cost. In the rollout the env gets the
action a* nearest (in L2) to the policy's a whose predicted cost stays within the per-step
budget b = shield_budget_scale * d/T, the safety layer's closed form for one constraint:

    lambda* = relu((f + g . a - b) / (|g|^2 + 1e-8)),   a* = clip(a - lambda* g, -1, 1)

PPO trains on the policy's own sample (the layer is part of the task as the policy sees it);
the final evaluation acts unshielded, the greedy action tanh(mu) as for every algorithm. Once
per update the model takes `shield_fit_steps` full-batch Adam steps (rate `shield_lr`) on the
squared error of the rollout's step costs against c(s, a*) for the actions the env got, and
PPO-Lag's multiplier moves: lambda <- max(0, lambda + shield_lagrangian_lr (c - d/T)).

The model sees observations of up to MAX_OBS entries and MAX_ACT action dimensions (its arrays
are sized before the task is known; the layer slices them to the task's sizes).
"""
from __future__ import annotations

from typing import Any, NamedTuple

import jax
import jax.numpy as jnp
import optax

from algos.hooks import ppo_lag_loss
from algos.interface import Hooks, UpdateStats
from algos.networks import init_mlp

MAX_OBS, MAX_ACT, HIDDEN = 256, 8, 64
_ADAM = optax.scale_by_adam()


class ShieldState(NamedTuple):
    lam: jnp.ndarray  # PPO-Lag's multiplier
    step_budget: jnp.ndarray  # b, from the latest update's stats (0 before: no model, no correction)
    model: Any  # the cost model's MLP layers
    opt: Any  # its Adam state
    corrected: jnp.ndarray  # share of the latest rollout's steps the layer changed
    model_loss: jnp.ndarray  # the model's mean squared error on the latest rollout, before its fit


def init(h) -> ShieldState:
    model = init_mlp(jax.random.PRNGKey(0), (MAX_OBS, HIDDEN, 1 + MAX_ACT))
    model[-1] = {"w": jnp.zeros_like(model[-1]["w"]), "b": model[-1]["b"]}  # predicts 0: no correction yet
    zero = jnp.float32(0.0)
    return ShieldState(jnp.asarray(h.shield_lagrangian_init, jnp.float32), zero, model, _ADAM.init(model),
                       zero, jnp.float32(jnp.nan))


def cost_model(model, obs, action_size: int):
    """(f [n], g [n, A]) of policy observations [n, O]."""
    size = obs.shape[-1]
    if size > MAX_OBS or action_size > MAX_ACT:
        raise ValueError(f"algos.ppo_shield: observation size {size} / action size {action_size} over "
                         f"the layer's {MAX_OBS} / {MAX_ACT}")
    hidden = jnp.tanh(obs @ model[0]["w"][:size] + model[0]["b"])
    out = hidden @ model[1]["w"][:, :1 + action_size] + model[1]["b"][:1 + action_size]
    return out[:, 0], out[:, 1:]


def correct(model, budget, obs, action):
    """(a*, lambda*): the safety layer's correction of actions [n, A] at observations [n, O]."""
    f, g = cost_model(model, obs, action.shape[-1])
    predicted = f + jnp.sum(g * action, axis=-1)
    lam = jax.nn.relu((predicted - budget) / (jnp.sum(g * g, axis=-1) + 1e-8))
    return jnp.clip(action - lam[:, None] * g, -1.0, 1.0), lam


def act(s: ShieldState, obs, action, h):
    return correct(s.model, s.step_budget, obs, action)[0]


def update(s: ShieldState, stats: UpdateStats, h) -> ShieldState:
    obs = stats.obs.reshape(-1, stats.obs.shape[-1])
    proposed = jnp.tanh(stats.raw_action.reshape(-1, stats.raw_action.shape[-1]))
    taken, lam_star = correct(s.model, s.step_budget, obs, proposed)  # what the env got in this rollout
    taken = jax.lax.stop_gradient(taken)
    target = stats.step_cost.reshape(-1)

    def error(model):
        f, g = cost_model(model, obs, taken.shape[-1])
        return jnp.mean(jnp.square(f + jnp.sum(g * taken, axis=-1) - target))

    def fit(_, carry):
        model, opt = carry
        grads = jax.grad(error)(model)
        updates, opt = _ADAM.update(grads, opt, model)
        return jax.tree_util.tree_map(lambda p, u: p - h.shield_lr * u, model, updates), opt

    loss = error(s.model)
    model, opt = jax.lax.fori_loop(0, jnp.asarray(h.shield_fit_steps, jnp.int32), fit, (s.model, s.opt))
    lam = jnp.maximum(0.0, s.lam + h.shield_lagrangian_lr * stats.violation)
    budget = h.shield_budget_scale * (stats.mean_step_cost - stats.violation)  # scale * d/T
    return ShieldState(lam.astype(jnp.float32), budget.astype(jnp.float32), model, opt,
                       jnp.mean((lam_star > 0).astype(jnp.float32)), loss.astype(jnp.float32))


def trace(s: ShieldState, transform_state, h):
    return s.lam, s.corrected, s.model_loss


HOOKS = Hooks(init=init, trace=trace, update=update, loss=ppo_lag_loss, act=act)
