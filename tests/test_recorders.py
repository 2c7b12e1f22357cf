"""Gymnasium-style recorders and the shard writer: scripted policies through each step
convention, tables checked against hand-computed ones (tests/recorder_envs.py: at step t of an
episode the reward is action * t and the cost is 1 on odd t), crash safety, bad input."""
import glob
import os
import subprocess
import sys
import textwrap

import gymnasium
import numpy as np
import pandas as pd
import pytest

import metrics
from metrics.cli import main as metrics_main
from recorders import EpisodeWriter, RecorderError
from recorders.gym import RecordEpisodes, RecordVectorEpisodes, evaluate_final
from tests.recorder_envs import (COLUMNS, RUN, LineEnv, SafetyVectorEnv, recorded, same_step_expected, table,
                                  writer)

ROOT = os.path.join(os.path.dirname(__file__), "..")
# Gymnasium >= 1.0: vector envs with a chosen autoreset mode (tests/test_recorders_compat.py covers < 1.0)
needs_gymnasium_1 = pytest.mark.skipif(not hasattr(gymnasium.vector, "AutoresetMode"),
                                       reason="Gymnasium >= 1.0's autoreset modes")


# ---- single environment ---------------------------------------------------------------
@pytest.mark.parametrize("convention", ["safety", "gym"])
def test_single_env_groups_consecutive_episodes_into_iterates(tmp_path, convention):
    # lengths 3, 5 (cut to 4 by max_len: truncated), 2, 3, 5->4, 2; action 1
    env = RecordEpisodes(LineEnv([3, 5, 2], max_len=4, convention=convention), writer(tmp_path),
                         episodes_per_iterate=2)
    for _ in range(5):
        env.reset()
        while True:
            *_, terminated, truncated, _ = (lambda r: (r[0], r[1], r[-3], r[-2], r[-1]))(env.step(1.0))
            if terminated or truncated:
                break
    env.reset()
    env.step(1.0)  # the 6th episode is unfinished at close
    env.close()
    # ep0 L3: 1+2+3=6, cost 2; ep1 L4: 10, cost 2; ep2 L2: 3, cost 1; ep3 L3: 6, cost 2; ep4 (L4) has no partner
    assert recorded(tmp_path).equals(table([
        ("train", 0, 0, 6.0, 2.0, 3), ("train", 0, 1, 10.0, 2.0, 4),
        ("train", 1, 0, 3.0, 1.0, 2), ("train", 1, 1, 6.0, 2.0, 3),
    ]))


def test_single_env_final_evaluation_records_both_phases_from_the_same_layouts(tmp_path):
    w = writer(tmp_path)
    env = RecordEpisodes(LineEnv([2], convention="gym"), w)
    for _ in range(3):
        env.reset()
        while not any(env.step(0.5)[2:4]):
            pass
    layouts = {True: [], False: []}

    def policy(obs, explore, rng):  # greedy action 1; noise +-1 with a shared draw
        if obs[1] == 0:
            layouts[explore].append(obs[0])
        return 1.0 + (rng.choice([-1.0, 1.0]) if explore else 0.0)

    phases = evaluate_final(env.env, policy, w, episodes=4, seed=7)
    assert layouts[True] == layouts[False] and len(set(layouts[True])) == 4
    frame = recorded(tmp_path)
    greedy = frame[frame.phase == "final_greedy"]
    # greedy: action 1 for 2 steps -> 1 + 2 = 3, cost 1; iteration = last training iterate (2)
    assert greedy.equals(table([("final_greedy", 2, i, 3.0, 1.0, 2) for i in range(4)]).set_axis(greedy.index))
    explore = frame[frame.phase == "final_explore"]
    assert set(explore["return"]) <= {0.0, 2.0, 4.0, 6.0} and (explore.iteration == 2).all()
    np.testing.assert_array_equal(phases["final_explore"]["return"], explore["return"])
    # same seed -> same noise draws: a second evaluation gives the same episodes
    again = evaluate_final(env.env, policy, writer(tmp_path / "again"), episodes=4, seed=7)
    np.testing.assert_array_equal(again["final_explore"]["return"], explore["return"])
    assert list(frame[frame.phase == "train"]["return"]) == [1.5, 1.5, 1.5]


