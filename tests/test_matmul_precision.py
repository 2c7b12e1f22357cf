"""TrainConfig.matmul_precision: how the programs' float32 matrix products are computed.
"default" (XLA's choice) leaves the programs as they were; "highest" marks every product of
init, chunk and evaluation full float32; any other value is refused by name. A run recorded
before the field existed is the same run as one at the default.

Tiny circle runs (4 envs, T = 64), so each program compiles in seconds.
"""
import re

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from algos.config import ConfigFieldError, hyper_of, make_config
from algos.core import build_programs
from runs import checkpoint, runfolder


def config(precision="default", **values):
    base = dict(task="circle", algo="ppo_lag", bound=3.0, seed=1, total_steps=4 * 2048, num_envs=4,
                episode_length=64, eval_episodes=4)
    return make_config("cpu", dict(base, **values), ["chunk_updates=2", f"matmul_precision={precision}",
                                                     "env.contact_model=simple"])


def test_an_unknown_precision_is_refused_naming_the_field_and_value():
    with pytest.raises(ConfigFieldError, match=r"'matmul_precision' = 'bfloat16': must be one of") as err:
        config("bfloat16")
    assert err.value.field == "matmul_precision"


def _products(cfg):
    """The precision attribute of every dot_general in the lowered chunk and evaluation."""
    programs, h = build_programs(cfg), hyper_of(cfg)
    state = jax.eval_shape(programs.init, jnp.int32(0), h)
    texts = (jax.jit(programs.chunk).lower(state, h, jnp.int32(2)).as_text(),
             jax.jit(programs.evaluate).lower(state, jnp.int32(0), jnp.float32(0.0), h).as_text())
    return [re.search(r"precision = \[(\w+), (\w+)\]", line).groups()
            for text in texts for line in text.splitlines() if "stablehlo.dot_general" in line]


def test_highest_marks_every_matrix_product_and_default_leaves_them_to_xla():
    default, highest = _products(config()), _products(config("highest"))
    assert len(default) == len(highest) > 10  # the networks' forward and backward products
    assert set(default) == {("DEFAULT", "DEFAULT")}
    assert set(highest) == {("HIGHEST", "HIGHEST")}


def test_the_two_settings_compile_separate_programs():
    assert config().static_key(shared=True) != config("highest").static_key(shared=True)


@pytest.mark.slow
def test_on_the_cpu_highest_trains_exactly_what_default_trains():
    """XLA:CPU computes every float32 product in float32 whatever the precision says, so the
    setting changes results only where the device has a faster mode (TF32 tensor cores)."""
    outs = []
    for precision in ("default", "highest"):
        cfg = config(precision)
        programs, h = build_programs(cfg), hyper_of(cfg)
        state = jax.jit(programs.init)(jnp.int32(cfg.seed), h)
        outs.append([np.asarray(x) for x in jax.tree_util.tree_leaves(jax.jit(programs.chunk)(state, h, jnp.int32(2)))])
    for a, b in zip(*outs, strict=True):
        np.testing.assert_array_equal(a, b)


def test_a_run_recorded_before_the_field_existed_is_the_same_run():
    wanted = config().to_dict()
    recorded = {k: v for k, v in wanted.items() if k != "matmul_precision"}
    assert runfolder.config_difference(recorded, wanted) == []
    assert runfolder.config_difference(recorded, config("highest").to_dict()) == ["matmul_precision"]
    identity = checkpoint.identity_of(config())
    old_meta = {"config": {k: v for k, v in identity.items() if k != "matmul_precision"}}
    assert checkpoint._config_difference(old_meta, identity) == []
    assert checkpoint._config_difference(old_meta, checkpoint.identity_of(config("highest"))) == ["matmul_precision"]
