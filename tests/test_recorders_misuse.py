"""Misuse of the recorders is an error at the first wrong call (or a warning where the use may be
meant): one test per misuse, each showing the message a user gets."""
import re
import threading

import gymnasium
import numpy as np
import pytest

from recorders import EpisodeWriter, RecorderError, RecorderWarning
from recorders.gym import RecordEpisodes, RecordVectorEpisodes, evaluate_final
from tests.recorder_envs import RUN, LineEnv, recorded, table, writer


def run_episodes(env, episodes, action=1.0):
    for _ in range(episodes):
        env.reset()
        while True:
            result = env.step(action)
            if result[-3] or result[-2]:
                break


# ---- wrappers that change episode ends or actions, outside the recorder -----------------------
def test_a_time_limit_outside_the_recorder_is_an_error_at_the_first_reset(tmp_path):
    env = gymnasium.wrappers.TimeLimit(RecordEpisodes(LineEnv([10]), writer(tmp_path)), max_episode_steps=5)
    with pytest.raises(RecorderError) as err:
        env.reset()
    message = str(err.value)
    print(message)
    assert message.startswith("TimeLimit wraps the recorder and ends episodes (a time limit) outside it: "
                              "TimeLimit(RecordEpisodes(env, writer))")
    assert "goes inside: RecordEpisodes(TimeLimit(env, ...), writer)" in message
    # the right order records the truncated episodes: 1+2+3+4+5 = 15, cost 3
    inside = RecordEpisodes(gymnasium.wrappers.TimeLimit(LineEnv([10], convention="gym"), max_episode_steps=5),
                            writer(tmp_path / "ok"))
    run_episodes(inside, 2)
    assert recorded(tmp_path / "ok").equals(table([("train", j, 0, 15.0, 3.0, 5) for j in range(2)]))


def test_an_action_wrapper_outside_the_recorder_is_an_error(tmp_path):
    env = gymnasium.wrappers.ClipAction(RecordEpisodes(LineEnv([3]), writer(tmp_path)))
    with pytest.raises(RecorderError, match=re.escape("ClipAction wraps the recorder and changes the actions outside it")):
        env.reset()
    # wrappers that only change what the agent sees may sit outside
    seen = gymnasium.wrappers.TransformReward(RecordEpisodes(LineEnv([3], convention="gym"), writer(tmp_path / "ok")),
                                              lambda r: 10 * r)
    run_episodes(seen, 1)
    assert recorded(tmp_path / "ok").equals(table([("train", 0, 0, 6.0, 2.0, 3)]))  # the env's own reward


def test_a_wrapper_stepping_without_going_through_reset_is_caught_at_the_first_step(tmp_path):
    rec = RecordEpisodes(LineEnv([3]), writer(tmp_path))
    rec.reset()  # reset called on the recorder itself, then stepped through a TimeLimit put around it later
    env = gymnasium.wrappers.TimeLimit(rec, max_episode_steps=2)
    with pytest.raises(RecorderError, match="TimeLimit wraps the recorder"):
        env.step(1.0)


def test_episodes_cut_off_by_reset_again_and_again_are_warned_about(tmp_path):
    class CutsEpisodes(gymnasium.Wrapper):  # ends episodes after 2 steps, as an unknown outer wrapper might
        def __init__(self, env):
            super().__init__(env)
            self.steps = 0

        def step(self, action):
            obs, reward, cost, terminated, truncated, info = self.env.step(action)
            self.steps += 1
            return obs, reward, cost, terminated, truncated or self.steps % 2 == 0, info

    env = CutsEpisodes(RecordEpisodes(LineEnv([10]), writer(tmp_path)))
    with pytest.warns(RecorderWarning) as caught:
        run_episodes(env, 4)
    message = str(next(w.message for w in caught if w.category is RecorderWarning))
    print(message)
    assert "3 episodes in a row were cut off by reset() before they terminated or were truncated, so none of them " \
           "was recorded (the last after 2 steps)" in message
    assert "put it inside: RecordEpisodes(TimeLimit(env, ...), writer)" in message


def test_vector_resets_that_keep_cutting_episodes_are_warned_about(tmp_path):
    env = RecordVectorEpisodes(gymnasium.vector.SyncVectorEnv([lambda: LineEnv([10], convention="gym")] * 2),
                               writer(tmp_path))
    with pytest.warns(RecorderWarning, match=r"3 resets in a row cut episodes off .* \(2 of 2 envs this time\)"):
        for _ in range(3):
            env.reset()
            env.step(np.ones(2))
            env.step(np.ones(2))
        env.reset()


# ---- a recorder under evaluate_final's wrapper stack -------------------------------------------
def test_evaluate_final_refuses_a_stack_with_a_recorder_inside(tmp_path):
    w = writer(tmp_path)
    env = gymnasium.wrappers.ClipAction(RecordEpisodes(gymnasium.wrappers.TimeLimit(LineEnv([3], convention="gym"), 10),
                                                       w))
    with pytest.raises(RecorderError) as err:
        evaluate_final(env, lambda obs, explore, rng: 1.0, w, episodes=2)
    message = str(err.value)
    print(message)
    assert message.startswith("evaluate_final: pass the environment without its recorder (the wrapper stack "
                              "ClipAction > RecordEpisodes > TimeLimit > LineEnv holds a RecordEpisodes)")
    assert w.files() == [] and not w.final_written