# ---- vector environments ---------------------------------------------------------------
# env 0 runs episodes of lengths 2, 1, 3, 2, 1, 3, ... under action 1; env 1 episodes of length
# 4 under action 2: values L2 -> (3, 1), L1 -> (1, 1), L3 -> (6, 2); env 1 L4 -> (20, 2).
def _run_vector(env, steps):
    env.reset(seed=0)
    for _ in range(steps):
        env.step(np.array([1.0, 2.0]))
    env.close()


@needs_gymnasium_1
def test_vector_env_next_step_autoreset(tmp_path):
    env = gymnasium.vector.SyncVectorEnv([lambda: LineEnv([2, 1, 3], convention="gym"),
                                          lambda: LineEnv([4], convention="gym")])
    assert env.metadata["autoreset_mode"] == gymnasium.vector.AutoresetMode.NEXT_STEP
    _run_vector(RecordVectorEpisodes(env, writer(tmp_path)), 14)
    # every env spends one step resetting after each episode; episodes end at
    # env 0: 2 (L2), 4 (L1), 8 (L3), 11 (L2), 13 (L1); env 1: 4, 9, 14.
    # iterate 0 at step 4: env 0's L2 (its L1 ending at step 4 too is dropped), env 1;
    # iterate 1 at step 9: env 0's L3; iterate 2 at 14: env 0's L2 (the L1 at 13 is dropped)
    assert recorded(tmp_path).equals(table([
        ("train", 0, 0, 3.0, 1.0, 2), ("train", 0, 1, 20.0, 2.0, 4),
        ("train", 1, 0, 6.0, 2.0, 3), ("train", 1, 1, 20.0, 2.0, 4),
        ("train", 2, 0, 3.0, 1.0, 2), ("train", 2, 1, 20.0, 2.0, 4),
    ]))


@needs_gymnasium_1
def test_vector_env_same_step_autoreset(tmp_path):
    env = gymnasium.vector.SyncVectorEnv([lambda: LineEnv([2, 1, 3], convention="gym"),
                                          lambda: LineEnv([4], convention="gym")], autoreset_mode="SameStep")
    _run_vector(RecordVectorEpisodes(env, writer(tmp_path)), 14)
    assert recorded(tmp_path).equals(same_step_expected())


def test_safety_gymnasium_vector_step(tmp_path):
    env = SafetyVectorEnv([[2, 1, 3], [4]])
    with pytest.raises(RecorderError, match="autoreset_mode"):
        RecordVectorEpisodes(env, writer(tmp_path / "x"))
    _run_vector(RecordVectorEpisodes(env, writer(tmp_path), autoreset_mode="same_step"), 14)
    assert recorded(tmp_path).equals(same_step_expected())


@needs_gymnasium_1
def test_vector_env_disabled_autoreset_with_partial_resets(tmp_path):
    env = gymnasium.vector.SyncVectorEnv([lambda: LineEnv([2], convention="gym"),
                                          lambda: LineEnv([3], convention="gym")], autoreset_mode="Disabled")
    rec = RecordVectorEpisodes(env, writer(tmp_path))
    rec.reset(seed=0)
    for _ in range(7):
        _, _, terminated, truncated, _ = rec.step(np.array([1.0, 1.0]))
        done = terminated | truncated
        if done.any():
            rec.reset(options={"reset_mask": done})
    rec.close()
    # env 0 ends at 2, 4, 6; env 1 at 3, 6: iterates at steps 3 and 6
    assert recorded(tmp_path).equals(table([
        ("train", 0, 0, 3.0, 1.0, 2), ("train", 0, 1, 6.0, 2.0, 3),
        ("train", 1, 0, 3.0, 1.0, 2), ("train", 1, 1, 6.0, 2.0, 3),
    ]))


