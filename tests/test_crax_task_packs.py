"""CRAX tasks beyond the paper's in batched packs (tests/batched_packs.py `tasks`): a velocity
task (hopper, whose episodes end when it falls) with the off-policy learner, and navigation at
level 2 with PPO-Lag (hopper with PPO-Lag: tests/test_crax_tasks_sweep.py, marked heavy).
Each member retrained in the other slot of its pack is bitwise the same; a learner logs every
iterate of a task whose episodes end early (algos.config.TrainConfig.iterate_capacity)."""
import json
import os
import subprocess
import sys

import pandas as pd
import pytest

pytest.importorskip("crax", reason="the crax extra (PyPI crax-bench) is not installed: pip install -e '.[crax]'")
pytestmark = [pytest.mark.crax, pytest.mark.slow]


@pytest.fixture(scope="module")
def packs(tmp_path_factory):
    out = tmp_path_factory.mktemp("task_packs")
    env = dict(os.environ, XLA_FLAGS="--xla_cpu_max_isa=AVX")
    script = os.path.join(os.path.dirname(__file__), "batched_packs.py")
    done = subprocess.run([sys.executable, script, str(out), "tasks"], env=env, capture_output=True, text=True,
                          timeout=2400)
    assert done.returncode == 0, done.stderr[-3000:]
    return out


def tables(folder):
    frames = [pd.read_parquet(folder / name) for name in ("episodes.parquet", "trace.parquet")]
    return [f.drop(columns="wall_time") if "wall_time" in f else f for f in frames]


@pytest.mark.parametrize("pack", ["hopper-sac_lag", "goal_l2-ppo_lag"])
def test_a_crax_task_member_is_bitwise_the_same_in_another_slot(packs, pack):
    for seed in (0, 1):
        full, perm = packs / pack / "full" / f"seed{seed}", packs / pack / "perm" / f"seed{seed}"
        for a, b in zip(tables(full), tables(perm)):
            pd.testing.assert_frame_equal(a, b, check_exact=True)
        meta = json.loads((full / "run.json").read_text())
        assert meta["pack_mode"] == "batched" and meta["complete"]


def test_a_level_two_run_carries_its_task_id(packs):
    folder = packs / "goal_l2-ppo_lag" / "full" / "seed0"
    episodes, _ = tables(folder)
    assert set(episodes.task) == {"safe_goal_point@l2"}
    assert json.loads((folder / "run.json").read_text())["config"]["level"] == 2


def test_every_iterate_of_a_task_whose_episodes_end_early_is_logged(packs):
    folder = packs / "hopper-sac_lag" / "full" / "seed0"
    episodes, trace = tables(folder)
    train = episodes[episodes.phase == "train"]
    meta = json.loads((folder / "run.json").read_text())
    T, n_envs = meta["config"]["episode_length"], meta["config"]["num_envs"]
    # the walker falls: episodes shorter than T, so more iterates than T-step episodes could give
    assert (train.length < T).any() and len(trace) > meta["env_steps"] // (T * n_envs)
    # one episode per env in every logged iterate, and the trace has a row for each
    assert len(train) == n_envs * len(trace) and sorted(set(train.iteration)) == list(trace.iteration)
