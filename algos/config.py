"""Training configuration: the presets, command-line overrides, and the split into static and runtime parts.

A `TrainConfig` holds everything that defines a run. It splits into two parts:

* the *static* part (task, algorithm, network sizes, N, T, update schedule, budget) fixes the
  shapes and therefore the compiled XLA program;
* the *runtime* part (`Hyper`: bound, seed, learning rates and the algorithm scalars) is passed
  to that program as traced values, so one compiled program serves every bound, seed and
  hyperparameter value of a grid.

Both are ordinary class statements, so editors and type checkers see the fields declared
here. The algorithm scalars are declared in the table in `algos/registry.py` (each a
`Scalar`: default and help): one decorator adds them to both classes as fields after the
declared ones (in table order, which fixes the config's dict, `--set` keys and the programs'
arguments), so adding an algorithm touches no class here; code reads them by name. A type
checker sees them through each class's checker-only `__getattr__` (`float` on `TrainConfig`,
`Any` on `Hyper`; registry docstring). This module imports no JAX (the workflow reads the
presets and names cheaply).
"""
from __future__ import annotations

import dataclasses
import json
import math
from typing import TYPE_CHECKING, Any, TypeVar

from algos.registry import ALGOS, algorithm_scalars, foreign_scalars, get as get_algorithm, program_algos

ACTIVATIONS = ("swish", "tanh", "relu", "elu")
# How the programs' float32 matrix products are computed (jax.default_matmul_precision):
# "default" is XLA's choice (full float32 on the CPU; TF32 tensor cores on recent NVIDIA GPUs),
# "highest" full float32 everywhere. A faster setting (bfloat16) is offered only once it has been
# measured on a GPU, before and after, with the default sweep's outcome checks.
MATMUL_PRECISIONS = ("default", "highest")
PACK_MODES = ("auto", "sequential", "batched")  # algos.programs: auto = batched on GPU/TPU, else sequential
# Execution fields: how a run is computed, not which run it is (a resume or a rerun may change them).
NOT_IDENTITY = ("checkpoint_every_s", "pack_mode")
# A run's identity: its folder is named after these, so only the named options may set them.
IDENTITY_FIELDS = ("task", "bound", "algo", "seed", "backend", "level")
# The budget a sweep may set per trainer preset (the sweep config's train.KEY, the CLI's --KEY).
BUDGET_FIELDS = ("total_steps", "num_envs", "episode_length", "eval_episodes")
SEED_LIMIT = 2**31  # seeds are int32 PRNG seeds: 0 <= seed < SEED_LIMIT


class ConfigFieldError(ValueError):
    """A config value the trainer refuses; `field` names it (`env.NAME` for a task option), so a
    caller can point at its own key without reading the message."""

    def __init__(self, field: str, message: str):
        super().__init__(message)
        self.field = field


ALGO_SCALARS = algorithm_scalars()  # every algorithm's runtime scalars, name -> default, in table order
_Class = TypeVar("_Class", bound=type)


def _with_algorithm_scalars(annotation, defaults: bool):
    """Class decorator (under @dataclass): every algorithm's scalar (algos/registry.py) becomes a
    field after the declared ones, in table order, with its default when `defaults`. The table
    is the one place that names them, so adding an algorithm touches no class here."""

    def add(cls: _Class) -> _Class:
        clash = sorted(set(ALGO_SCALARS) & set(cls.__annotations__))
        if clash:
            raise ValueError(f"algos.registry: scalar name(s) {clash} are already {cls.__name__} fields")
        for name, default in ALGO_SCALARS.items():
            cls.__annotations__[name] = annotation
            if defaults:
                setattr(cls, name, default)
        return cls

    return add


