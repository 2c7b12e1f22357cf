"""Small environments for the recorder tests, one per step convention (no Safety-Gymnasium needed).

Also the helpers that read a recorded folder back as a small table to compare with a hand-made one.

LineEnv: episode k of an env lasts ``lengths[k % len(lengths)]`` steps and then terminates,
unless ``max_len`` comes first (then it is truncated). At step t (1-based) of an episode the
reward is ``action * t`` and the cost is 1 on odd t, 0 on even t. So an episode of length L
under a constant action a has return a * L (L + 1) / 2 and cost ceil(L / 2).
"""
from __future__ import annotations

import glob
import os

import gymnasium
import numpy as np
import pandas as pd
from gymnasium.vector import VectorEnv

from recorders import EpisodeWriter


class LineEnv(gymnasium.Env):
    metadata = {"render_modes": []}

    def __init__(self, lengths=(3,), max_len=100, convention="safety"):
        assert convention in ("safety", "gym")
        self.lengths, self.max_len, self.convention = tuple(lengths), max_len, convention
        self.observation_space = gymnasium.spaces.Box(-np.inf, np.inf, (2,), np.float64)
        self.action_space = gymnasium.spaces.Box(-10.0, 10.0, (), np.float64)
        self.episode, self.t, self.layout = -1, 0, 0.0

    def reset(self, *, seed=None, options=None):
        super().reset(seed=seed)
        self.episode += 1
        self.t = 0
        self.layout = float(self.np_random.uniform())  # what a reset seed decides: the "layout"
        return np.array([self.layout, 0.0]), {}

    def step(self, action):
        self.t += 1
        reward, cost = float(action) * self.t, float(self.t % 2)
        terminated = self.t >= self.lengths[self.episode % len(self.lengths)]
        truncated = not terminated and self.t >= self.max_len
        obs = np.array([self.layout, float(self.t)])
        if self.convention == "safety":
            return obs, reward, cost, terminated, truncated, {}
        return obs, reward, terminated, truncated, {"cost": cost}


class SafetyVectorEnv(VectorEnv):
    """N LineEnvs behind Safety-Gymnasium's vector step (6-tuple), resetting in the same step.

    Like Safety-Gymnasium's own vector envs (built on Gymnasium < 1.0), its metadata does not
    say which autoreset mode it uses.
    """

    def __init__(self, schedules, max_len=100):
        self.envs = [LineEnv(s, max_len, "safety") for s in schedules]
        self.num_envs = len(self.envs)
        self.metadata = {}
        self.closed, self.viewer = False, None  # Gymnasium < 1.0's VectorEnv.close reads them
        self.single_observation_space = self.envs[0].observation_space
        self.single_action_space = self.envs[0].action_space
        self.observation_space = gymnasium.vector.utils.batch_space(self.single_observation_space, self.num_envs)
        self.action_space = gymnasium.vector.utils.batch_space(self.single_action_space, self.num_envs)

    def reset(self, *, seed=None, options=None):
        obs = [env.reset(seed=None if seed is None else seed + i)[0] for i, env in enumerate(self.envs)]
        return np.stack(obs), {}

    def step(self, actions):
        out = [env.step(a) for env, a in zip(self.envs, actions)]
        obs, reward, cost, terminated, truncated = (np.array([o[i] for o in out]) for i in range(5))
        for i, env in enumerate(self.envs):
            if terminated[i] or truncated[i]:
                obs[i] = env.reset()[0]
        return obs, reward, cost, terminated, truncated, {}


# ---- recorded tables -----------------------------------------------------------------------
RUN = dict(task="line", bound=1.5, algo="scripted", seed=3)
COLUMNS = ["phase", "iteration", "episode", "return", "cost", "length"]


def writer(folder, **kwargs):
    return EpisodeWriter(folder, **RUN, **kwargs)


def recorded(folder) -> pd.DataFrame:
    files = sorted(glob.glob(os.path.join(folder, "*.parquet")))
    frame = pd.concat([pd.read_parquet(f) for f in files], ignore_index=True)
    assert (frame.task == "line").all() and (frame.bound == 1.5).all() and (frame.algo == "scripted").all()
    assert (frame.seed == 3).all()
    return frame.sort_values(["phase", "iteration", "episode"], kind="stable")[COLUMNS].reset_index(drop=True)


def table(rows) -> pd.DataFrame:
    frame = pd.DataFrame(rows, columns=COLUMNS)
    return frame.astype({"iteration": "int64", "episode": "int64", "return": "float64", "cost": "float64",
                         "length": "int64"})


def same_step_expected():
    """The table of the vector scenario of tests/test_recorders.py in same-step autoreset mode."""
    # episodes end at env 0: 2 (L2), 3 (L1), 6 (L3), 8 (L2), 9 (L1), 12 (L3), 14 (L2); env 1: 4, 8, 12.
    # iterate 0 at 4: L2; iterate 1 at 8: L3 (L2 at 8 is dropped); iterate 2 at 12: L1 (L3 at 12 dropped)
    return table([
        ("train", 0, 0, 3.0, 1.0, 2), ("train", 0, 1, 20.0, 2.0, 4),
        ("train", 1, 0, 6.0, 2.0, 3), ("train", 1, 1, 20.0, 2.0, 4),
        ("train", 2, 0, 1.0, 1.0, 1), ("train", 2, 1, 20.0, 2.0, 4),
    ])
