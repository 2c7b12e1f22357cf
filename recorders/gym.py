"""Recorders for Gymnasium-style environments, as wrappers (docs/byo.md).

Two step conventions are read, told apart by the length of what ``step`` returns:

- Safety-Gymnasium: ``(obs, reward, cost, terminated, truncated, info)``;
- Gymnasium: ``(obs, reward, terminated, truncated, info)`` with the step's cost in
  ``info["cost"]`` (another key: ``cost_key=``).

The wrappers return the inner environment's output unchanged; they only sum reward, cost and
steps per episode and hand finished episodes to an :class:`~recorders.writer.EpisodeWriter`.

Iterates follow the protocol: an iterate is one finished episode from every environment. With
N vector environments, each environment's FIRST episode finished since the last iterate is
kept; once all N have one, they form the next iterate (episode index = environment index).
Further episodes an environment finishes while others are still running are not recorded, as
the platform's own trainer does. A single environment forms an iterate from every
``episodes_per_iterate`` consecutive episodes (default 1).

Wrapper order: the recorder records the episodes of the env inside it, and that inner env
(``recorder.env``) is what ``evaluate_final`` should run. Wrappers that end episodes or change
actions (``TimeLimit``, ``ClipAction``, ``RescaleAction``, any ``ActionWrapper``) go inside;
outside go only wrappers that change what the agent sees (observation or reward normalisation,
frame stacks, episode statistics). A ``TimeLimit`` or an action wrapper found outside (on the
call stack of the first ``reset``/``step``) is an error; episodes that keep being cut off by
``reset()`` are warned about; a recorder stepped inside ``evaluate_final`` and a training step
after the final evaluation are errors.

Works with Gymnasium 0.28, 0.29 and 1.x (docs/byo.md, "Installing beside a framework").
"""
from __future__ import annotations

import math
import sys
import threading
import warnings

import gymnasium
import numpy as np
from gymnasium.vector import VectorEnv

from .engine import FINAL_PHASES
from .writer import EpisodeWriter, RecorderError, RecorderWarning

try:  # Gymnasium >= 1.0
    from gymnasium.vector import VectorWrapper
except ImportError:  # Gymnasium 0.26 - 0.29
    from gymnasium.vector import VectorEnvWrapper as VectorWrapper

DEFAULT_COST_KEY = "cost"
NEXT_STEP, SAME_STEP, DISABLED = "next_step", "same_step", "disabled"
AUTORESET_MODES = (NEXT_STEP, SAME_STEP, DISABLED)
# Gymnasium >= 1.0 says its vector envs' mode in metadata["autoreset_mode"]; before 1.0 there was
# one behaviour, same-step (the env resets inside the step that ends the episode).
GYMNASIUM_SAYS_AUTORESET_MODE = hasattr(gymnasium.vector, "AutoresetMode")
CUT_OFF_WARNING = 3  # warn when this many resets in a row cut episodes off before anything was recorded

# Wrappers that must not sit outside a recorder (docs/byo.md, "Wrapper order"): they change
# what an episode is, which the recorder would not see.
_ACTION_WRAPPERS = tuple(c for c in (gymnasium.ActionWrapper, getattr(gymnasium.vector, "VectorActionWrapper", None))
                         if c is not None)
_WRAPPERS = (gymnasium.Wrapper, VectorWrapper)
_evaluation = threading.local()  # .active: evaluate_final is running in this thread


def autoreset_mode_name(mode) -> str | None:
    """'next_step', 'same_step' or 'disabled' for Gymnasium's AutoresetMode, its value or our names."""
    value = str(getattr(mode, "value", mode)).lower().replace("_", "")
    return {"nextstep": NEXT_STEP, "samestep": SAME_STEP, "disabled": DISABLED}.get(value)


def detect_autoreset_mode(env) -> str | None:
    """The autoreset mode of a vector env, or None when it does not say and cannot be known."""
    metadata = getattr(env, "metadata", None) or {}
    if "autoreset_mode" in metadata:
        return autoreset_mode_name(metadata["autoreset_mode"])
    if not GYMNASIUM_SAYS_AUTORESET_MODE and isinstance(
            getattr(env, "unwrapped", env), (gymnasium.vector.SyncVectorEnv, gymnasium.vector.AsyncVectorEnv)):
        return SAME_STEP  # Gymnasium < 1.0's vector envs (Safety-Gymnasium's subclass them) reset in the same step
    return None