@dataclasses.dataclass(frozen=True)
@_with_algorithm_scalars(float, defaults=True)
class TrainConfig:
    """One training run. Defaults are CRAX's networks and schedule and the paper's budget (the
    `paper` preset); every algorithm's scalars follow the fields below (their defaults are the
    registry's)."""

    # what to train
    task: str = "goal"
    algo: str = "ppo_lag"
    bound: float = 25.0
    seed: int = 0
    backend: str = "builtin"
    level: int = 1
    env_kwargs: tuple = ()  # sorted (name, value) pairs passed to envs.make
    # budget
    num_envs: int = 2048
    episode_length: int = 2000
    total_steps: int = 500_000_000
    eval_episodes: int = 100
    # update schedule (CRAX: 16 unrolls of 8 steps from 2048 envs, 32 minibatches of 1024 sequences)
    unroll_length: int = 8
    batch_size: int = 1024  # sequences per minibatch
    num_minibatches: int = 32
    num_epochs: int = 6
    # networks
    policy_hidden: tuple = (32, 32, 32, 32)
    critic_hidden: tuple = (256, 256, 256, 256, 256)
    activation: str = "swish"
    normalize_observations: bool = True
    matmul_precision: str = "default"  # MATMUL_PRECISIONS
    # the off-policy core (algos/offpolicy.py; CRAX's SAC CLI defaults): a replay buffer per run
    replay_size: int = 1_000_000  # transitions kept (CRAX --max_replay_size)
    min_replay_size: int = 0  # transitions collected before the first gradient step
    grad_updates_per_step: int = 32  # gradient steps per env step of all num_envs envs
    replay_batch_size: int = 1024  # transitions per gradient step (CRAX --batch_size)
    offpolicy_hidden: tuple = (256, 256)  # the policy's and each Q network's hidden layers (Brax SAC)
    offpolicy_activation: str = "relu"
    # both cores (runtime values; CRAX passes the same flags to its PPO and SAC trainers)
    learning_rate: float = 5e-4
    discount: float = 0.99
    reward_scaling: float = 0.1
    # PPO core (runtime values)
    entropy_cost: float = 5e-3
    gae_lambda: float = 0.95
    clip_eps: float = 0.3
    # off-policy core (runtime values)
    tau: float = 0.005  # Polyak step of the target Q networks
    alpha_learning_rate: float = 3e-4  # Adam step of log alpha, the entropy temperature
    # execution (not part of the result)
    chunk_updates: int = 8  # updates per jitted call; checkpoints fall between calls
    checkpoint_every_s: float = 300.0
    log_capacity: int = 0  # logged iterates per chunk; 0 = as many as can complete (iterate_capacity)
    pack_mode: str = "auto"  # a pack's members one after another or batched (algos.programs); not identity

    if TYPE_CHECKING:  # for type checkers only: the algorithm scalars the decorator adds are floats
        def __getattr__(self, name: str) -> float: ...

    # ---- derived sizes -------------------------------------------------------------
    @property
    def learner(self) -> str:
        """The core that trains the algorithm (algos.registry.LEARNERS)."""
        return get_algorithm(self.algo.split("+")[0]).learner

    @property
    def rollout_steps(self) -> int:
        """Steps of every env per update: PPO's unrolls x unroll_length; the off-policy core
        steps each env once per update (then takes grad_updates_per_step gradient steps)."""
        return self.unrolls_per_update * self.unroll_length if self.learner == "ppo" else 1

    @property
    def sequences_per_update(self) -> int:
        return self.batch_size * self.num_minibatches

    @property
    def unrolls_per_update(self) -> int:
        return self.sequences_per_update // self.num_envs

    @property
    def steps_per_update(self) -> int:
        """Env steps (transitions over all envs) collected per update."""
        return self.rollout_steps * self.num_envs

    @property
    def num_updates(self) -> int:
        return max(1, math.ceil(self.total_steps / self.steps_per_update))

    @property
    def iterate_capacity(self) -> int:
        """Logged iterates one chunk can hold: as many as can complete in it. A built-in task's
        episodes always last T steps, so one per T steps of every env, plus one. A CRAX task's
        episode can end at any step (a walker that falls), and at most one iterate completes
        per step (recorders.jax_recorder.advance), so one per env step of the chunk, plus one:
        at CRAX's sizes a member's log is then about its rollout's size. `log_capacity` > 0 overrides."""
        if self.log_capacity > 0:
            return self.log_capacity
        steps = self.chunk_updates * self.rollout_steps
        return steps // self.episode_length + 1 if self.backend == "builtin" else steps + 1

    @property
    def uses_cost_critic(self) -> bool:
        return get_algorithm(self.algo).uses_cost_critic

    @property
    def algo_index(self) -> int:
        """The algorithm's place among those its sequential program serves (registry.program_algos)."""
        return program_algos(self.algo).index(self.algo)

    def validate(self) -> TrainConfig:
        def bad(field: str, why: str) -> ValueError:
            return ConfigFieldError(field, f"config field {field!r} = {getattr(self, field)!r}: {why}")

        if self.algo not in ALGOS:
            raise bad("algo", f"must be one of {ALGOS}")
        if not (self.bound > 0 and math.isfinite(self.bound)):
            raise bad("bound", "must be a finite number > 0")
        for name in ("activation", "offpolicy_activation"):
            if getattr(self, name) not in ACTIVATIONS:
                raise bad(name, f"must be one of {ACTIVATIONS}")
        if self.matmul_precision not in MATMUL_PRECISIONS:
            raise bad("matmul_precision", f"must be one of {MATMUL_PRECISIONS}")
        for name in ("num_envs", "episode_length", "total_steps", "unroll_length", "batch_size",
                     "num_minibatches", "num_epochs", "chunk_updates", "eval_episodes"):
            if getattr(self, name) < 1:
                raise bad(name, "must be >= 1")
        if self.learner == "ppo" and self.sequences_per_update % self.num_envs:
            raise bad("num_envs", f"must divide batch_size * num_minibatches = {self.sequences_per_update}")
        for name in ("policy_hidden", "critic_hidden", "offpolicy_hidden"):
            if not getattr(self, name):
                raise bad(name, "network sizes must list at least one hidden layer")
        for name in ("replay_size", "grad_updates_per_step", "replay_batch_size"):
            if getattr(self, name) < 1:
                raise bad(name, "must be >= 1")
        if self.learner == "sac" and not self.num_envs <= self.replay_size:
            raise bad("replay_size", f"must hold at least one step of every env (num_envs = {self.num_envs})")
        if not 0 <= self.min_replay_size <= self.replay_size:
            raise bad("min_replay_size", f"must be in [0, replay_size = {self.replay_size}]")
        if self.seed < 0 or self.seed >= SEED_LIMIT:
            raise bad("seed", "must be in [0, 2**31)")
        if self.pack_mode not in PACK_MODES:
            raise bad("pack_mode", f"must be one of {PACK_MODES}")
        return self

    def static_key(self, shared: bool = False) -> TrainConfig:
        """The config with every runtime value blanked: equal keys share compiled programs.
        `shared` (a sequential program): the algorithm too is a runtime value where it shares its
        program (registry.program_algos); `algo` then names them all, joined by "+"."""
        algo = "+".join(program_algos(self.algo)) if shared else self.algo
        return dataclasses.replace(self, **{f: 0.0 for f in CONFIG_HYPER_FIELDS}, seed=0, total_steps=0,
                                   checkpoint_every_s=0.0, pack_mode="auto", algo=algo)

    def to_dict(self) -> dict:
        out = dataclasses.asdict(self)
        out["env_kwargs"] = dict(self.env_kwargs)
        for name in ("policy_hidden", "critic_hidden", "offpolicy_hidden"):
            out[name] = list(getattr(self, name))
        return out


