"""Every CRAX safe task and level in the sweep: task ids, per-task bounds, CRAX's registry read at
run time, refusals with the valid choices, a mixed grid's aggregation by hand.

The tests marked crax import CRAX (the crax extra) but compile nothing (sizes come from
jax.eval_shape; PPO-Saute's humanoid program is traced, not compiled); the sweep that trains is tests/test_crax_tasks_sweep.py."""
from __future__ import annotations

import json

import numpy as np
import pandas as pd
import pytest

from metrics import aggregate, summarise
from runs.run_layout import config_run_id, parse_task_id, task_id
from test_metrics_episodes import episodes, write
from workflow import config_validation as cv
from workflow.products.style import task_label

needs_crax = pytest.mark.crax


# ---- task ids ---------------------------------------------------------------------------------

def test_a_task_id_is_the_name_at_level_one_and_marks_higher_levels():
    assert task_id("goal", 1) == "goal"
    assert task_id("safe_goal_point", 2) == "safe_goal_point@l2"
    for name, level in (("goal", 1), ("safe_velocity_hopper", 3), ("x", 12)):
        assert parse_task_id(task_id(name, level)) == (name, level)
    for bad in ("goal@l1", "goal@l0", "Goal", "goal@2", "goal@l"):
        with pytest.raises(ValueError, match="is not a task id"):
            parse_task_id(bad)
    with pytest.raises(ValueError, match="level must be an int >= 1"):
        task_id("goal", 0)


def test_labels_and_run_ids_keep_the_level():
    from algos.config import make_config

    config = make_config("cpu", dict(task="safe_goal_point", level=2, bound=0.8, algo="ppo_lag", seed=1,
                                     backend="crax"))
    assert config_run_id(config) == "safe_goal_point@l2/d0.8/ppo_lag/seed1"
    assert task_label("safe_goal_point@l2") == "Goal L2"
    assert task_label("goal") == "Goal" and task_label("safe_velocity_hopper") == "Velocity hopper"


# ---- per-task bounds -------------------------------------------------------------------------

def grid(bounds, tasks=("goal", "circle", "push")):
    return {"tasks": list(tasks), "bounds": bounds}


def test_bounds_by_task_pattern_and_default():
    bounds = {"push": [1], "p*": [2], "default": [3, 4]}
    assert cv.task_bounds(grid(bounds)) == {"goal": [3, 4], "circle": [3, 4], "push": [1]}
    assert cv.task_bounds(grid({"p*": [5], "pu*": [6], "default": [7]})) == {
        "goal": [7], "circle": [7], "push": [6]}  # the longest matching pattern wins
    assert cv.task_bounds(grid([15, 25])) == {t: [15, 25] for t in ("goal", "circle", "push")}


def test_bounds_that_miss_a_task_or_match_none_are_refused():
    with pytest.raises(cv.ConfigError, match="no bounds for task 'circle'.*'default'"):
        cv.task_bounds(grid({"goal": [1], "push": [2]}))
    with pytest.raises(cv.ConfigError, match="'bounds.safe_velocity_\\*': matches none of the tasks"):
        cv.task_bounds(grid({"safe_velocity_*": [1], "default": [2]}))


def test_a_preset_with_bounds_per_task_plans_each_tasks_own_runs():
    cfg = cv.resolve({"preset": "tiny", "tasks": ["circle", "goal"], "bounds": {"goal": [6.25], "default": [15, 25]}})
    assert cfg["task_bounds"] == {"circle": [15, 25], "goal": [6.25]}
    assert cfg["bounds"] == [6.25, 15, 25]
    assert sorted(r for r in cfg["specs"] if r.endswith("seed0")) == [
        "circle/d15/ppo/seed0", "circle/d15/ppo_lag/seed0", "circle/d25/ppo/seed0", "circle/d25/ppo_lag/seed0",
        "goal/d6.25/ppo/seed0", "goal/d6.25/ppo_lag/seed0"]
    with pytest.raises(cv.ConfigError, match=r"config key 'bounds.goal\[0\]': 1e\+300 has no folder label"):
        cv.resolve({"preset": "tiny", "bounds": {"goal": [1e300], "default": [15]}})
    with pytest.raises(cv.ConfigError, match=r"config key 'bounds.goal\[0\]': -1 must be > 0"):
        cv.resolve({"preset": "tiny", "bounds": {"goal": [-1], "default": [15]}})