def _wrapper_order_error(recorder, outer) -> RecorderError | None:
    """The error for a wrapper outside ``recorder`` that changes episode ends or actions, if any."""
    for wrapper in outer:
        if isinstance(wrapper, gymnasium.wrappers.TimeLimit):
            what = "ends episodes (a time limit)"
        elif isinstance(wrapper, _ACTION_WRAPPERS):
            what = "changes the actions"
        else:
            continue
        name, rec = type(wrapper).__name__, type(recorder).__name__
        return RecorderError(
            f"{name} wraps the recorder and {what} outside it: {name}({rec}(env, writer)). The recorder records the "
            f"episodes of the env inside it (recorder.env, also what evaluate_final should run), so a wrapper that "
            f"ends episodes or changes actions goes inside: {rec}({name}(env, ...), writer). Outside the recorder "
            f"go only wrappers that change what the agent sees (observation or reward normalisation, frame "
            f"stacks, episode statistics)")
    return None


def outer_wrappers(recorder, depth: int = 1) -> list:
    """The Gymnasium wrappers around ``recorder`` that are calling it now, innermost first.

    Read from the call stack: a wrapper's ``step``/``reset`` calls ``self.env.step``/``reset``,
    so each caller frame whose ``self`` is a wrapper of the previous one is the next wrapper out.
    """
    frame, inner, found = sys._getframe(depth + 1), recorder, []
    while frame is not None:
        caller = frame.f_locals.get("self")
        if caller is not inner and isinstance(caller, _WRAPPERS) and getattr(caller, "env", None) is inner:
            found.append(caller)
            inner = caller
        frame = frame.f_back
    return found


def _check_not_evaluating(recorder) -> None:
    if getattr(_evaluation, "active", False):
        raise RecorderError(f"{type(recorder).__name__} was stepped by evaluate_final: the env given to "
                            f"evaluate_final has the recorder inside it (under other wrappers), so the evaluation "
                            f"would be recorded as training iterates. Pass evaluate_final the env without the "
                            f"recorder (the recorder's recorder.env, or a fresh env built the same way)")


def _check_not_final(recorder) -> None:
    if recorder.writer.final_written:
        raise RecorderError(f"{recorder.writer.folder}: the final evaluation of this run is recorded; a training step "
                            f"after it would start episodes recorded after the run's end. Train before "
                            f"evaluate_final, or record further training in another folder (another run)")


def _count_cut_off(recorder, what: str, fix: str) -> None:
    """One more reset in a row that cut an episode off; the CUT_OFF_WARNING-th is warned about
    (``what`` happened; ``fix``: the wrapper order that keeps the episodes)."""
    recorder._cut_offs += 1
    if recorder._cut_offs == CUT_OFF_WARNING:
        warnings.warn(RecorderWarning(f"{recorder.writer.folder}: {recorder._cut_offs} {what}. If a wrapper outside "
                                      f"the recorder ends episodes, put it inside: {fix}"), stacklevel=3)


def split_step(result, cost_key: str = DEFAULT_COST_KEY):
    """(obs, reward, cost, terminated, truncated, info) of either step convention.

    The cost is None when a Gymnasium-style step's info has no ``cost_key`` (a vector env's
    reset step has none); callers decide whether that is an error.
    """
    if not isinstance(result, tuple) or len(result) not in (5, 6):
        kind = f"a tuple of {len(result)}" if isinstance(result, tuple) else type(result).__name__
        raise RecorderError(f"env.step returned {kind}; expected (obs, reward, cost, terminated, truncated, info) "
                            f"or (obs, reward, terminated, truncated, info) with the cost in info[{cost_key!r}]")
    if len(result) == 6:
        return result
    obs, reward, terminated, truncated, info = result
    cost = info.get(cost_key) if isinstance(info, dict) else None
    return obs, reward, cost, terminated, truncated, info


def _scalar(name, value, where) -> float:
    try:
        number = float(np.asarray(value).item())
    except (TypeError, ValueError):
        raise RecorderError(f"{where}: {name} must be one number, got {value!r}") from None
    if not math.isfinite(number):
        raise RecorderError(f"{where}: {name} is {number!r}; rewards and costs must be finite")
    return number