@dataclasses.dataclass(frozen=True)
@_with_algorithm_scalars(Any, defaults=False)
class Hyper:
    """The runtime values of a run (float32 scalars, or arrays with a leading pack axis), traced
    arguments of its programs: the PPO core's below, then every algorithm's scalars. A JAX
    pytree (leaves in field order) once `hyper_of` or `stacked_hyper` has made one."""

    bound: Any
    learning_rate: Any
    discount: Any
    reward_scaling: Any
    entropy_cost: Any
    gae_lambda: Any
    clip_eps: Any
    tau: Any
    alpha_learning_rate: Any
    algo_index: Any  # TrainConfig.algo_index: which algorithm a shared program runs (0 where it serves one)

    if TYPE_CHECKING:  # for type checkers only: the algorithm scalars the decorator adds
        def __getattr__(self, name: str) -> Any: ...


# The fields only one core reads (the others' runs ignore them: not part of their identity, so
# one preset can size both kinds and a change to one kind's fields leaves the other's runs valid).
LEARNER_FIELDS = {
    "ppo": ("unroll_length", "batch_size", "num_minibatches", "num_epochs", "policy_hidden", "critic_hidden",
            "activation", "entropy_cost", "gae_lambda", "clip_eps"),
    "sac": ("replay_size", "min_replay_size", "grad_updates_per_step", "replay_batch_size", "offpolicy_hidden",
            "offpolicy_activation", "tau", "alpha_learning_rate"),
}


