"""PPO-Shield: PPO-Lag behind the safety layer of Dalal, Dvijotham, Vecerik, Hester, Paduraru and
Tassa (2018, "Safe exploration in continuous action spaces").

**The constraint.** Dalal et al. replace a cumulative constraint by a state-wise one on the
safety signal, c(s_t) <= C at every step. The state-wise limit that implies our episode budget
(sum of T step costs <= d) is C = d/T (times `shield_budget_scale`, 1 by default).

**The model.** The next state's cost is linear in the action around the current state,
c(s') ~ c(s) + g(s) . a: c(s) is the *observed* cost of the current state (the step cost that
led into it; 0 at an episode's first state, as a reset reports it) and g an MLP of the
observation, normalised by the layer's own running normaliser (the Welford update of the
policy's, fed the same rollouts). Its loss is Dalal et al.'s, the squared error of
c(s) + g(s) . a against c(s') over the single-step transitions of each rollout, for the actions
the env got; `shield_fit_steps` full-batch Adam steps (rate `shield_lr`) per update. Its
weights are drawn from the run's key (`Hooks.keyed_init`), so seeds differ and a seed repeats.

**Warm-up on random actions.** Dalal et al. pre-train g on transitions of uniformly random
actions. Here the first `shield_warmup_updates` updates are that phase, inside the one
program: the env gets actions drawn uniformly from the box, the model fits on them, the policy
loss is 0 (the policy moves by the entropy bonus alone: its samples never reached the env) and
the multiplier waits. Their episodes are training episodes like any other and are logged.

**The layer.** After the warm-up, the env gets a* = argmin |a - mu|^2 over the action box
subject to c(s) + g . a <= C, for the policy's sampled action mu = tanh(z) (PPO's policy is
stochastic; correcting the sample keeps every action the env gets within the limit). Dalal et
al.'s closed form, lambda* = max(0, (g . mu + c(s) - C) / (g . g)) and a* = mu - lambda* g,
solves it where a* stays in the box; where the clip binds, the same problem's exact solution
a* = clip(mu - lambda g) with lambda the least value meeting the limit (piecewise linear in
lambda, solved exactly at its A breakpoints), so the clipped action still meets it.
**Infeasible states** (c(s) - sum |g_i| > C: no action in the box meets the limit, mostly the
agent already inside a hazard, whose flat cost makes g there least informative): no
correction, the policy's action passes. The least-cost action there would be the box corner
-sign(g) whatever the policy chose, a linearisation's guess at the way out overruling the
policy on every such step; PPO-Lag's multiplier is what answers the cost of those states.

PPO trains on the policy's own sample (the layer is part of the task as the policy sees it).
The layer is part of the deployed agent, so the final evaluation acts through it too, in both
phases: the env gets the layer's correction of tanh(z) with noise, of tanh(mu) greedily. The
multiplier is PPO-Lag's, lambda <- max(0, lambda + shield_lagrangian_lr (c - d/T)).

The trace, per iterate (of the latest rollout; NaN during the warm-up): `shield_corrected`
(share of steps the layer changed), `shield_correction` (mean |a* - mu| over the changed
steps), `shield_clipped` (share of the changed steps whose closed form left the box),
`shield_infeasible` (share of steps with no action meeting the limit), `shield_model_loss`
(the model's squared error on the rollout before its fit).

The model sees observations of up to MAX_OBS entries and MAX_ACT action dimensions (its arrays
are sized before the task is known; the layer slices them to the task's sizes).
"""
from __future__ import annotations

from typing import Any, NamedTuple

import jax
import jax.numpy as jnp
import optax

from algos import registry
from algos.ppo_lag import ppo_lag_loss
from algos.interface import Hooks, UpdateStats
from algos.networks import init_mlp
from algos.normalizer import Normalizer, init_normalizer, update_normalizer

MAX_OBS, MAX_ACT = registry.get("ppo_shield").max_sizes  # the sweep's config check refuses larger tasks
HIDDEN = 64
_ADAM = optax.scale_by_adam()
NAN = float("nan")