# ---- the engine reads the shards --------------------------------------------------------
@needs_gymnasium_1
def test_recorded_shards_pass_metrics_evaluate(tmp_path):
    w = writer(tmp_path / "run", rows_per_file=4)
    env = gymnasium.vector.SyncVectorEnv([lambda: LineEnv([2, 1, 3], convention="gym"),
                                          lambda: LineEnv([4], convention="gym")], autoreset_mode="SameStep")
    _run_vector(RecordVectorEpisodes(env, w), 14)
    evaluate_final(LineEnv([2], convention="gym"), lambda obs, explore, rng: 1.0, w, episodes=3)
    files = w.files()
    # 2 episodes per iterate, 4 rows per file: iterates 0-1 closed as one file, iterate 2 its own
    assert [os.path.basename(f) for f in files] == ["train-000000-000001.parquet", "train-000002-000002.parquet",
                                                    "final.parquet"]
    assert metrics_main(["evaluate", *files, "--out", str(tmp_path / "out"), "--reps", "50"]) == 0
    runs = pd.read_parquet(tmp_path / "out" / "run_metrics.parquet").set_index("phase")
    # bound 1.5; train iterate costs (1, 2), (2, 2), (1, 2): V per iterate 0.5, 1, 0.5 -> mean 2/3
    assert runs.loc["train", "n_iterates"] == 3 and runs.loc["train", "V"] == pytest.approx(2 / 3)
    assert runs.loc["train", "C"] == pytest.approx((1.5 + 2 + 1.5) / 3)
    assert runs.loc["final_greedy", "R"] == 3.0 and runs.loc["final_greedy", "V"] == 0.0


# ---- crash safety ------------------------------------------------------------------------
CRASH_SCRIPT = textwrap.dedent("""
    import os, signal, sys
    import numpy as np
    import pyarrow.parquet as pq
    sys.path.insert(0, {root!r})
    import gymnasium
    from recorders import EpisodeWriter
    from recorders.gym import RecordVectorEpisodes
    from tests.recorder_envs import LineEnv
    mode = sys.argv[2]
    w = EpisodeWriter(sys.argv[1], task="line", bound=1.5, algo="scripted", seed=3, rows_per_file=100)
    env = RecordVectorEpisodes(gymnasium.vector.SyncVectorEnv(
        [lambda: LineEnv([2, 1, 3], convention="gym"), lambda: LineEnv([4], convention="gym")],
        autoreset_mode="SameStep"), w)
    env.reset(seed=0)
    for step in range(13):  # iterate 2 completes at step 12; step 13 is inside iterate 3
        if mode == "during-write" and step == 11:  # the flush of iterate 2 dies half-way through
            def half_write(table, path, **kw):
                with open(path, "wb") as f:
                    f.write(b"PAR1 half a file")
                os.kill(os.getpid(), signal.SIGKILL)
            pq.write_table = half_write
        env.step(np.array([1.0, 2.0]))
    os.kill(os.getpid(), signal.SIGKILL)
""")


@needs_gymnasium_1
@pytest.mark.parametrize("mode", ["mid-iterate", "during-write"])
def test_a_crash_loses_only_the_unfinished_iterate(tmp_path, mode):
    script = tmp_path / "crash.py"
    script.write_text(CRASH_SCRIPT.format(root=os.path.abspath(ROOT)))
    proc = subprocess.run([sys.executable, str(script), str(tmp_path / "run"), mode], capture_output=True, text=True)
    assert proc.returncode == -9, proc.stderr
    files = sorted(glob.glob(str(tmp_path / "run" / "*.parquet")))
    flushed = 2 if mode == "during-write" else 3  # iterate 2's flush never landed in during-write
    assert [os.path.basename(f) for f in files] == [f"train-{j:06d}-{j:06d}.parquet" for j in range(flushed)]
    expected = same_step_expected()
    expected = expected[expected.iteration < flushed]
    for given in (files, [tmp_path / "run"]):  # the engine reads what is on disk, as files or as the folder
        frame = metrics.read_episodes(given)
        assert frame[COLUMNS[:-1]].equals(expected[COLUMNS[:-1]])
    hidden = [n for n in os.listdir(tmp_path / "run") if n.startswith(".")]
    assert len(hidden) == (mode == "during-write")  # the dead temporary file, which *.parquet skips
    # the killed writer's lock died with it: the run resumes after the last flushed iterate
    assert writer(tmp_path / "run", resume=True).iterations == flushed