def foreign_fields(algo: str) -> frozenset:
    """The config fields that cannot change a run of `algo`: other algorithms' scalars
    (algos.registry.foreign_scalars) and the fields of the cores that do not train it. A run's
    identity (its folder's, its checkpoint's) leaves them out."""
    learner = get_algorithm(algo).learner if algo in ALGOS else None
    other = {f for name, fields in LEARNER_FIELDS.items() if name != learner for f in fields}
    return foreign_scalars(algo) | (other if learner is not None else frozenset())


HYPER_FIELDS = tuple(f.name for f in dataclasses.fields(Hyper))  # changing any of these never recompiles
CONFIG_HYPER_FIELDS = tuple(f for f in HYPER_FIELDS if f != "algo_index")  # TrainConfig fields (algo_index: of `algo`)
_hyper_registered: list = []


def register_hyper() -> None:
    """Make Hyper a JAX pytree on first use (so that importing this module imports no JAX)."""
    import jax

    if not _hyper_registered:
        jax.tree_util.register_dataclass(Hyper, data_fields=list(HYPER_FIELDS), meta_fields=[])
        _hyper_registered.append(Hyper)


def hyper_of(config: TrainConfig) -> Hyper:
    import jax.numpy as jnp

    register_hyper()
    return Hyper(*(jnp.float32(getattr(config, f)) for f in HYPER_FIELDS))


def stacked_hyper(configs) -> Hyper:
    """The runtime values of each config, stacked along a leading pack axis."""
    import jax.numpy as jnp

    register_hyper()
    return Hyper(*(jnp.asarray([getattr(c, f) for c in configs], jnp.float32) for f in HYPER_FIELDS))


# ---- presets ---------------------------------------------------------------------------
# `paper`: CRAX's networks and schedule and the paper's budget, CRAX's sparse goal reward.
# `cpu`: the default; small networks and budget so one run takes seconds on one core, and
# goal and push with Safety-Gym-style shaping so that learning shows (docs/envs.md).
@dataclasses.dataclass(frozen=True)
class Preset:
    """A trainer preset: the TrainConfig fields it changes, and the options it passes to some
    tasks (envs.make keywords; part of a run's identity, spec.json's env_kwargs)."""

    config: dict[str, Any]
    task_options: dict[str, dict[str, Any]] = dataclasses.field(default_factory=dict)


PRESETS: dict[str, Preset] = {
    "cpu": Preset(
        config=dict(
            num_envs=64, episode_length=500, total_steps=800_000,
            batch_size=64, num_minibatches=4, num_epochs=2,  # 2 epochs: SGD was half an update's time
            policy_hidden=(32, 32), critic_hidden=(64, 64),
            chunk_updates=100,
            # the off-policy core: CRAX's replay ratio (32 gradient steps of 1024 per 2048 env
            # steps, 16 samples per env step) at 64 envs is 1 step of 1024; 256 keeps a run to a
            # minute on one core (4 samples per env step)
            replay_size=100_000, replay_batch_size=256, grad_updates_per_step=1, offpolicy_hidden=(64, 64),
        ),
        # shaping for goal and push; contact_model "mjx" is the tasks' default, named because
        # task options are part of a run's identity (spec.json): without it existing runs differ
        task_options={"goal": {"reward_distance_scale": 1.0, "contact_model": "mjx"},
                      "push": {"reward_agent_block_scale": 1.0, "contact_model": "mjx"},
                      "button": {"contact_model": "mjx"}},
    ),
    "paper": Preset(config={}),
}