class ShieldState(NamedTuple):
    lam: jnp.ndarray  # PPO-Lag's multiplier
    limit: jnp.ndarray  # C = scale * d/T, from the latest update's stats (inf before the first: no layer)
    model: Any  # g's MLP layers
    opt: Any  # its Adam state
    norm: Normalizer  # the model's observation normaliser (MAX_OBS entries)
    updates: jnp.ndarray  # int32: updates done (the warm-up is the first shield_warmup_updates)
    corrected: jnp.ndarray  # the latest rollout's statistics of the layer (trace columns)
    correction: jnp.ndarray
    clipped: jnp.ndarray
    infeasible: jnp.ndarray
    model_loss: jnp.ndarray


class StepRecord(NamedTuple):
    """What `act` records of each step for `update` ([N] each, [S, N] once stacked)."""

    action: jnp.ndarray  # [N, A] the action the env got
    cost: jnp.ndarray  # c(s), the observed cost of the state acted in
    corrected: jnp.ndarray  # the layer changed the action
    size: jnp.ndarray  # |a* - mu|
    clipped: jnp.ndarray  # the closed form left the box
    infeasible: jnp.ndarray  # no action in the box meets the limit


def init(h, key) -> ShieldState:
    model = init_mlp(key, (MAX_OBS, HIDDEN, MAX_ACT))
    nan = jnp.float32(NAN)
    return ShieldState(jnp.asarray(h.shield_lagrangian_init, jnp.float32), jnp.float32(jnp.inf), model,
                       _ADAM.init(model), init_normalizer(MAX_OBS), jnp.int32(0), nan, nan, nan, nan, nan)


def _slice(norm: Normalizer, size: int) -> Normalizer:
    return Normalizer(norm.count, norm.mean[:size], norm.summed_var[:size], norm.std[:size])


def cost_gradient(model, norm: Normalizer, obs, action_size: int):
    """g [n, A] of observations [n, O] (normalised with `norm`)."""
    size = obs.shape[-1]
    if size > MAX_OBS or action_size > MAX_ACT:
        raise ValueError(f"algos.ppo_shield: observation size {size} / action size {action_size} over "
                         f"the layer's {MAX_OBS} / {MAX_ACT}")
    x = (obs - norm.mean[:size]) / norm.std[:size]
    hidden = jnp.tanh(x @ model[0]["w"][:size] + model[0]["b"])
    return hidden @ model[1]["w"][:, :action_size] + model[1]["b"][:action_size]


def safety_layer(g, cost, limit, action):
    """The correction of actions [n, A] in the box [-1, 1]^A under c(s) + g . a <= C.

    Returns (a*, corrected, clipped, infeasible): a* = mu where mu meets the limit or no action
    in the box does (infeasible); otherwise the nearest action in the box that meets it,
    clip(mu - lambda g) with lambda the least such value (Dalal et al.'s closed form lambda*
    where its action stays in the box; `clipped` where it does not)."""
    margin = limit - cost  # g . a* <= margin
    predicted = jnp.sum(g * action, axis=-1)
    infeasible = -jnp.sum(jnp.abs(g), axis=-1) > margin
    corrected = (predicted > margin) & ~infeasible
    closed_form = jax.nn.relu((predicted - margin) / (jnp.sum(g * g, axis=-1) + 1e-12))
    clipped = corrected & jnp.any(jnp.abs(action - closed_form[:, None] * g) > 1.0, axis=-1)
    # h(lambda) = g . clip(mu - lambda g) falls linearly between the breakpoints where one
    # dimension reaches the box ((mu_i + sign g_i) / g_i; 0 for a dimension g does not move)
    moves = g != 0
    breaks = jnp.where(moves, (action + jnp.sign(g)) / jnp.where(moves, g, 1.0), 0.0)
    points = jnp.concatenate([jnp.zeros_like(breaks[:, :1]), jnp.sort(breaks, axis=-1)], axis=-1)  # [n, A+1]
    at = jnp.clip(action[:, None, :] - points[:, :, None] * g[:, None, :], -1.0, 1.0)
    h = jnp.sum(at * g[:, None, :], axis=-1)  # [n, A+1], non-increasing
    k = jnp.clip(jnp.argmax(h <= margin[:, None], axis=-1), 1, points.shape[-1] - 1)  # first point within
    lo, hi = (jnp.take_along_axis(points, i[:, None], -1)[:, 0] for i in (k - 1, k))
    h_lo, h_hi = (jnp.take_along_axis(h, i[:, None], -1)[:, 0] for i in (k - 1, k))
    lam = lo + (h_lo - margin) * (hi - lo) / jnp.maximum(h_lo - h_hi, 1e-30)
    safe = jnp.clip(action - lam[:, None] * g, -1.0, 1.0)
    return jnp.where(corrected[:, None], safe, action), corrected, clipped, infeasible


