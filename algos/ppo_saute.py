"""PPO-Saute (Sootla et al. 2022): plain PPO on the task with the remaining safety budget in the
state, as CRAX writes it (`training/agents/ppo_saute/train.py` and its `envs/wrappers/saute.py`).

Per env, a budget b starts at the bound d. After every step with cost c:

    b~ = (b - c) / gamma_budget          (gamma_budget: saute_gamma_budget, 0 = the discount)
    violated = b~ < 0
    b  = clip(b~, 0, 3 d)
    r  = saute_penalty (-1) if violated else the task's reward

and the policy (and both normalisers and critics) see the observation with clip(b / d, 0, 2)
appended (b itself with saute_normalize_obs 0). The reward the critics and advantages are
trained on is r (then scaled by reward_scaling like any reward); the episode log keeps the
task's own return and cost. Evaluation episodes start with a full budget, as CRAX wraps its
evaluation env too.

At an episode's end the observation shows the full budget (CRAX's first observation). The
budget itself resets at every episode end here, as in the paper and as the platform's episodes
are independent (docs/envs.md); CRAX resets it only when the task terminates and carries it
across time-limit ends (its auto-reset keeps `info`), which `saute_carry_budget=1` reproduces.
"""
from __future__ import annotations

from typing import NamedTuple

import jax.numpy as jnp

from algos.ppo import ppo_loss
from algos.interface import EnvTransform, Hooks


class SauteState(NamedTuple):
    budget: jnp.ndarray  # [n] remaining budget b
    shown: jnp.ndarray  # [n] the budget the next observation shows (d after an episode's end)
    violations: jnp.ndarray  # [n] steps of the running episode whose reward was the penalty
    last_budget: jnp.ndarray  # [n] b at the end of the env's latest finished episode (d before any)
    last_violations: jnp.ndarray  # [n] penalised steps of that episode (CRAX's `saute_violated` sum)


def init_transform(n: int, h) -> SauteState:
    full = jnp.full((n,), h.bound, jnp.float32)
    zero = jnp.zeros((n,), jnp.float32)
    return SauteState(full, full, zero, full, zero)


def observe(ts: SauteState, obs, h):
    b = jnp.where(h.saute_normalize_obs > 0.5, jnp.clip(ts.shown / h.bound, 0.0, 2.0), ts.shown)
    return jnp.concatenate([obs, b[..., None].astype(obs.dtype)], axis=-1)


def step(ts: SauteState, env_state, h):
    gamma = jnp.where(h.saute_gamma_budget > 0, h.saute_gamma_budget, h.discount)
    candidate = (ts.budget - env_state.cost) / gamma
    violated = candidate < 0.0
    budget = jnp.clip(candidate, 0.0, 3.0 * h.bound)
    reward = jnp.where(violated, h.saute_penalty, env_state.reward).astype(jnp.float32)
    done = env_state.done
    terminated = done & ~env_state.truncated
    reset = terminated | (done & (h.saute_carry_budget < 0.5))
    full = jnp.broadcast_to(jnp.asarray(h.bound, jnp.float32), budget.shape)
    violations = ts.violations + violated.astype(jnp.float32)
    new = SauteState(
        budget=jnp.where(reset, full, budget).astype(jnp.float32),
        shown=jnp.where(done, full, budget).astype(jnp.float32),
        violations=jnp.where(done, 0.0, violations).astype(jnp.float32),
        last_budget=jnp.where(done, budget, ts.last_budget).astype(jnp.float32),
        last_violations=jnp.where(done, violations, ts.last_violations).astype(jnp.float32))
    return new, reward


def init(h):
    return ()  # no per-update state: everything lives in the transform


def trace(state, ts: SauteState, h):
    """Over the training envs' latest finished episodes: mean remaining budget at the end (b / d)
    and mean number of penalised steps."""
    return jnp.mean(ts.last_budget) / h.bound, jnp.mean(ts.last_violations)


HOOKS = Hooks(init=init, trace=trace, loss=ppo_loss,
              transform=EnvTransform(extra_obs=1, init=init_transform, observe=observe, step=step))
