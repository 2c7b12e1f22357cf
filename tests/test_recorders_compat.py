"""The recorders under the Gymnasium these frameworks pin: totals checked exactly against a ledger.

.ci/compat.sh runs this file in a venv with gymnasium==0.28.1, pandas==2.0.3 and numpy<2 (the
pins of Safety-Gymnasium 1.0.0 and OmniSafe 0.5.0); the main suite runs it under Gymnasium 1.x.
Each sub-env is wrapped (inside the vector env, below the recorder) in a ledger that writes down
every step the env really takes; the expected table is made from the ledger alone by the
protocol's rule (an iterate: each env's first episode finished since the last iterate), so it
does not share code with the recorder. Rewards are random floats: sums are compared with ==.
"""
import os

import gymnasium
import numpy as np
import pandas as pd
import pytest

import metrics
from metrics.cli import main as metrics_main
from metrics.episodes import recorder_files
from recorders import EpisodeWriter
from recorders.gym import RecordEpisodes, RecordVectorEpisodes, detect_autoreset_mode, evaluate_final

GYMNASIUM_1 = hasattr(gymnasium.vector, "AutoresetMode")
N, STEPS, LIMIT = 4, 300, 12
RUN = dict(task="drift", bound=3.0, algo="ledger", seed=11)


class Drift(gymnasium.Env):
    """Random float rewards, cost 1 with probability 0.3, episodes ending at random (or by a TimeLimit)."""

    def __init__(self, safety_step=False):
        self.safety_step = safety_step  # Safety-Gymnasium's 6-tuple instead of info["cost"]
        self.limit = LIMIT if safety_step else None  # a TimeLimit reads only 5-tuples: a limit of its own
        self.observation_space = gymnasium.spaces.Box(-np.inf, np.inf, (1,), np.float64)
        self.action_space = gymnasium.spaces.Box(-1.0, 1.0, (1,), np.float64)

    def reset(self, *, seed=None, options=None):
        super().reset(seed=seed)
        self.t = 0
        return np.zeros(1), {}

    def step(self, action):
        reward = float(self.np_random.normal() + action[0])
        cost = float(self.np_random.random() < 0.3)
        terminated = bool(self.np_random.random() < 0.08)
        self.t += 1
        if self.safety_step:
            return np.array([reward]), reward, cost, terminated, not terminated and self.t >= self.limit, {}
        return np.array([reward]), reward, terminated, False, {"cost": cost}


class Ledger(gymnasium.Wrapper):
    """Writes down each step the env takes: (vector step, reward, cost, episode ended)."""

    def __init__(self, env, book, clock):
        super().__init__(env)
        self.book, self.clock = book, clock

    def step(self, action):
        out = self.env.step(action)
        reward, cost = (out[1], out[2]) if len(out) == 6 else (out[1], out[-1]["cost"])
        self.book.append((self.clock[0], float(reward), float(cost), bool(out[-3] or out[-2])))
        return out


def make_envs(books, clock, safety_step=False):
    def make(i):
        if safety_step:
            return lambda: Ledger(Drift(safety_step=True), books[i], clock)
        return lambda: Ledger(gymnasium.wrappers.TimeLimit(Drift(), LIMIT), books[i], clock)
    return [make(i) for i in range(N)]


def expected_from_ledgers(books) -> pd.DataFrame:
    """The protocol's iterates from the ledgers alone."""
    ends = []  # (vector step, env, return, cost, length) of every finished episode
    for i, book in enumerate(books):
        ret = cost = 0.0
        length = 0
        for step, r, c, ended in book:
            ret, cost, length = ret + r, cost + c, length + 1
            if ended:
                ends.append((step, i, ret, cost, length))
                ret = cost = 0.0
                length = 0
    rows, pending = [], {}
    for step in sorted({e[0] for e in ends}):
        for _, i, ret, cost, length in (e for e in ends if e[0] == step):
            pending.setdefault(i, (ret, cost, length))  # an env's first episode since the last iterate
        if len(pending) == N:
            j = len(rows) // N
            rows += [("train", j, i, *pending[i]) for i in range(N)]
            pending = {}
    return pd.DataFrame(rows, columns=["phase", "iteration", "episode", "return", "cost", "length"])


def recorded_train(folder) -> pd.DataFrame:
    raw = pd.concat([pd.read_parquet(f) for f in recorder_files(folder)], ignore_index=True)
    # the engine reads the recorder's folder: every episode the recorder wrote, with its cost
    read = metrics.read_episodes(folder)
    assert len(read) == len(raw) > 0
    keys = ["phase", "iteration", "episode"]
    np.testing.assert_array_equal(read.sort_values(keys)["cost"].to_numpy(np.float64),
                                  raw.sort_values(keys)["cost"].to_numpy(np.float64))
    train = raw[raw.phase == "train"].sort_values(["iteration", "episode"])
    return train[["phase", "iteration", "episode", "return", "cost", "length"]].reset_index(drop=True)