# ---- the writer -----------------------------------------------------------------------------
def test_writer_segments_resume_and_refuse_reuse(tmp_path):
    w = writer(tmp_path, rows_per_file=4)
    for j in range(5):
        w.append_iterates([[j, j + 0.5]], [[1.0, 2.0]], [[3, 4]])
    assert [os.path.basename(f) for f in w.files()] == ["train-000000-000001.parquet", "train-000002-000003.parquet",
                                                        "train-000004-000004.parquet"]
    w.close()
    with pytest.raises(RecorderError, match="already holds episode files"):
        writer(tmp_path)
    resumed = writer(tmp_path, resume=True)
    assert resumed.iterations == 5
    resumed.append_iterates([[9.0, 9.5]], [[1.0, 2.0]], [[3, 4]])
    resumed.write_final({"return": [1.0], "cost": [0.0], "length": [2]},
                        {"return": [2.0], "cost": [0.0], "length": [2]})
    frame = metrics.read_episodes(resumed.files())
    assert list(frame[frame.phase == "train"].groupby("iteration")["return"].first()) == [0, 1, 2, 3, 4, 9]
    assert (frame[frame.phase != "train"].iteration == 5).all()
    with pytest.raises(RecorderError, match="final evaluation is recorded"):
        resumed.append_iterates([[1.0]], [[1.0]], [[1]])
    with pytest.raises(RecorderError, match="nothing to resume"):
        writer(tmp_path, resume=True)


def test_flush_every_batches_iterates(tmp_path):
    w = writer(tmp_path, flush_every=3)
    w.append_iterates([[1.0], [2.0]], [[0.0], [0.0]], [[1], [1]])
    assert w.files() == []
    w.append_iterates([[3.0]], [[0.0]], [[1]])
    assert len(pd.read_parquet(w.files()[0])) == 3


# ---- bad input ----------------------------------------------------------------------------
@pytest.mark.parametrize("kwargs, match", [
    (dict(bound=0.0), "bound must be a finite number > 0"),
    (dict(bound=float("nan")), "bound must be a finite number > 0"),
    (dict(task=""), "task must be a non-empty string"),
    (dict(seed=1.5), "seed must be an integer"),
    (dict(algo=None), "algo must be a non-empty string"),
])
def test_writer_rejects_a_bad_run_identity(tmp_path, kwargs, match):
    with pytest.raises(RecorderError, match=match):
        EpisodeWriter(tmp_path, **{**RUN, **kwargs})


def test_writer_rejects_bad_blocks(tmp_path):
    w = writer(tmp_path)
    with pytest.raises(RecorderError, match=r"cost: non-finite value nan \(iterate 0 of this block, episode 1\)"):
        w.append_iterates([[1.0, 2.0]], [[1.0, np.nan]], [[1, 1]])
    with pytest.raises(RecorderError, match=r"length: expected shape \(1, 2\)"):
        w.append_iterates([[1.0, 2.0]], [[1.0, 1.0]], [[1]])
    with pytest.raises(RecorderError, match="final_greedy: missing field"):
        w.write_final({"return": [1.0], "cost": [0.0], "length": [2]}, {"return": [1.0]})
    assert w.files() == []


class NoCostEnv(LineEnv):
    def step(self, action):
        obs, reward, terminated, truncated, _ = super().step(action)
        return obs, reward, terminated, truncated, {}


def test_recorders_name_bad_steps(tmp_path):
    env = RecordEpisodes(NoCostEnv(convention="gym"), writer(tmp_path / "a"))
    with pytest.raises(RecorderError, match="step before reset|call reset"):
        env.step(1.0)
    env.reset()
    with pytest.raises(RecorderError, match=r"episode step 1: no cost.*info\['cost'\]|info has no 'cost'"):
        env.step(1.0)
    env = RecordEpisodes(LineEnv(convention="safety"), writer(tmp_path / "b"))
    env.reset()
    with pytest.raises(RecorderError, match="episode step 1: reward is inf"):
        env.step(np.inf)
    vec = RecordVectorEpisodes(gymnasium.vector.SyncVectorEnv([lambda: LineEnv(convention="gym")] * 2),
                               writer(tmp_path / "c"))
    vec.reset()
    with pytest.raises(RecorderError, match="vector step 1, env 1: reward is nan"):
        vec.step(np.array([1.0, np.nan]))
    with pytest.raises(RecorderError, match="unknown autoreset_mode 'sometimes'"):
        RecordVectorEpisodes(SafetyVectorEnv([[1]]), writer(tmp_path / "d"), autoreset_mode="sometimes")
    with pytest.raises(RecorderError, match="pass the environment without its recorder"):
        evaluate_final(env, lambda o, e, r: 1.0, writer(tmp_path / "e"), episodes=1)
    with pytest.raises(RecorderError, match="did not end within max_steps=5"):
        evaluate_final(LineEnv([10]), lambda o, e, r: 1.0, writer(tmp_path / "f"), episodes=1, max_steps=5)
