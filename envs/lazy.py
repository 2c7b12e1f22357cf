"""`where(pred, fn(arg), other)` that under jax.vmap computes fn only when some element needs it.

A per-environment `lax.cond` turns into a `select` under vmap, so an auto-reset written the
obvious way would rebuild a whole layout (hundreds of candidate placements) on every step of
every environment. With a custom batching rule the batched version becomes
`where(pred, cond(any(pred), vmap(fn)(arg), zeros), other)`: identical results, and the
reset work is done only on the steps where some environment actually finishes (every T steps
when episodes run in lockstep). When only a few environments need fn (a goal respawn), fn
runs on just those, gathered and scattered back, not on the whole batch. Only fn's result
passes through the cond (zeros when nobody needs it); the select stays outside, where it
fuses with the rest of the step. Not differentiable (custom_vmap has no reverse mode), which an environment step does not need.
"""
from __future__ import annotations

from typing import Any, NamedTuple

import jax
import jax.numpy as jnp


class StepKey(NamedTuple):
    """A step's key left unfolded: `step_key(k)` is `fold_in(key, t)`. Tasks that set
    `lazy_step_key = True` receive this from `Env.step` and fold it only where they draw (inside
    a lazy branch), since a per-env threefry on every step was a measurable part of a step."""

    key: Any
    t: Any


def step_key(key):
    """The PRNG key of a step: fold_in(key, t) for a StepKey, the key itself otherwise."""
    return jax.random.fold_in(key.key, key.t) if isinstance(key, StepKey) else key


def _broadcast(tree, batched, size):
    return jax.tree_util.tree_map(
        lambda x, b: x if b else jnp.broadcast_to(x, (size,) + jnp.shape(x)), tree, batched
    )


# Steps where at most this many environments need fn (goal respawns: a few per step at 2048
# envs) compute it for just those; more (the lockstep auto-reset) run it on the whole batch.
COMPACT = 8


def lazy_where(fn, share: float = 0.0):
    """Return select(pred, arg, other) = tree-wise where(pred, fn(arg), other).

    Under vmap, steps where at most max(COMPACT, share x batch) environments need fn compute
    it for just those (`share` for a fn needed by a steady few per cent of a large batch, such
    as the contact solve)."""

    @jax.custom_batching.custom_vmap
    def select(pred, arg, other):
        return jax.lax.cond(pred, lambda: fn(arg), lambda: other)

    @select.def_vmap
    def _rule(axis_size, in_batched, pred, arg, other):
        pred_batched, arg_batched, other_batched = in_batched
        pred = _broadcast(pred, pred_batched, axis_size)
        arg = _broadcast(arg, arg_batched, axis_size)
        other = _broadcast(other, other_batched, axis_size)

        # Only fn's result goes through the cond (zeros when nobody needs it); the select
        # stays outside, where it fuses with the rest of the step.
        batched_fn = jax.vmap(fn)
        shapes = jax.eval_shape(batched_fn, arg)
        zeros = lambda: jax.tree_util.tree_map(lambda s: jnp.zeros(s.shape, s.dtype), shapes)

        compact = max(COMPACT, int(share * axis_size))

        def few():
            # gather the (at most `compact`) environments that need fn, compute, scatter back;
            # padding repeats environment 0, whose result is the same or not selected
            index = jnp.nonzero(pred, size=compact, fill_value=0)[0]
            part = batched_fn(jax.tree_util.tree_map(lambda a: a[index], arg))
            return jax.tree_util.tree_map(lambda z, p: z.at[index].set(p), zeros(), part)

        if axis_size > 4 * compact:
            count = jnp.sum(pred, dtype=jnp.int32)
            branch = (count > 0).astype(jnp.int32) + (count > compact).astype(jnp.int32)
            fresh = jax.lax.switch(branch, [zeros, few, lambda: batched_fn(arg)])
        else:
            fresh = jax.lax.cond(jnp.any(pred), lambda: batched_fn(arg), zeros)
        out = jax.tree_util.tree_map(
            lambda f, o: jnp.where(pred.reshape((axis_size,) + (1,) * (o.ndim - 1)), f, o), fresh, other
        )
        return out, jax.tree_util.tree_map(lambda _: True, other)

    return select