def run_vector(folder, vector_env_kwargs=None, safety_step=False, vector_cls=None, **record_kwargs):
    books, clock = [[] for _ in range(N)], [0]
    cls = vector_cls or gymnasium.vector.SyncVectorEnv
    env = cls(make_envs(books, clock, safety_step), **(vector_env_kwargs or {}))
    writer = EpisodeWriter(folder, **RUN)
    rec = RecordVectorEpisodes(env, writer, **record_kwargs)
    rec.reset(seed=5)
    rng = np.random.default_rng(0)
    for t in range(STEPS):
        clock[0] = t
        rec.step(rng.uniform(-1, 1, (N, 1)))
    rec.close()
    return writer, books


def check_exact(folder, books):
    expected = expected_from_ledgers(books)
    got = recorded_train(folder)
    assert len(expected) >= 5 * N  # several iterates, with episodes dropped while waiting
    assert sum(len(b) for b in books) == N * STEPS or GYMNASIUM_1  # same-step: every vector step is an env step
    pd.testing.assert_frame_equal(got, expected, check_exact=True, check_dtype=False)


# ---- Gymnasium < 1.0 (the CI compat venv) ---------------------------------------------------------
needs_gymnasium_0 = pytest.mark.skipif(GYMNASIUM_1, reason="Gymnasium < 1.0 only (.ci/compat.sh runs it)")


@needs_gymnasium_0
def test_gymnasium_0_sync_vector_env_recorded_exactly(tmp_path):
    assert not hasattr(gymnasium.vector, "AutoresetMode")  # what made `import recorders.gym` fail before
    writer, books = run_vector(tmp_path / "run")  # no autoreset_mode: Gymnasium < 1.0 resets in the same step
    check_exact(tmp_path / "run", books)
    assert detect_autoreset_mode(gymnasium.vector.SyncVectorEnv(make_envs([[]] * N, [0]))) == "same_step"


@needs_gymnasium_0
def test_gymnasium_0_safety_gymnasium_style_vector_env(tmp_path):
    class SafetySyncVectorEnv(gymnasium.vector.SyncVectorEnv):
        """What Safety-Gymnasium 1.0.0's vector env does on Gymnasium 0.28: costs as a 6th value."""

        def step_wait(self):
            observations, infos, costs = [], {}, np.zeros(self.num_envs)
            for i, (env, action) in enumerate(zip(self.envs, self._actions)):
                obs, self._rewards[i], costs[i], self._terminateds[i], self._truncateds[i], info = env.step(action)
                if self._terminateds[i] or self._truncateds[i]:
                    info = {"final_observation": obs, "final_info": info}
                    obs, _ = env.reset()
                observations.append(obs)
                infos = self._add_info(infos, info, i)
            return (np.stack(observations), np.copy(self._rewards), costs, np.copy(self._terminateds),
                    np.copy(self._truncateds), infos)

    writer, books = run_vector(tmp_path / "run", safety_step=True, vector_cls=SafetySyncVectorEnv)
    check_exact(tmp_path / "run", books)


@needs_gymnasium_0
def test_gymnasium_0_single_env_final_evaluation_and_engine(tmp_path):
    writer = EpisodeWriter(tmp_path / "run", **RUN, trainer_step=0)
    book, clock = [], [0]
    env = RecordEpisodes(Ledger(gymnasium.wrappers.TimeLimit(Drift(), LIMIT), book, clock), writer)
    for epoch in range(6):
        writer.trainer_step = epoch * 100
        env.reset(seed=epoch)
        while not any(env.step(np.array([0.5]))[2:4]):
            pass
    evaluate_final(gymnasium.wrappers.TimeLimit(Drift(), LIMIT),
                   lambda obs, explore, rng: np.array([rng.uniform(-1, 1) if explore else 0.0]), writer, episodes=5)
    frame = pd.concat([pd.read_parquet(f) for f in writer.files()], ignore_index=True)
    train = frame[frame.phase == "train"]
    ret, cost, length, episodes = [], [], [], [[]]
    for _, r, c, ended in book:
        episodes[-1].append((r, c))
        if ended:
            episodes.append([])
    for steps in episodes[:-1]:
        ret.append(sum(r for r, _ in steps))
        cost.append(sum(c for _, c in steps))
        length.append(len(steps))
    assert list(train["return"]) == ret and list(train["cost"]) == cost and list(train["length"]) == length
    assert list(train["trainer_step"]) == [0, 100, 200, 300, 400, 500]
    out = tmp_path / "out"
    assert metrics_main(["evaluate", str(tmp_path / "run"), "--out", str(out), "--reps", "20"]) == 0
    assert os.path.exists(out / "tiers.csv")


# ---- Gymnasium >= 1.0 (the main suite) -----------------------------------------------------------
needs_gymnasium_1 = pytest.mark.skipif(not GYMNASIUM_1, reason="Gymnasium >= 1.0 only (autoreset modes)")


@needs_gymnasium_1
@pytest.mark.parametrize("mode", ["NextStep", "SameStep"])
def test_gymnasium_1_sync_vector_env_recorded_exactly(tmp_path, mode):
    writer, books = run_vector(tmp_path / "run", {"autoreset_mode": mode})
    check_exact(tmp_path / "run", books)
