"""Small environments for the recorder tests, one per step convention (no Safety-Gymnasium needed).

LineEnv: episode k of an env lasts ``lengths[k % len(lengths)]`` steps and then terminates,
unless ``max_len`` comes first (then it is truncated). At step t (1-based) of an episode the
reward is ``action * t`` and the cost is 1 on odd t, 0 on even t. So an episode of length L
under a constant action a has return a * L (L + 1) / 2 and cost ceil(L / 2).
"""
from __future__ import annotations

import gymnasium
import numpy as np
from gymnasium.vector import VectorEnv


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

