"""PPO-PID: PPO-Lag's loss with the multiplier from a PID controller (Stooke et al. 2020), as CRAX
writes it (`training/agents/ppo_pid/train.py`).

State (CRAX's aux_state, four scalars): lambda, the integral I, the previous violation v_prev
and the derivative average D; initially (pid_lambda_init, 0, 0, 0). Once per update, from the
batch's mean per-step cost c and the per-step bound d/T:

    v      = c - d/T
    I      = clip(I + v, -pid_integral_clip, pid_integral_clip)
    D      = beta * D + (1 - beta) * (v - v_prev)
    lambda = clip(relu(lambda + kp v + ki I + kd D), 0, pid_lambda_max)
    v_prev = v

The PID output is *added* to lambda every update (increment form), unlike the paper's
lambda = relu(kp v + ki I + kd D); see docs/algos.md for every departure. The policy loss is
PPO-Lag's (`algos.ppo_lag.ppo_lag_loss`, CRAX reuses `ppo_lag/losses.py`): the clipped surrogate on
A - lambda * standardise(A_C).
"""
from __future__ import annotations

from typing import NamedTuple

import jax
import jax.numpy as jnp

from algos.ppo_lag import ppo_lag_loss
from algos.interface import Hooks, UpdateStats


class PIDState(NamedTuple):
    lam: jnp.ndarray  # the Lagrange multiplier
    integral: jnp.ndarray  # I, clipped to +-pid_integral_clip
    prev_violation: jnp.ndarray  # v of the previous update
    derivative: jnp.ndarray  # D, an exponential average of v - v_prev


def init(h) -> PIDState:
    zero = jnp.float32(0.0)
    return PIDState(jnp.asarray(h.pid_lambda_init, jnp.float32), zero, zero, zero)


def update(s: PIDState, stats: UpdateStats, h) -> PIDState:
    v = stats.violation
    integral = jnp.clip(s.integral + v, -h.pid_integral_clip, h.pid_integral_clip)
    derivative = h.pid_deriv_beta * s.derivative + (1.0 - h.pid_deriv_beta) * (v - s.prev_violation)
    output = h.pid_kp * v + h.pid_ki * integral + h.pid_kd * derivative
    lam = jnp.clip(jax.nn.relu(s.lam + output), 0.0, h.pid_lambda_max)
    return PIDState(lam.astype(jnp.float32), integral.astype(jnp.float32), jnp.asarray(v, jnp.float32),
                    derivative.astype(jnp.float32))


def trace(s: PIDState, transform_state, h):
    return s.lam, s.integral, s.prev_violation, s.derivative



def multiplier(s: PIDState, h):
    """The Lagrange multiplier PPO-Lag's loss weighs the cost advantage by."""
    return s.lam


HOOKS = Hooks(init=init, trace=trace, update=update, loss=ppo_lag_loss, multiplier=multiplier)
