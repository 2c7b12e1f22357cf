"""A task as a Gymnasium (>= 1.0) vector env: N envs stepped as one jitted call (`envs.make_vec`).

    vec = envs.make_vec("goal", num_envs=16)                     # any envs.make arguments
    obs, info = vec.reset(seed=0)
    obs, reward, terminated, truncated, info = vec.step(vec.action_space.sample())  # info["cost"]

Autoreset: SAME_STEP, because `Env.step` (envs/base.py) starts the next episode inside the step
that ends one: the obs returned for an env whose episode ended is the new episode's first;
reward, info["cost"], terminated and truncated are those of the ending step; the ended
episode's last obs is row i of info["final_obs"] and its step's info in info["final_info"],
where the masks info["_final_obs"] / info["_final_info"] are true. `final_obs` is one
(num_envs, obs size) array, not Gymnasium's object array of rows (indexing a row reads the
same), so that the array-conversion wrappers (JaxToTorch, JaxToNumpy, NumpyToTorch) can
convert it through DLPack.

Seeding: `reset(seed=s)` gives env i the key `split(PRNGKey(s), num_envs)[i]`, so the same seed
and the same actions give the same trajectories; `reset()` without a seed starts each env from
its own next-reset key (what its auto-reset would use), the first time from a fresh OS seed.

Arrays come back as numpy (the whole step output is fetched from the device at once); actions
are anything numpy converts (torch on the CPU, JAX arrays), shape (num_envs, action size), in
[-1, 1]. `gymnasium.wrappers.vector.JaxToTorch(vec, device=...)` gives and takes
torch tensors (`pip install "gymnasium[torch]"`).
"""
from __future__ import annotations

import gymnasium
import jax
import numpy as np

import envs

if not hasattr(gymnasium.vector, "AutoresetMode"):
    raise ImportError(f"envs.make_vec needs Gymnasium >= 1.0 (its vector API and autoreset modes); found "
                      f"gymnasium {gymnasium.__version__}: pip install 'gymnasium>=1.0'")


class JaxVectorEnv(gymnasium.vector.VectorEnv):
    """`num_envs` copies of one `envs.Env` behind Gymnasium's VectorEnv API (module doc)."""

    metadata = {"autoreset_mode": gymnasium.vector.AutoresetMode.SAME_STEP, "render_modes": []}

    def __init__(self, jax_env, num_envs: int):
        if isinstance(num_envs, bool) or not isinstance(num_envs, int) or num_envs < 1:
            raise ValueError(f"envs.make_vec: num_envs must be a positive int, got {num_envs!r}")
        self.jax_env, self.num_envs = jax_env, num_envs
        box = gymnasium.spaces.Box
        self.single_observation_space = box(-np.inf, np.inf, (jax_env.observation_size,), np.float32)
        self.single_action_space = box(-1.0, 1.0, (jax_env.action_size,), np.float32)
        self.observation_space = gymnasium.vector.utils.batch_space(self.single_observation_space, num_envs)
        self.action_space = gymnasium.vector.utils.batch_space(self.single_action_space, num_envs)
        self._reset = jax.jit(jax.vmap(jax_env.reset))
        self._step = jax.jit(self._step_outputs)
        self._states = None

    def _step_outputs(self, states, actions):
        states = jax.vmap(self.jax_env.step)(states, actions)
        terminated = states.done & ~states.truncated
        return states, (states.obs, states.reward, states.cost, terminated, states.truncated, states.terminal_obs)

    def reset(self, *, seed=None, options=None):
        if options:
            raise ValueError(f"envs.make_vec: reset takes no options (got {sorted(options)}); envs reset "
                             f"themselves in the step that ends their episode (autoreset mode SAME_STEP)")
        if seed is not None:
            if isinstance(seed, bool) or not isinstance(seed, (int, np.integer)) or seed < 0:
                raise ValueError(f"envs.make_vec: reset seed must be a non-negative int or None, got {seed!r}")
            keys = jax.random.split(jax.random.PRNGKey(int(seed)), self.num_envs)
        elif self._states is None:
            keys = jax.random.split(jax.random.PRNGKey(int(np.random.SeedSequence().generate_state(1)[0])),
                                    self.num_envs)
        else:
            keys = self._states.key  # each env's next-reset key, as its auto-reset would use it
        super().reset(seed=None if seed is None else int(seed))  # seeds self.np_random as Gymnasium does
        self._states = self._reset(keys)
        return np.asarray(self._states.obs), {}

    def step(self, actions):
        if self._states is None:
            raise gymnasium.error.ResetNeeded("envs.make_vec: call reset() before step()")
        actions = np.asarray(actions, np.float32)
        if actions.shape != self.action_space.shape:
            raise ValueError(f"envs.make_vec: actions must have shape {self.action_space.shape} "
                             f"(num_envs, action size), got {actions.shape}")
        self._states, outputs = self._step(self._states, actions)
        obs, reward, cost, terminated, truncated, final_obs = jax.device_get(outputs)
        info = {"cost": cost}
        ended = terminated | truncated
        if ended.any():  # rows where the mask is false are not final (they are the current obs)
            info.update(final_obs=final_obs, _final_obs=ended, final_info={"cost": cost, "_cost": ended},
                        _final_info=ended)
        return obs, reward, terminated, truncated, info


def make_vec(task: str, num_envs: int, backend: str = "builtin", level: int = 1, **options) -> JaxVectorEnv:
    """A Gymnasium vector env of `num_envs` envs of `envs.make(task, backend, level, **options)`."""
    return JaxVectorEnv(envs.make(task, backend=backend, level=level, **options), num_envs)