def _parse_value(field: dataclasses.Field, text: str):
    default = field.default
    if isinstance(default, bool):
        if text.lower() in ("1", "true", "yes", "on"):
            return True
        if text.lower() in ("0", "false", "no", "off"):
            return False
        raise ConfigFieldError(field.name, f"--set {field.name}={text}: expected true or false")
    if isinstance(default, tuple):
        try:
            return tuple(int(v) for v in text.split(",") if v.strip())
        except ValueError:
            raise ConfigFieldError(field.name, f"--set {field.name}={text}: expected comma-separated integers") from None
    try:
        if isinstance(default, int):
            return int(float(text)) if float(text).is_integer() else int(text)
        if isinstance(default, float):
            return float(text)
    except ValueError:
        raise ConfigFieldError(field.name, f"--set {field.name}={text}: expected a number") from None
    return text


def parse_env_value(text: str):
    """A task option's value from text: int, float or bool where it reads as one, else the text."""
    for cast in (int, float):
        try:
            return cast(text)
        except ValueError:
            pass
    if text.lower() in ("true", "false"):
        return text.lower() == "true"
    return text


def make_config(preset: str = "cpu", overrides: dict | None = None,
                sets: list[str] | tuple = ()) -> TrainConfig:
    """Resolve a preset, then explicit overrides, then `--set key=value` strings.

    `--set env.NAME=VALUE` sets a task option passed to envs.make.
    """
    if preset not in PRESETS:
        raise ValueError(f"unknown preset {preset!r}; choose one of {sorted(PRESETS)}")
    values = dict(PRESETS[preset].config)
    values.update({k: v for k, v in (overrides or {}).items() if v is not None})
    task = values.get("task", TrainConfig.task)
    env_kwargs = dict(PRESETS[preset].task_options.get(task, {}))
    fields = {f.name: f for f in dataclasses.fields(TrainConfig)}
    for item in sets:
        if "=" not in item:
            raise ValueError(f"--set {item!r}: expected key=value")
        key, text = item.split("=", 1)
        key = key.strip()
        if key.startswith("env."):
            env_kwargs[key[4:]] = parse_env_value(text)
            continue
        if key in IDENTITY_FIELDS:
            raise ConfigFieldError(key, f"--set {key}={text}: {key} is part of the run's identity (its folder is named "
                             f"after it); give it with --{key}, not --set")
        if key not in fields or key == "env_kwargs":
            raise ConfigFieldError(key, f"--set {key}: unknown config field; known: {sorted(fields)}")
        values[key] = _parse_value(fields[key], text.strip())
    values["env_kwargs"] = tuple(sorted(env_kwargs.items()))
    return TrainConfig(**values).validate()


def recorded_with_defaults(recorded: dict, wanted: dict) -> dict:
    """A recorded config dict (`TrainConfig.to_dict`, a JSON round trip later) with each
    TrainConfig field that `wanted` has and it lacks at its default: a field added to TrainConfig
    after a run was recorded had its default then, so the run is the same run
    (runs.runfolder.config_difference, runs.checkpoint). An empty record stays empty."""
    if not recorded:
        return recorded
    defaults = json.loads(json.dumps(TrainConfig().to_dict()))
    return {**{k: defaults[k] for k in wanted if k not in recorded and k in defaults}, **recorded}


def config_from_dict(values: dict) -> TrainConfig:
    """The config that `TrainConfig.to_dict` gave (a run spec, run.json's "config")."""
    fields = {f.name for f in dataclasses.fields(TrainConfig)}
    unknown = sorted(set(values) - fields)
    if unknown:
        raise ConfigFieldError(unknown[0], f"unknown config field(s) {unknown}; known: {sorted(fields)}")
    values = dict(values)
    for name in ("policy_hidden", "critic_hidden", "offpolicy_hidden"):
        if name in values:
            values[name] = tuple(values[name])
    if "env_kwargs" in values:
        values["env_kwargs"] = tuple(sorted(dict(values["env_kwargs"]).items()))
    return TrainConfig(**values).validate()