def _missing_cost(cost_key, where):
    return RecorderError(f"{where}: no cost: the step returned 5 values and info has no {cost_key!r} key "
                         f"(Gymnasium convention: the step's cost in info[{cost_key!r}]; pass cost_key= for "
                         f"another key, or return (obs, reward, cost, terminated, truncated, info))")


class RecordEpisodes(gymnasium.Wrapper):
    """Record every episode of a single environment into ``writer``.

    ``episodes_per_iterate`` consecutive episodes form one iterate. An episode that is cut off
    by ``reset()`` before it terminated or was truncated is not recorded (it did not finish);
    when that keeps happening a :class:`~recorders.writer.RecorderWarning` says so. Wrappers
    that end episodes or change actions belong inside the recorder: one outside it
    (``TimeLimit``, an ``ActionWrapper``) is an error at the first call through it.
    """

    def __init__(self, env: gymnasium.Env, writer: EpisodeWriter, *, episodes_per_iterate: int = 1,
                 cost_key: str = DEFAULT_COST_KEY):
        super().__init__(env)
        if not isinstance(writer, EpisodeWriter):
            raise RecorderError(f"writer must be a recorders.EpisodeWriter, got {type(writer).__name__}")
        if not isinstance(episodes_per_iterate, int) or episodes_per_iterate < 1:
            raise RecorderError(f"episodes_per_iterate must be an integer >= 1, got {episodes_per_iterate!r}")
        self.writer, self.cost_key, self.episodes_per_iterate = writer, cost_key, episodes_per_iterate
        self._ret = self._cost = 0.0
        self._length = 0
        self._running = False
        self._checked_stack = {"reset": False, "step": False}
        self._cut_offs = 0  # resets in a row that cut an episode off, since the last finished episode
        self._done: list[tuple[float, float, int]] = []  # finished episodes of the iterate in progress

    def _check_callers(self, call: str) -> None:
        error = _wrapper_order_error(self, outer_wrappers(self, 2))
        self._checked_stack[call] = True
        if error is not None:
            raise error

    def reset(self, **kwargs):
        _check_not_evaluating(self)
        if not self._checked_stack["reset"]:
            self._check_callers("reset")
        if self._running and self._length > 0:  # the episode in progress did not finish: not recorded
            _count_cut_off(self, f"episodes in a row were cut off by reset() before they terminated or were "
                                 f"truncated, so none of them was recorded (the last after {self._length} steps)",
                           "RecordEpisodes(TimeLimit(env, ...), writer)")
        self._ret, self._cost, self._length, self._running = 0.0, 0.0, 0, True
        return self.env.reset(**kwargs)

    def step(self, action):
        if not self._running:
            _check_not_final(self)
            raise RecorderError("step() before reset() or after the episode ended: call reset() first "
                                "(the recorder counts an episode from reset to terminated/truncated)")
        if getattr(_evaluation, "active", False):
            _check_not_evaluating(self)
        if self.writer.final_written:
            _check_not_final(self)
        if not self._checked_stack["step"]:
            self._check_callers("step")
        result = self.env.step(action)
        _, reward, cost, terminated, truncated, _ = split_step(result, self.cost_key)
        where = f"episode step {self._length + 1}"
        if cost is None:
            raise _missing_cost(self.cost_key, where)
        self._ret += _scalar("reward", reward, where)
        self._cost += _scalar("cost", cost, where)
        self._length += 1
        if terminated or truncated:
            self._running, self._cut_offs = False, 0
            self._done.append((self._ret, self._cost, self._length))
            if len(self._done) == self.episodes_per_iterate:
                ret, cost, length = (np.asarray(col)[None] for col in zip(*self._done))
                self._done = []
                self.writer.append_iterates(ret, cost, length)
        return result

    def close(self):
        self.writer.close()
        return super().close()


