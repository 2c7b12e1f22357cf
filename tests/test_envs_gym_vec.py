"""envs.make_vec: a task as a Gymnasium 1.x vector env (envs/gym_vec.py), recorded by the
project's Gymnasium recorder and read by `saferl-eval evaluate`.

The module shares one vector env of `goal` (one compiled reset and step); the CRAX test builds
its own (slow: CRAX's reset and step compile for about 45 s each on a 2-core CPU).
"""
import subprocess
import sys
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

gymnasium = pytest.importorskip("gymnasium")
if not hasattr(gymnasium.vector, "AutoresetMode"):
    pytest.skip("envs.make_vec needs Gymnasium >= 1.0", allow_module_level=True)

import envs  # noqa: E402
from metrics.cli import main as metrics_main  # noqa: E402
from recorders import EpisodeWriter  # noqa: E402
from recorders.gym import RecordVectorEpisodes, detect_autoreset_mode  # noqa: E402

N, T, STEPS = 4, 100, 1000
RUN = dict(task="goal", bound=25.0, algo="random", seed=0)


@pytest.fixture(scope="module")
def vec():
    return envs.make_vec("goal", N, episode_length=T)


def recorded(folder) -> pd.DataFrame:
    """The training episodes a recorder wrote into `folder`, in (iteration, episode) order."""
    frame = pd.concat([pd.read_parquet(f) for f in sorted(folder.glob("train-*.parquet"))], ignore_index=True)
    return frame.sort_values(["iteration", "episode"], ignore_index=True)


def random_rollout(env, seed, steps=STEPS):
    """Per step: the step's outputs and info, under uniform random actions from `seed`."""
    rng = np.random.default_rng(seed)
    first, _ = env.reset(seed=seed)
    return first, [env.step(rng.uniform(-1.0, 1.0, (N, 2)).astype(np.float32)) for _ in range(steps)]


def test_import_envs_loads_neither_jax_nor_gymnasium():
    code = "import sys, envs; assert callable(envs.make); print(sorted({'jax', 'gymnasium'} & set(sys.modules)))"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True,
                         cwd=Path(__file__).resolve().parent.parent)
    assert out.stdout.strip() == "[]"


def test_spaces_and_declared_autoreset_mode(vec):
    assert isinstance(vec, gymnasium.vector.VectorEnv) and vec.num_envs == N
    assert vec.metadata["autoreset_mode"] == gymnasium.vector.AutoresetMode.SAME_STEP
    assert detect_autoreset_mode(vec) == "same_step"  # what the recorder reads
    assert vec.single_observation_space == gymnasium.spaces.Box(-np.inf, np.inf, (62,), np.float32)
    assert vec.single_action_space == gymnasium.spaces.Box(-1.0, 1.0, (2,), np.float32)
    assert vec.observation_space.shape == (N, 62) and vec.action_space.shape == (N, 2)