def test_builtin_tasks_refuse_unknown_names_and_levels_with_the_choices():
    with pytest.raises(cv.ConfigError, match="'circel' is not a built-in task; closest: circle"):
        cv.resolve({"preset": "tiny", "tasks": ["circel"]})
    with pytest.raises(cv.ConfigError, match="tasks\\[0\\].*level 1 only.*backend: crax"):
        cv.resolve({"preset": "tiny", "tasks": ["circle@l2"]})


# ---- a mixed grid aggregates as the paper says ------------------------------------------------

def test_a_grid_of_tasks_with_different_bounds_aggregates_over_d_normalised_strata(tmp_path):
    """IQM over (task, bound) strata of seed means of d-normalised metrics, worked by hand:
    each run has two episodes, costs given as multiples of its bound d."""
    runs = {  # (task, d): (seed 0's costs, seed 1's costs) / d
        ("safe_velocity_hopper", 1.6): ((1, 2), (0.5, 0.5)),   # Dnorm 0.5, -0.5 -> 0;   V 0.5, 0 -> 0.25
        ("safe_velocity_hopper", 3.2): ((2, 2), (1, 1)),       # Dnorm 1, 0 -> 0.5;      V 1, 0 -> 0.5
        ("safe_goal_point@l2", 0.8): ((0, 0), (1, 1)),         # Dnorm -1, 0 -> -0.5;    V 0, 0 -> 0
        ("goal", 25.0): ((4, 4), (2, 2)),                      # Dnorm 3, 1 -> 2;        V 1, 1 -> 1
    }
    parts = [episodes(np.asarray(costs) * d, bound=d, task=task, seed=s)
             for (task, d), by_seed in runs.items() for s, costs in enumerate(by_seed)]
    result = aggregate(summarise(write(pd.concat(parts, ignore_index=True), tmp_path / "mixed.parquet")),
                       reps=50, seed=0)
    iqm = result.iqm[result.iqm.phase == "train"].set_index("metric")
    # four strata: the IQM is the mean of the middle two seed means
    assert iqm.loc["Dnorm", "iqm"] == pytest.approx((0 + 0.5) / 2, abs=1e-12)   # of -0.5, 0, 0.5, 2
    assert iqm.loc["V", "iqm"] == pytest.approx((0.25 + 0.5) / 2, abs=1e-12)    # of 0, 0.25, 0.5, 1
    assert iqm.loc["Dnorm", "n_strata"] == 4 and iqm.loc["Dnorm", "n_runs"] == 8


# ---- CRAX's registry at run time --------------------------------------------------------------

@needs_crax
def test_crax_registry_lists_the_velocity_tasks_with_their_levels(tmp_path):
    pytest.importorskip("crax")
    from envs import crax_registry

    tasks = crax_registry.catalogue(str(tmp_path))  # a subprocess fills the empty cache
    assert (tmp_path / f"crax_tasks-{crax_registry.crax_version()}.json").is_file()
    velocity = sorted(t for t in tasks if t.startswith("safe_velocity_"))
    assert velocity == ["safe_velocity_ant", "safe_velocity_halfcheetah", "safe_velocity_hopper",
                        "safe_velocity_humanoid", "safe_velocity_swimmer", "safe_velocity_walker2d"]
    assert all(tasks[t] == [1, 2, 3] for t in velocity)
    assert tasks["safe_goal_point"] == [1, 2, 3] and tasks["safe_lift_humanoid"] == [1]
    assert "safe_velocity" not in tasks  # CRAX's factory, not a task


