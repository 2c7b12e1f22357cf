"""The JAX recorder for environments with gymnax's interface (gymnax, safenax, ...): docs/byo.md.

gymnax's interface: ``env.reset(key, params) -> (obs, state)`` and ``env.step(key, state, action,
params)``, which returns ``(obs, state, reward, terminated, truncated, info)`` (gymnax >= 1.0) or
``(obs, state, reward, done, info)`` (gymnax < 1.0). The step that ends an episode also resets the
env (its reward and cost are the episode's last; its obs and state are the next episode's first).
The step's cost is read from ``info["cost"]``, where safenax's envs put it (``cost_key=`` for
another key).

- In the training loop (inside ``jit``/``scan``, the env under ``vmap``): :func:`unpack_step`
  reads a step's output as ``(obs, state, reward, cost, done)``; :func:`record_step` adds it to
  the episode sums and the recorder (:func:`~recorders.jax_recorder.accumulate` and
  :func:`~recorders.jax_recorder.record`); :func:`~recorders.jax_recorder.drain` writes the
  completed iterates on the host, as for any JAX loop.
- :func:`evaluate_final` records the final policy with exploration noise and greedily, through
  :func:`recorders.jax_recorder.evaluate_final`.
"""
from __future__ import annotations

import functools

import jax
import jax.numpy as jnp

from . import jax_recorder
from .writer import EpisodeWriter, RecorderError

DEFAULT_COST_KEY = "cost"


def unpack_step(result, cost_key: str = DEFAULT_COST_KEY):
    """``(obs, state, reward, cost, done)`` of a gymnax step's output (either convention; pure).

    Works on one env's output and on a vmapped step's (then each field has the env axis first);
    ``done`` is ``terminated or truncated``.
    """
    if not isinstance(result, tuple) or len(result) not in (5, 6):
        kind = f"a tuple of {len(result)}" if isinstance(result, tuple) else type(result).__name__
        raise RecorderError(f"gymnax env.step returned {kind}; expected (obs, state, reward, terminated, truncated, "
                            f"info) or (obs, state, reward, done, info)")
    if len(result) == 6:
        obs, state, reward, terminated, truncated, info = result
        done = jnp.logical_or(terminated, truncated)
    else:
        obs, state, reward, done, info = result
    if not isinstance(info, dict) or cost_key not in info:
        keys = sorted(map(str, info)) if isinstance(info, dict) else type(info).__name__
        raise RecorderError(f"gymnax env.step: info has no {cost_key!r} (its keys: {keys}); safenax's envs put the "
                            f"step's cost in info['cost']; pass cost_key= for another key")
    cost, done = info[cost_key], jnp.asarray(done, bool)
    for name, value in (("reward", reward), ("cost", cost)):
        if jnp.shape(value) != done.shape:
            raise RecorderError(f"gymnax env.step: {name} has shape {jnp.shape(value)}, done has {done.shape}; "
                                f"expected one {name} per env")
    return obs, state, reward, cost, done


def record_step(sums: jax_recorder.EpisodeSums, rec: jax_recorder.IterateRecorder, reward, cost, done):
    """Add one step of the N envs to the episode sums and the recorder; pure. Returns ``(sums, rec)``."""
    sums, finished = jax_recorder.accumulate(sums, reward, cost, done)
    return sums, jax_recorder.record_finished(rec, finished)


def episode_functions(env, params=None, cost_key: str = DEFAULT_COST_KEY):
    """``(reset, step)`` of one env for :func:`recorders.jax_recorder.final_rollout`.

    The env's state is carried with a key of its own, split from the reset key, so each
    episode's randomness (slips, noise in the costs) follows from its reset key alone. With
    ``params=None`` (the env's defaults) the same env gets the same pair back, so its compiled
    evaluation is reused; with ``params`` each call makes a new pair (keep it to reuse it).
    """
    if params is None:
        try:
            return _default_functions(env, cost_key)
        except TypeError:  # an env that cannot be hashed: no reuse
            pass
    return _functions(env, params, cost_key)


def _functions(env, params, cost_key):
    def reset(key):
        key, key_reset = jax.random.split(key)
        obs, state = env.reset(key_reset, params)
        return (state, key), obs

    def step(carried, action):
        state, key = carried
        key, key_step = jax.random.split(key)
        obs, state, reward, cost, done = unpack_step(env.step(key_step, state, action, params), cost_key)
        return (state, key), obs, reward, cost, done

    return reset, step


@functools.lru_cache(maxsize=None)
def _default_functions(env, cost_key):
    return _functions(env, None, cost_key)


def evaluate_final(writer: EpisodeWriter, env, policy, reset_keys, noise_key, num_steps: int, *, params=None,
                   cost_key: str = DEFAULT_COST_KEY) -> dict:
    """Record the two final phases of ``policy`` on the gymnax env ``env`` (host side).

    One episode per reset key, with noise (``policy(obs, key, 1.0)``) and greedily
    (``policy(obs, key, 0.0)``): ``policy`` acts on the batch of observations (see
    :func:`recorders.jax_recorder.final_rollout`). Episode i of both phases starts from reset key
    i, so both see the same start and the same env randomness, and the two differ only in the
    policy's noise. Pass the env the training loop steps, with the same wrappers. Returns
    ``{phase: {"return", "cost", "length"}}`` as written.
    """
    reset, step = episode_functions(env, params, cost_key)
    return jax_recorder.evaluate_final(writer, reset, step, policy, reset_keys, noise_key, num_steps)
