"""Shared programs (algos.programs): the simple-form algorithms are a runtime index of one
sequential program per task. Each algorithm computes in it what its own program computes, a
mixed pack gives every member exactly the episodes it gives alone, PPO's cost critic never
moves, and the program compiles once for all of them.

Tiny circle runs (4 envs, T = 64), so each program compiles in seconds.
"""
import os

import jax
import jax.numpy as jnp
import numpy as np
import pandas as pd
import pytest

from algos import registry
from algos.config import hyper_of, make_config
from algos.core import build_programs
from algos.learning import make_env
from algos.trace_schema import LOSS_METRICS
from runs import train
from runs.pack import Member

pytestmark = pytest.mark.slow
SIMPLE = ("ppo", "ppo_lag", "p3o", "focops")
KW = dict(task="circle", total_steps=8 * 2048, num_envs=4, episode_length=64, eval_episodes=4)


def config(algo, bound=15.0, seed=0):
    return make_config("cpu", dict(KW, algo=algo, bound=bound, seed=seed), ["chunk_updates=4"])


def test_the_simple_form_algorithms_share_one_sequential_program_and_no_other_does():
    keys = {config(a).static_key(shared=True) for a in SIMPLE}
    assert len(keys) == 1 and next(iter(keys)).algo == "+".join(registry.program_algos("ppo"))
    assert [config(a).algo_index for a in SIMPLE] == [registry.program_algos(a).index(a) for a in SIMPLE]
    assert len({config(a).static_key() for a in SIMPLE}) == 4  # batched programs keep the algorithm static
    for general in ("ppo_pid", "ppo_saute", "cpo", "ppo_shield"):
        assert config(general).static_key(shared=True).algo == general and config(general).algo_index == 0
    assert config("ppo").static_key(shared=True) == config("p3o", bound=50.0, seed=3).static_key(shared=True)


@pytest.mark.parametrize("algo", SIMPLE)
def test_each_algorithm_computes_in_the_shared_program_what_its_own_program_computes(algo):
    """Two updates (PPO-Lag's first equals PPO's: lambda starts at 0). The two programs fuse the
    losses differently, so P3O's and FOCOPS's parameters may differ in the last bits (measured:
    3e-8 after one update; PPO's and PPO-Lag's are bitwise equal); the gap grows chaotically with
    further updates, as any rounding difference does."""
    cfg = config(algo, bound=3.0)
    env, h = make_env(cfg), hyper_of(cfg)
    shared, own = build_programs(cfg, env), build_programs(cfg, env, shared=False)
    runs = []
    for programs in (shared, own):
        state = jax.jit(programs.init)(jnp.int32(0), h)
        first = state.params
        state, _, summary = jax.jit(programs.chunk)(state, h, jnp.int32(2))
        runs.append((first, state, summary))
    (first, state, summary), (_, own_state, own_summary) = runs
    for name in own_state.params:  # the policy, the critic and (constrained) the cost critic
        for a, b in zip(jax.tree_util.tree_leaves(state.params[name]), jax.tree_util.tree_leaves(own_state.params[name])):
            np.testing.assert_allclose(a, b, rtol=1e-5, atol=1e-6)
    # the multiplier follows this algorithm's rule (PPO-Lag's lambda, P3O's kappa, FOCOPS's nu; PPO none)
    np.testing.assert_allclose(summary.multiplier[:2], own_summary.multiplier[:2], rtol=1e-5, atol=1e-7)
    np.testing.assert_allclose(summary.mean_step_cost[:2], own_summary.mean_step_cost[:2], rtol=1e-5, atol=1e-7)
    if algo == "ppo":  # a cost critic in the state only; the switch skips it, so it stays as initialised
        assert "cost_value" not in own_state.params
        for a, b in zip(jax.tree_util.tree_leaves(state.params["cost_value"]), jax.tree_util.tree_leaves(first["cost_value"])):
            np.testing.assert_array_equal(a, b)
        assert np.isnan(np.asarray(state.last_metrics)[LOSS_METRICS.index("cost_value_loss")])  # none trained
    else:
        assert np.isfinite(np.asarray(state.last_metrics)).all()


def table(member, name):
    frame = pd.read_parquet(os.path.join(member.out, name))
    return frame.drop(columns="wall_time") if "wall_time" in frame else frame


def test_a_pack_of_four_algorithms_gives_each_run_its_episodes_alone(tmp_path):
    runs = [(a, 15.0 if i % 2 else 3.0, i) for i, a in enumerate(SIMPLE)]
    alone = [[Member(config(a, b, s), str(tmp_path / f"alone-{a}"), "cpu")] for a, b, s in runs]
    for member in alone:
        assert train.run_pack(member, quiet=True) == 0
    pack = [Member(config(a, b, s), str(tmp_path / f"pack-{a}"), "cpu") for a, b, s in runs]
    assert train.run_pack(pack, quiet=True) == 0
    for (a,), p in zip(alone, pack):
        for name in ("episodes.parquet", "trace.parquet"):
            pd.testing.assert_frame_equal(table(a, name), table(p, name), check_exact=True)
    assert table(pack[0], "trace.parquet")["multiplier"].isna().all()  # PPO traces no multiplier
    assert table(pack[1], "trace.parquet")["multiplier"].notna().all()


def test_one_compile_serves_every_simple_algorithm():
    from algos.programs import compile_programs

    env = make_env(config("ppo"))
    first = compile_programs(config("ppo", seed=5), env)
    assert all(compile_programs(config(a, seed=5), env).compile_s == 0.0 for a in SIMPLE[1:])
    assert first.template.params.keys() >= {"policy", "value", "cost_value"}