class RecordVectorEpisodes(VectorWrapper):
    """Record the episodes of a Gymnasium vector environment into ``writer`` (iterates: module doc).

    The autoreset mode is read from ``env.metadata["autoreset_mode"]`` (Gymnasium >= 1.0 sets
    it) unless given: ``next_step`` (the step after an episode ends only resets that env; its
    reward is not part of any episode), ``same_step`` (the env resets inside the step that ends
    the episode, as Gymnasium < 1.0's vector envs do, Safety-Gymnasium's among them) or
    ``disabled`` (the caller resets finished envs with ``reset(options={"reset_mask": mask})``).
    Under Gymnasium < 1.0 its own ``SyncVectorEnv``/``AsyncVectorEnv`` and their subclasses are
    known to be same-step; any other vector env that does not say needs ``autoreset_mode=``.
    """

    def __init__(self, env: VectorEnv, writer: EpisodeWriter, *, cost_key: str = DEFAULT_COST_KEY,
                 autoreset_mode=None):
        super().__init__(env)
        if not isinstance(writer, EpisodeWriter):
            raise RecorderError(f"writer must be a recorders.EpisodeWriter, got {type(writer).__name__}")
        if autoreset_mode is None:
            self.autoreset_mode = detect_autoreset_mode(env)
            if self.autoreset_mode is None:
                said = (getattr(env, "metadata", None) or {}).get("autoreset_mode")
                raise RecorderError(
                    f"{type(env).__name__}: " + (f"unknown metadata['autoreset_mode'] {said!r}" if said is not None
                                                 else "its metadata has no 'autoreset_mode'")
                    + f"; pass autoreset_mode= ({', '.join(AUTORESET_MODES)}): how the env resets an env whose "
                      f"episode ended decides which steps belong to which episode")
        else:
            self.autoreset_mode = autoreset_mode_name(autoreset_mode)
            if self.autoreset_mode is None:
                raise RecorderError(f"unknown autoreset_mode {autoreset_mode!r}; expected "
                                    f"{', '.join(AUTORESET_MODES[:-1])} or {AUTORESET_MODES[-1]}")
        self.writer, self.cost_key = writer, cost_key
        # read once: Gymnasium < 1.0's VectorEnvWrapper forwards it through __getattr__ with a warning
        n = self._num_envs = env.num_envs
        self._ret, self._cost, self._length = np.zeros(n), np.zeros(n), np.zeros(n, np.int64)
        self._running = np.zeros(n, bool)  # env is inside an episode that began with a reset we saw
        self._resetting = np.zeros(n, bool)  # next_step mode: the coming step only resets the env
        self._pending = np.zeros(n, bool)  # env has its episode for the iterate in progress
        self._pending_ret, self._pending_cost = np.zeros(n), np.zeros(n)
        self._pending_length = np.zeros(n, np.int64)
        self._steps = 0
        self._checked_stack = {"reset": False, "step": False}
        self._cut_offs = 0  # resets in a row that cut episodes off, since the last recorded iterate

    def _check_callers(self, call: str) -> None:
        error = _wrapper_order_error(self, outer_wrappers(self, 2))
        self._checked_stack[call] = True
        if error is not None:
            raise error

    def reset(self, *, seed=None, options=None):
        _check_not_evaluating(self)
        if not self._checked_stack["reset"]:
            self._check_callers("reset")
        mask = None if not options else options.get("reset_mask")
        mask = np.ones(self._num_envs, bool) if mask is None else np.asarray(mask, bool)
        cut = mask & self._running & ~self._resetting & (self._length > 0)
        if cut.any():  # episodes cut off by the reset did not finish: their sums are dropped
            _count_cut_off(self, f"resets in a row cut episodes off before they terminated or were truncated "
                                 f"({int(cut.sum())} of {self._num_envs} envs this time), and no iterate was "
                                 f"recorded in between (cut-off episodes are not recorded)",
                           "the vector env of envs that each end their episodes, then RecordVectorEpisodes")
        self._ret[mask], self._cost[mask], self._length[mask] = 0.0, 0.0, 0
        self._running[mask], self._resetting[mask] = True, False
        return self.env.reset(seed=seed, options=options)

    def step(self, actions):
        if self._steps == 0:
            if not self._running.any():
                _check_not_final(self)
                raise RecorderError("step() before reset(): call reset() first (the recorder counts episodes "
                                    "from a reset)")
            if not self._checked_stack["step"]:
                self._check_callers("step")
        if getattr(_evaluation, "active", False):
            _check_not_evaluating(self)
        if self.writer.final_written:
            _check_not_final(self)
        result = self.env.step(actions)
        self._steps += 1
        _, reward, cost, terminated, truncated, info = split_step(result, self.cost_key)
        reward = self._column("reward", reward)
        ended_now = np.logical_or(self._column("terminated", terminated), self._column("truncated", truncated))
        counted = self._running & ~self._resetting if self._resetting.any() else self._running
        if len(result) == 6:
            cost = self._column("cost", cost)
        else:
            cost = self._info_cost(info, ended_now, counted)
        if not (np.isfinite(reward).all() and np.isfinite(cost).all()):
            for name, values in (("reward", reward), ("cost", cost)):
                bad = counted & ~np.isfinite(values)
                if bad.any():
                    i = int(np.flatnonzero(bad)[0])
                    raise RecorderError(f"{self._where()}, env {i}: {name} is {values[i].item()!r}; "
                                        f"rewards and costs must be finite")
        if counted.all():  # the common case: every env is inside an episode
            self._ret += reward
            self._cost += cost
            self._length += 1
            ended = ended_now
        else:
            self._ret[counted] += reward[counted]
            self._cost[counted] += cost[counted]
            self._length[counted] += 1
            ended = counted & ended_now
        if self._resetting.any():
            self._resetting[:] = False
        if ended.any():
            self._finish(ended)
            if self.autoreset_mode == NEXT_STEP:
                self._resetting[ended] = True  # the env resets itself on the next step
            elif self.autoreset_mode == DISABLED:
                self._running[ended] = False  # until reset(options={"reset_mask": ...})
        return result

    def _where(self) -> str:
        return f"vector step {self._steps}"

    def _info_cost(self, info, ended, counted) -> np.ndarray:
        """Per-env costs of a 5-tuple step: ``info[cost_key]`` (masked by ``info["_" + cost_key]``);
        in same-step mode an env that ended has its last step's info in ``info["final_info"]``."""
        key, n = self.cost_key, self._num_envs
        info = info if isinstance(info, dict) else {}
        if key in info and "final_info" not in info:  # the common case: every env reported its cost
            mask = info.get(f"_{key}")
            if mask is None or np.all(mask):
                return self._column(f"info[{key!r}]", info[key]).astype(np.float64, copy=False)
        cost, have = np.zeros(n), np.zeros(n, bool)
        if key in info:
            mask = np.asarray(info.get(f"_{key}", np.ones(n, bool)), bool)
            values = self._column(f"info[{key!r}]", info[key])
            cost[mask], have = values[mask], have | mask
        final = info.get("final_info")
        if final is not None and self.autoreset_mode == SAME_STEP:
            if isinstance(final, dict):  # Gymnasium >= 1.0: batched like info
                if key in final:
                    mask = ended & np.asarray(final.get(f"_{key}", np.ones(n, bool)), bool)
                    values = self._column(f"info['final_info'][{key!r}]", final[key])
                    cost[mask], have = values[mask], have | mask
            else:  # Gymnasium < 1.0: one dict per env
                for i in np.flatnonzero(ended):
                    if isinstance(final[i], dict) and key in final[i]:
                        cost[i], have[i] = final[i][key], True
        silent = counted & ~have
        if silent.any():
            raise _missing_cost(key, f"{self._where()}, env {int(np.flatnonzero(silent)[0])}")
        return cost

    def _column(self, name, value) -> np.ndarray:
        array = np.asarray(value)
        if array.shape != (self._num_envs,):
            raise RecorderError(f"{self._where()}: {name} must have shape ({self._num_envs},) (one per env), got {array.shape}")
        if array.dtype.kind not in "biuf":
            raise RecorderError(f"{self._where()}: {name} must be numeric, got dtype {array.dtype}")
        return array

    def _finish(self, ended: np.ndarray) -> None:
        newly = ended & ~self._pending
        self._pending_ret[newly] = self._ret[newly]
        self._pending_cost[newly] = self._cost[newly]
        self._pending_length[newly] = self._length[newly]
        self._pending |= ended
        self._ret[ended], self._cost[ended], self._length[ended] = 0.0, 0.0, 0
        if self._pending.all():
            self.writer.append_iterates(self._pending_ret[None], self._pending_cost[None], self._pending_length[None])
            self._pending[:] = False
            self._cut_offs = 0

    def close(self, **kwargs):
        self.writer.close()
        return self.env.close(**kwargs)