def test_a_recorder_hidden_behind_an_adapter_refuses_to_be_stepped_by_evaluate_final(tmp_path):
    w = writer(tmp_path)

    class Adapter:  # a framework's own env class around a recorded env (not a gymnasium.Wrapper)
        def __init__(self, inner):
            self._inner = inner

        def reset(self, **kw):
            return self._inner.reset(**kw)

        def step(self, action):
            return self._inner.step(action)

    with pytest.raises(RecorderError, match="RecordEpisodes was stepped by evaluate_final: the env given to "
                                            "evaluate_final has the recorder inside it"):
        evaluate_final(Adapter(RecordEpisodes(LineEnv([3]), w)), lambda obs, explore, rng: 1.0, w, episodes=2)
    assert w.files() == [] and not w.final_written


# ---- training after the final evaluation ------------------------------------------------------------
def test_training_after_the_final_evaluation_is_an_error_at_the_first_step(tmp_path):
    w = writer(tmp_path)
    env = RecordEpisodes(LineEnv([3]), w)
    run_episodes(env, 2)
    evaluate_final(env.env, lambda obs, explore, rng: 1.0, w, episodes=2)
    env.reset()
    with pytest.raises(RecorderError) as err:
        env.step(1.0)  # the first step, not the end of the next iterate
    message = str(err.value)
    print(message)
    assert message == (f"{w.folder}: the final evaluation of this run is recorded; a training step after it would "
                       f"start episodes recorded after the run's end. Train before evaluate_final, or record further "
                       f"training in another folder (another run)")
    vec = RecordVectorEpisodes(gymnasium.vector.SyncVectorEnv([lambda: LineEnv(convention="gym")] * 2), w)
    vec.reset()
    with pytest.raises(RecorderError, match="the final evaluation of this run is recorded"):
        vec.step(np.ones(2))


# ---- one folder, one writer ------------------------------------------------------------------------
def test_a_second_writer_on_a_folder_is_refused_naming_the_folder_and_the_holder(tmp_path):
    first = writer(tmp_path)
    with pytest.raises(RecorderError) as err:
        EpisodeWriter(tmp_path, **{**RUN, "seed": 4})
    message = str(err.value)
    print(message)
    assert message.startswith(f"{tmp_path}: another EpisodeWriter has this folder open (held by this process since ")
    assert "writing task='line', bound=1.5, algo='scripted', seed=3); two writers on one folder would overwrite " \
           "each other's files" in message and f"(lock: {tmp_path}/writer.lock)" in message
    first.append_iterates([[1.0]], [[0.0]], [[1]])
    first.close()  # lets the folder go: a resume may take it
    assert writer(tmp_path, resume=True).iterations == 1


def test_the_lock_holds_across_processes(tmp_path):
    import subprocess
    import sys
    import textwrap

    w = writer(tmp_path)
    code = textwrap.dedent(f"""
        import sys
        sys.path.insert(0, {str(__import__('os').getcwd())!r})
        from recorders import EpisodeWriter, RecorderError
        try:
            EpisodeWriter({str(tmp_path)!r}, task="line", bound=1.5, algo="scripted", seed=3, resume=True)
        except RecorderError as err:
            print(err)
    """)
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120).stdout
    assert f"another EpisodeWriter has this folder open (held by pid {__import__('os').getpid()} on host " in out
    del w


def test_a_writer_that_closed_refuses_to_write_over_a_folder_another_writer_changed(tmp_path):
    w = writer(tmp_path)
    w.append_iterates([[1.0]], [[0.0]], [[1]])
    w.close()
    other = writer(tmp_path, resume=True)
    other.append_iterates([[2.0]], [[0.0]], [[1]])
    other.close()
    with pytest.raises(RecorderError, match="its episode files changed after this writer was closed"):
        w.append_iterates([[3.0]], [[0.0]], [[1]])


# ---- resume with another run's identity -------------------------------------------------------------
def test_resume_with_another_identity_names_the_differing_fields(tmp_path):
    w = writer(tmp_path)
    w.append_iterates([[1.0]], [[0.0]], [[1]])
    w.close()
    with pytest.raises(RecorderError) as err:
        EpisodeWriter(tmp_path, **{**RUN, "algo": "other", "seed": 4}, resume=True)
    message = str(err.value)
    print(message)
    assert message == (f"{tmp_path}: resume=True, but the folder holds another run: fields algo ('scripted' there, "
                       f"'other' here), seed (3 there, 4 here) differ; resuming would mix two runs' episodes. Resume "
                       f"with the run's own identity, or use another folder")
    with pytest.raises(RecorderError, match=r"field bound \(1.5 there, 2.0 here\) differs|field bound"):
        EpisodeWriter(tmp_path, **{**RUN, "bound": 2.0}, resume=True)


def test_one_writer_per_thread_is_still_one_writer_per_folder(tmp_path):
    errors = []

    def open_writer():
        try:
            writer(tmp_path)
        except RecorderError as err:
            errors.append(str(err))

    keep = writer(tmp_path)
    thread = threading.Thread(target=open_writer)
    thread.start()
    thread.join()
    assert len(errors) == 1 and "another EpisodeWriter has this folder open" in errors[0]
    del keep


@pytest.mark.skipif(not hasattr(gymnasium.vector, "VectorActionWrapper"), reason="Gymnasium >= 1.0's vector wrappers")
def test_a_vector_action_wrapper_outside_the_vector_recorder_is_an_error(tmp_path):
    from gymnasium.wrappers.vector import ClipAction

    vec = gymnasium.vector.SyncVectorEnv([lambda: LineEnv(convention="gym")] * 2)
    env = ClipAction(RecordVectorEpisodes(vec, writer(tmp_path)))
    with pytest.raises(RecorderError, match=r"ClipAction wraps the recorder and changes the actions outside it: "
                                            r"ClipAction\(RecordVectorEpisodes\(env, writer\)\)"):
        env.reset(seed=0)