def test_random_steps_end_episodes_same_step_and_are_recorded_into_saferl_eval(vec, tmp_path):
    # reset() without a seed right after reset(seed=0) starts each env from the key its first
    # auto-reset uses: the obs the step that ends episode 1 returns
    vec.reset(seed=0)
    second_episode_first_obs, _ = vec.reset()
    writer = EpisodeWriter(tmp_path / "run", **RUN)
    recorder = RecordVectorEpisodes(vec, writer)
    first, steps = random_rollout(recorder, seed=0)
    recorder.close()

    obs, reward, terminated, truncated = (np.stack(col) for col in list(zip(*steps))[:4])
    cost = np.stack([info["cost"] for *_, info in steps])
    assert obs.shape == (STEPS, N, 62) and obs.dtype == np.float32 and reward.shape == cost.shape == (STEPS, N)
    assert np.isfinite(obs).all() and np.isfinite(reward).all() and (cost >= 0).all() and cost.any()
    # episodes of T steps, all envs ending together: truncated on steps T, 2T, ...; goal never terminates
    ends = np.arange(1, STEPS + 1) % T == 0
    assert not terminated.any() and (truncated == ends[:, None]).all()
    for t, (o, _, _, _, step_info) in enumerate(steps):
        if ends[t]:  # SAME_STEP: the new episode's first obs now, the ended one's last in final_obs
            assert step_info["_final_obs"].all() and step_info["_final_info"].all()
            assert step_info["final_info"]["cost"].tolist() == step_info["cost"].tolist()
            final_obs = step_info["final_obs"]
            assert final_obs.shape == (N, 62) and final_obs.dtype == np.float32
            assert not (final_obs == o).all(axis=1).any()
        else:
            assert "final_obs" not in step_info and "final_info" not in step_info
    assert np.array_equal(obs[T - 1], second_episode_first_obs)
    assert not np.array_equal(first, second_episode_first_obs)

    table = recorded(tmp_path / "run")
    # every step of every env is in exactly one recorded episode of length T
    assert len(table) == N * STEPS // T and (table.length == T).all()
    per_episode = lambda x: x.reshape(STEPS // T, T, N).astype(np.float64).sum(axis=1).ravel()  # noqa: E731
    np.testing.assert_allclose(table["return"], per_episode(reward), rtol=1e-9)
    np.testing.assert_allclose(table["cost"], per_episode(cost), rtol=1e-9, atol=1e-12)

    assert metrics_main(["evaluate", str(tmp_path / "run"), "--out", str(tmp_path / "out"), "--reps", "50"]) == 0
    runs = pd.read_parquet(tmp_path / "out" / "run_metrics.parquet").set_index("phase")
    iterate_costs = per_episode(cost).reshape(STEPS // T, N)
    assert runs.loc["train", "n_iterates"] == STEPS // T
    assert runs.loc["train", "V"] == pytest.approx((iterate_costs > RUN["bound"]).mean(axis=1).mean())


def test_reset_seed_reproduces_trajectories(vec):
    first_a, steps_a = random_rollout(vec, seed=3, steps=T + 20)
    first_b, steps_b = random_rollout(vec, seed=3, steps=T + 20)
    first_c, _ = random_rollout(vec, seed=4, steps=0)
    assert np.array_equal(first_a, first_b) and not np.array_equal(first_a, first_c)
    for a, b in zip(steps_a, steps_b):
        for x, y in zip(a[:4], b[:4]):
            assert np.array_equal(x, y)
        assert np.array_equal(a[4]["cost"], b[4]["cost"])
    assert len({o.tobytes() for o in first_a}) == N  # each env its own layout


def test_steps_are_the_raw_jax_envs_steps_across_an_auto_reset(vec):
    import jax

    env = vec.jax_env
    state = jax.jit(jax.vmap(env.reset))(jax.random.split(jax.random.PRNGKey(7), N))
    step = jax.jit(jax.vmap(env.step))
    first, steps = random_rollout(vec, seed=7, steps=T + 2)
    assert np.array_equal(first, state.obs)
    rng = np.random.default_rng(7)
    for obs, reward, terminated, truncated, info in steps:
        state = step(state, rng.uniform(-1.0, 1.0, (N, 2)).astype(np.float32))
        for got, want in ((obs, state.obs), (reward, state.reward), (info["cost"], state.cost),
                          (truncated, state.truncated), (terminated, state.done & ~state.truncated)):
            assert np.array_equal(got, want)
        if truncated.any():
            assert np.array_equal(info["final_obs"], state.terminal_obs)


def test_gymnasium_array_conversion_wrappers_take_it(vec):
    pytest.importorskip("array_api_compat", reason="Gymnasium's array conversion needs gymnasium[array-api]")
    from gymnasium.wrappers.vector import JaxToNumpy

    wrapped = JaxToNumpy(vec)
    _, plain = random_rollout(vec, seed=2, steps=T + 1)
    _, converted = random_rollout(wrapped, seed=2, steps=T + 1)
    for a, b in zip(plain, converted):
        assert all(isinstance(x, np.ndarray) and np.array_equal(x, y) for x, y in zip(a[:4], b[:4]))
    assert np.array_equal(converted[T - 1][4]["final_obs"], plain[T - 1][4]["final_obs"])


def test_bad_use_is_refused_with_a_clear_error(vec):
    with pytest.raises(gymnasium.error.ResetNeeded, match="reset"):
        envs.make_vec("goal", 2).step(np.zeros((2, 2)))
    for bad in (0, -1, 2.0, True):
        with pytest.raises(ValueError, match=f"num_envs must be a positive int, got {bad!r}"):
            envs.make_vec("goal", bad)
    with pytest.raises(ValueError, match="unknown task 'nope'"):
        envs.make_vec("nope", 2)
    vec.reset(seed=0)
    with pytest.raises(ValueError, match=r"actions must have shape \(4, 2\) .*got \(2,\)"):
        vec.step(np.zeros(2))
    with pytest.raises(ValueError, match="reset takes no options"):
        vec.reset(options={"reset_mask": np.ones(N, bool)})
    with pytest.raises(ValueError, match="non-negative int or None, got -1"):
        vec.reset(seed=-1)


@pytest.mark.slow
@pytest.mark.crax
def test_crax_task_steps_1000_random_steps_same_step(tmp_path):
    pytest.importorskip("crax", reason="the crax extra (PyPI crax-bench) is not installed: pip install -e '.[crax]'")
    n, length = 2, 300
    vec = envs.make_vec("goal", n, backend="crax", episode_length=length)
    assert vec.jax_env.backend == "crax" and vec.metadata["autoreset_mode"] == gymnasium.vector.AutoresetMode.SAME_STEP
    vec.reset(seed=1)
    expected_second_first, _ = vec.reset()
    recorder = RecordVectorEpisodes(vec, EpisodeWriter(tmp_path / "run", **RUN))
    rng = np.random.default_rng(1)
    recorder.reset(seed=1)
    truncated_at, costs = [], []
    for t in range(1, STEPS + 1):
        obs, reward, terminated, truncated, info = recorder.step(rng.uniform(-1.0, 1.0, (n, 2)))
        assert obs.shape == (n, 62) and np.isfinite(obs).all() and np.isfinite(reward).all() and not terminated.any()
        costs.append(info["cost"])
        if truncated.any():
            truncated_at.append(t)
            assert truncated.all() and info["_final_obs"].all() and info["final_obs"].shape == (n, 62)
            if t == length:
                assert np.array_equal(obs, expected_second_first)
        else:
            assert "final_obs" not in info
    recorder.close()
    assert truncated_at == [300, 600, 900]
    table = recorded(tmp_path / "run")
    assert (table.length == length).all() and len(table) == 3 * n
    expected_cost = np.stack(costs)[:900].reshape(3, length, n).astype(np.float64).sum(axis=1).ravel()
    np.testing.assert_allclose(table["cost"], expected_cost, rtol=1e-9, atol=1e-12)
    # any CRAX task by CRAX's name and level: the spaces are the environment's own (built, not stepped)
    hopper = envs.make_vec("safe_velocity_hopper", 3, backend="crax", level=2)
    assert hopper.action_space.shape == (3, 3) and hopper.observation_space.shape == (3, 11)


@pytest.mark.slow
def test_throughput_benchmark_prints_each_method_and_the_ratios(capsys):
    from benchmarks import gym_vec_throughput

    gym_vec_throughput.main(["--num-envs", "2", "--steps", "4", "--repeats", "1", "--option", "episode_length=3"])
    lines = capsys.readouterr().out.splitlines()
    assert lines[0].startswith("goal (builtin), 4 steps, best of 1") and lines[1].split() == [
        "num_envs", "per", "raw", "scan", "raw", "loop", "gym", "vec", "vec/scan", "vec/loop"]
    rows = [line.split() for line in lines[2:]]
    assert [row[:2] for row in rows] == [["2", "wall"], ["2", "CPU-s"]]
    for row in rows:
        scan, loop, vec = (float(x.replace(",", "")) for x in row[2:5])
        assert min(scan, loop, vec) > 0
        assert float(row[5]) == pytest.approx(vec / scan, rel=0.02, abs=0.006)
        assert float(row[6]) == pytest.approx(vec / loop, rel=0.02, abs=0.006)