# ---- final evaluation ----------------------------------------------------------------
EVAL_SALT = 0x5EED_F1A1  # separates the evaluation's seed streams from the training seed's


def evaluation_seeds(seed: int, episodes: int) -> list[int]:
    """The reset seed of each evaluation episode (one fresh layout per episode), from ``seed``."""
    return [int(s) for s in np.random.SeedSequence([int(seed), EVAL_SALT]).generate_state(episodes)]


def run_episode(env: gymnasium.Env, policy, explore: bool, reset_seed: int, rng: np.random.Generator,
                max_steps: int, cost_key: str = DEFAULT_COST_KEY) -> tuple[float, float, int]:
    """(return, cost, length) of one episode of ``policy(obs, explore, rng)`` from ``reset(seed=reset_seed)``."""
    obs, _ = env.reset(seed=reset_seed)
    ret = cost_sum = 0.0
    for length in range(1, max_steps + 1):
        obs, reward, cost, terminated, truncated, _ = split_step(env.step(policy(obs, explore, rng)), cost_key)
        where = f"evaluation episode with reset seed {reset_seed}, step {length}"
        if cost is None:
            raise _missing_cost(cost_key, where)
        ret += _scalar("reward", reward, where)
        cost_sum += _scalar("cost", cost, where)
        if terminated or truncated:
            return ret, cost_sum, length
    raise RecorderError(f"evaluation episode with reset seed {reset_seed} did not end within max_steps={max_steps} "
                        f"steps; wrap the env in a TimeLimit or raise max_steps")


