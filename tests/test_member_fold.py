"""The member fold of a batched pack (algos.core.env_batch) on a synthetic task state that holds
every kind of leaf a task's state can: float, integer and boolean arrays, zero-size arrays (MJX
keeps empty contact arrays), per-env scalars and a nested tree. The folded step must give every
member exactly what the same step gives that member's envs alone."""
import jax
import jax.numpy as jnp
import numpy as np
import pytest

from algos.learning import env_batch, merge_member_axis, split_member_axis

MEMBERS, ENVS = 3, 4


def reset(key):
    """One env's state: a leaf of each kind."""
    k1, k2 = jax.random.split(key)
    return {
        "pos": jax.random.normal(k1, (2,)),
        "count": jnp.int32(0),  # per-env scalar, integer
        "done": jnp.bool_(False),  # per-env scalar, boolean
        "hits": jax.random.randint(k2, (3,), 0, 5),
        "contacts": {"dist": jnp.zeros((0,), jnp.float32), "frame": jnp.zeros((0, 3, 3), jnp.float32),
                     "geom": jnp.zeros((0, 2), jnp.int32)},
        "empty_flags": jnp.zeros((2, 0), bool),
    }


def step(state, action):
    pos = state["pos"] + action
    return {
        "pos": pos,
        "count": state["count"] + 1,
        "done": jnp.logical_or(state["done"], pos.sum() > 0.5),
        "hits": state["hits"] + (pos[0] > 0).astype(jnp.int32),
        "contacts": jax.tree_util.tree_map(lambda x: x * 2, state["contacts"]),
        "empty_flags": jnp.logical_not(state["empty_flags"]),
    }


def members_state():
    keys = jax.random.split(jax.random.PRNGKey(7), MEMBERS * ENVS).reshape(MEMBERS, ENVS, 2)
    return jax.vmap(jax.vmap(reset))(keys)


def test_folding_members_into_the_env_batch_gives_each_member_its_own_step_exactly():
    states = members_state()
    actions = jax.random.uniform(jax.random.PRNGKey(1), (MEMBERS, ENVS, 2), minval=-1, maxval=1)
    folded = jax.jit(jax.vmap(env_batch(step, fold_members=True)))(states, actions)
    for m in range(MEMBERS):
        member = jax.tree_util.tree_map(lambda x: x[m], states)
        alone = jax.jit(env_batch(step))(member, actions[m])
        got = jax.tree_util.tree_map(lambda x: x[m], folded)
        jax.tree_util.tree_map(lambda a, b: np.testing.assert_array_equal(np.asarray(a), np.asarray(b)), got, alone)
        jax.tree_util.tree_map(lambda a, b: (a.shape, a.dtype) == (b.shape, b.dtype) or pytest.fail(
            f"{a.shape} {a.dtype} vs {b.shape} {b.dtype}"), got, alone)


def test_the_fold_takes_a_member_invariant_argument_and_reset_keys():
    """An argument only some members batch (here the action, shared by all) is broadcast;
    a reset from keys folds like a step."""
    keys = jax.random.split(jax.random.PRNGKey(3), MEMBERS * ENVS).reshape(MEMBERS, ENVS, 2)
    folded_reset = jax.vmap(env_batch(reset, fold_members=True))(keys)
    assert folded_reset["contacts"]["frame"].shape == (MEMBERS, ENVS, 0, 3, 3)
    assert folded_reset["count"].shape == (MEMBERS, ENVS) and folded_reset["done"].dtype == jnp.bool_
    shared_action = jnp.full((ENVS, 2), 0.25)
    out = jax.vmap(env_batch(step, fold_members=True), in_axes=(0, None))(folded_reset, shared_action)
    for m in range(MEMBERS):
        alone = env_batch(step)(jax.tree_util.tree_map(lambda x: x[m], folded_reset), shared_action)
        np.testing.assert_array_equal(np.asarray(out["pos"][m]), np.asarray(alone["pos"]))
        np.testing.assert_array_equal(np.asarray(out["hits"][m]), np.asarray(alone["hits"]))


def test_merge_and_split_are_inverse_on_every_leaf_kind():
    for x in (jnp.zeros((3, 4, 0)), jnp.zeros((3, 4, 0, 2), jnp.int32), jnp.ones((3, 4), bool),
              jnp.arange(24).reshape(3, 4, 2)):
        merged = merge_member_axis(x)
        assert merged.shape == (12,) + x.shape[2:]
        back = split_member_axis(merged, 3)
        assert back.shape == x.shape and back.dtype == x.dtype
        np.testing.assert_array_equal(np.asarray(back), np.asarray(x))


def test_a_leaf_without_an_env_axis_is_named_in_the_error():
    with pytest.raises(ValueError, match=r"shape \(3,\) has no env axis"):
        merge_member_axis(jnp.zeros((3,)))