@needs_crax
def test_the_config_check_refuses_unknown_crax_names_and_levels_with_the_choices():
    pytest.importorskip("crax")
    base = {"preset": "velocity-tiny", "bounds": [1.0]}
    with pytest.raises(cv.ConfigError, match="unknown CRAX task 'safe_velocity_hoper'; closest: safe_velocity_hopper"):
        cv.resolve({**base, "tasks": ["safe_velocity_hoper"]})
    with pytest.raises(cv.ConfigError, match="'safe_velocity_hopper' has no level 4; its levels: 1, 2, 3"):
        cv.resolve({**base, "tasks": ["safe_velocity_hopper@l4"]})
    with pytest.raises(cv.ConfigError, match="'safe_lift_humanoid' has no level 2; its levels: 1$"):
        cv.resolve({**base, "tasks": ["safe_lift_humanoid@l2"]})


@needs_crax
def test_velocity_tiny_resolves_to_a_level_one_and_a_level_two_task():
    pytest.importorskip("crax")
    cfg = cv.resolve({"preset": "velocity-tiny"})
    assert cfg["task_bounds"] == {"safe_velocity_hopper": [6.4], "safe_goal_point@l2": [0.8]}
    specs = cfg["specs"]
    assert sorted(specs) == ["safe_goal_point@l2/d0.8/ppo_lag/seed0", "safe_goal_point@l2/d0.8/ppo_lag/seed1",
                             "safe_velocity_hopper/d6.4/ppo_lag/seed0", "safe_velocity_hopper/d6.4/ppo_lag/seed1"]
    config = specs["safe_goal_point@l2/d0.8/ppo_lag/seed0"]["config"]
    assert (config["task"], config["level"], config["backend"]) == ("safe_goal_point", 2, "crax")


@needs_crax
def test_envs_make_builds_any_crax_task_and_refuses_with_the_choices():
    pytest.importorskip("crax")
    import envs

    hopper = envs.make("safe_velocity_hopper", backend="crax", level=2, episode_length=64)
    assert (hopper.observation_size, hopper.action_size) == (11, 3)  # from the environment, not a table
    assert hopper.task.crax_env.env._velocity_threshold == pytest.approx(0.7402 * 0.75)  # level 2 applied
    goal = envs.make("goal", backend="crax", level=1)
    assert (goal.observation_size, goal.action_size) == (62, 2)
    with pytest.raises(ValueError, match="unknown CRAX task 'safe_velocity_hoppr'; closest: safe_velocity_hopper"):
        envs.make("safe_velocity_hoppr", backend="crax")
    with pytest.raises(ValueError, match="'safe_velocity_hopper' has no level 5; its levels: 1, 2, 3"):
        envs.make("safe_velocity_hopper", backend="crax", level=5)
    with pytest.raises(ValueError, match="unknown task 'safe_velocity_hopper'.*backend='crax'"):
        envs.make("safe_velocity_hopper")  # the built-in backend has the four point tasks only


# ---- algorithms with a size limit ------------------------------------------------------------

@needs_crax
@pytest.mark.slow
def test_ppo_shield_is_refused_at_config_time_on_a_task_larger_than_its_cost_model(tmp_path, monkeypatch):
    pytest.importorskip("crax")
    from envs import crax_registry

    monkeypatch.setenv("JAX_COMPILATION_CACHE_DIR", str(tmp_path))  # an empty cache: sizes measured
    base = {"preset": "velocity-tiny", "tasks": ["safe_velocity_hopper", "safe_velocity_humanoid"], "bounds": [1.6]}
    with pytest.raises(cv.ConfigError, match=r"config key 'algos\[1\]': ppo_shield cannot train task "
                                             r"'safe_velocity_humanoid': it takes at most 256 observation entries "
                                             r"and 8 action dimensions, the task has 244 and 17"):
        cv.resolve({**base, "algos": ["ppo_lag", "ppo_shield"]})
    cached = json.loads((tmp_path / f"crax_sizes-{crax_registry.crax_version()}.json").read_text())
    assert cached == {"safe_velocity_hopper": {"1": [11, 3]}, "safe_velocity_humanoid": {"1": [244, 17]}}

    def no_subprocess(*args, **kwargs):
        raise AssertionError(f"sizes measured again: {args}")

    monkeypatch.setattr(crax_registry.subprocess, "run", no_subprocess)  # from here on, the cache answers
    fits = cv.resolve({**base, "tasks": ["safe_velocity_hopper"], "algos": ["ppo_shield"]})
    assert sorted(fits["specs"]) == ["safe_velocity_hopper/d1.6/ppo_shield/seed0",
                                     "safe_velocity_hopper/d1.6/ppo_shield/seed1"]
    assert len(cv.resolve({**base, "algos": ["ppo_saute"]})["specs"]) == 4  # no limit: humanoid is planned