def warming(s: ShieldState, h):
    return s.updates.astype(jnp.float32) < h.shield_warmup_updates


def act(s: ShieldState, obs, action, h, cost, key):
    g = cost_gradient(s.model, s.norm, obs, action.shape[-1])
    safe, corrected, clipped, infeasible = safety_layer(g, cost, s.limit, action)
    explore = jax.random.uniform(key, action.shape, jnp.float32, -1.0, 1.0)  # the warm-up's random actions
    taken = jnp.where(warming(s, h), explore, safe)
    size = jnp.sqrt(jnp.sum(jnp.square(safe - action), axis=-1))
    return taken, StepRecord(taken, cost, corrected, size, clipped, infeasible)


def model_error(model, norm, obs, record: StepRecord, next_cost):
    """Dalal et al.'s loss: mean (c(s) + g(s) . a - c(s'))^2 over the transitions."""
    g = cost_gradient(model, norm, obs, record.action.shape[-1])
    return jnp.mean(jnp.square(record.cost + jnp.sum(g * record.action, axis=-1) - next_cost))


def update(s: ShieldState, stats: UpdateStats, h) -> ShieldState:
    obs = stats.obs.reshape(-1, stats.obs.shape[-1])
    size = obs.shape[-1]
    record = jax.tree_util.tree_map(lambda x: x.reshape((-1,) + x.shape[2:]), stats.act_record)
    next_cost = stats.step_cost.reshape(-1)
    loss = model_error(s.model, s.norm, obs, record, next_cost)  # as the layer saw the rollout
    folded = update_normalizer(_slice(s.norm, size), obs)
    norm = Normalizer(folded.count, s.norm.mean.at[:size].set(folded.mean),
                      s.norm.summed_var.at[:size].set(folded.summed_var), s.norm.std.at[:size].set(folded.std))

    def fit(_, carry):
        model, opt = carry
        grads = jax.grad(model_error)(model, norm, obs, record, next_cost)
        updates, opt = _ADAM.update(grads, opt, model)
        return jax.tree_util.tree_map(lambda p, u: p - h.shield_lr * u, model, updates), opt

    model, opt = jax.lax.fori_loop(0, jnp.asarray(h.shield_fit_steps, jnp.int32), fit, (s.model, s.opt))
    warm = warming(s, h)
    lam = jnp.where(warm, s.lam, jnp.maximum(0.0, s.lam + h.shield_lagrangian_lr * stats.violation))
    limit = h.shield_budget_scale * (stats.mean_step_cost - stats.violation)  # scale * d/T
    changed = record.corrected.astype(jnp.float32)
    n_changed = jnp.sum(changed)

    def layer_stat(value):
        return jnp.where(warm, jnp.float32(NAN), value).astype(jnp.float32)

    return ShieldState(
        lam.astype(jnp.float32), limit.astype(jnp.float32), model, opt, norm, s.updates + 1,
        layer_stat(jnp.mean(changed)),
        layer_stat(jnp.sum(record.size * changed) / n_changed),  # NaN where nothing changed
        layer_stat(jnp.sum(record.clipped.astype(jnp.float32)) / n_changed),
        layer_stat(jnp.mean(record.infeasible.astype(jnp.float32))),
        loss.astype(jnp.float32))


def loss(x, h):
    """PPO-Lag's policy loss; 0 in the warm-up, whose actions were not the policy's."""
    return jnp.where(warming(x.state, h), 0.0, ppo_lag_loss(x, h))


def trace(s: ShieldState, transform_state, h):
    return s.lam, s.corrected, s.correction, s.clipped, s.infeasible, s.model_loss



def multiplier(s: ShieldState, h):
    """The Lagrange multiplier PPO-Lag's loss weighs the cost advantage by."""
    return s.lam


HOOKS = Hooks(init=init, trace=trace, update=update, loss=loss, act=act, keyed_init=True, multiplier=multiplier)