def evaluate_final(env: gymnasium.Env, policy, writer: EpisodeWriter, *, episodes: int = 100, seed: int = 0,
                   max_steps: int = 1_000_000, cost_key: str = DEFAULT_COST_KEY) -> dict:
    """Record the two final phases: ``episodes`` episodes with exploration noise, then greedy.

    ``policy(obs, explore, rng)`` returns an action: with noise when ``explore`` is true (drawn
    from ``rng``, a numpy Generator), its greedy (mode) action otherwise. Episode i of both
    phases starts from the same reset seed (the same layout, for environments that draw their
    layout from the reset seed) and gets a Generator seeded the same way, so the two phases
    differ only in the noise. Give two callables as
    ``lambda obs, explore, rng: noisy(obs, rng) if explore else greedy(obs)``.
    Returns ``{phase: {"return", "cost", "length"}}`` as written (``writer.final_iteration``).
    """
    stack = wrapper_stack(env)
    recorders = [w for w in stack if isinstance(w, (RecordEpisodes, RecordVectorEpisodes))]
    if recorders:
        where = "" if recorders[0] is env else \
            f" (the wrapper stack {' > '.join(type(w).__name__ for w in stack)} holds a {type(recorders[0]).__name__})"
        raise RecorderError(f"evaluate_final: pass the environment without its recorder{where}: the recorder's "
                            f"recorder.env, or a fresh env built the same way; otherwise the evaluation episodes "
                            f"would also be recorded as training iterates")
    if isinstance(env, VectorEnv):
        raise RecorderError("evaluate_final: runs one environment; pass a single (non-vector) env")
    if isinstance(episodes, bool) or not isinstance(episodes, int) or episodes < 1:
        raise RecorderError(f"evaluate_final: episodes must be an integer >= 1, got {episodes!r}")
    if writer.final_written:
        raise RecorderError(f"{writer.folder}: the final evaluation is recorded already")
    seeds = evaluation_seeds(seed, episodes)
    phases = {}
    _evaluation.active = True  # a recorder hidden inside env (behind a non-Wrapper adapter) refuses to step
    try:
        for phase, explore in zip(FINAL_PHASES, (True, False)):
            rows = [run_episode(env, policy, explore, s, np.random.default_rng([int(seed), EVAL_SALT, i]),
                                max_steps, cost_key) for i, s in enumerate(seeds)]
            ret, cost, length = (np.asarray(col) for col in zip(*rows))
            phases[phase] = {"return": ret, "cost": cost, "length": length}
    finally:
        _evaluation.active = False
    writer.write_final(*(phases[phase] for phase in FINAL_PHASES))
    return phases


def wrapper_stack(env, limit: int = 100) -> list:
    """``env`` and the envs it wraps, outermost first (following ``.env``)."""
    stack = [env]
    while len(stack) < limit:
        inner = getattr(stack[-1], "env", None)  # Gymnasium < 1.0 forwards unknown attributes: stop at a repeat
        if inner is None or any(inner is e for e in stack) or not hasattr(inner, "step"):
            break
        stack.append(inner)
    return stack