def test_the_builtin_tasks_fit_every_algorithms_size_limit():
    import envs
    from algos import registry

    limits = {name: a.max_sizes for name, a in registry.ALGORITHMS.items() if a.max_sizes is not None}
    assert limits == {"ppo_shield": (256, 8)}
    for task in envs.TASKS:
        env = envs.make(task)
        for max_obs, max_act in limits.values():
            assert env.observation_size <= max_obs and env.action_size <= max_act, task


@needs_crax
@pytest.mark.slow
def test_ppo_saute_builds_its_program_on_the_largest_velocity_task():
    """PPO-Saute appends one observation entry (the budget left), so it fits any task: its
    training program traces on humanoid (244 entries, 17 actions) with a 245-entry policy input."""
    pytest.importorskip("crax")
    import jax
    import jax.numpy as jnp

    from algos.config import hyper_of, make_config
    from algos.core import build_programs

    config = make_config("cpu", dict(task="safe_velocity_humanoid", backend="crax", algo="ppo_saute", num_envs=2,
                                     episode_length=8, total_steps=64), ["batch_size=2", "num_minibatches=1",
                                                                          "chunk_updates=1"])
    programs, h = build_programs(config), hyper_of(config)
    state = jax.eval_shape(programs.init, jnp.int32(0), h)
    assert state.normalizer.mean.shape == (245,)
    after, *_ = jax.eval_shape(programs.chunk, state, h, jnp.int32(1))
    assert after.normalizer.mean.shape == (245,) and after.transform_state.budget.shape == (2,)


@needs_crax
def test_swimmer_steps_under_this_jax():
    """crax-bench 0.1.0's fluid drag (swimmer only) calls jnp.clip(x, a_min=...), a keyword JAX
    0.10 removed; envs.crax_adapter.patch_fluid_clip gives that module a clip that takes it."""
    pytest.importorskip("crax")
    import jax
    import jax.numpy as jnp

    import envs

    swimmer = envs.make("safe_velocity_swimmer", backend="crax", episode_length=16)
    state = jax.eval_shape(swimmer.reset, jax.ShapeDtypeStruct((2,), jnp.uint32))
    after = jax.eval_shape(swimmer.step, state, jax.ShapeDtypeStruct((swimmer.action_size,), jnp.float32))
    assert after.obs.shape == (8,) and after.reward.shape == () and after.cost.shape == ()


def test_a_level_two_runs_folder_checks_and_tables_use_its_task_id(tmp_path):
    """The episode rows of a level-2 run name its task id; run.json's config names the task and
    the level. The folder's identity check and Table A.1 compare and list the task id."""
    from fake_runs import complete_run
    from runs import runfolder
    from workflow.products.setup_tables import read_run_configs, table_a1

    config = {"task": "safe_goal_point", "level": 2, "bound": 0.8, "algo": "ppo_lag", "seed": 0}
    run = complete_run(tmp_path / "l2", task="safe_goal_point@l2", bound=0.8, algo="ppo_lag", config=config)
    assert runfolder.incomplete_reason(run, verify=True) is None
    assert read_run_configs([run / "run.json"]).task.tolist() == ["safe_goal_point@l2"]
    hopper = complete_run(tmp_path / "hopper", task="safe_velocity_hopper", bound=6.4, algo="ppo_lag",
                          config={**config, "task": "safe_velocity_hopper", "level": 1, "bound": 6.4})
    both = read_run_configs([run / "run.json", hopper / "run.json"])
    assert table_a1(both).columns == [("", "PPO-Lag")]  # a level is no hyperparameter: one column for both levels
    other = complete_run(tmp_path / "l1", task="safe_goal_point@l2", bound=0.8, algo="ppo_lag", config={**config, "level": 1})
    assert runfolder.incomplete_reason(other) == ("episodes.parquet holds rows of another run "
                                                  "(task 'safe_goal_point@l2', not 'safe_goal_point')")
