"""The algorithm table: every algorithm the trainer knows, in one place.

Everything else is derived from it: `algos.config.ALGOS`, the trainer's `--algo` choices,
the runtime fields of `TrainConfig` and `Hyper` (each algorithm's scalars become `--set`
fields), whether a cost critic is trained, the trace's `multiplier` and state columns, the
display labels of tables and figures, and the sweep configuration's allowed `algos`.

An algorithm comes in one of two forms (docs/algos.md, "The algorithm interface"):

* the simple form: a policy loss plus one scalar multiplier updated once per update
  (`loss`, `update`, `multiplier_init`), as PPO, PPO-Lag, P3O and FOCOPS are written;
* the general form: `hooks` names an `algos.interface.Hooks` object in the algorithm's own
  module: its own state (a pytree it initialises and updates once per update, checkpointed
  and traced), optionally an observation/reward transform of the task (`EnvTransform`) and
  optionally a replacement of the SGD policy step (`policy_step`).

This module imports no JAX, so the workflow can read the names cheaply: an entry names its
code as `lambda: algos.ppo_pid.HOOKS`, and `algos.ppo_pid` is imported when the lambda is
called, when training starts (algos/__init__.py loads a module on its first use).

An algorithm's scalars are declared once, here, each a `Scalar` (type, default, one line of
help): they become fields of `TrainConfig` and `Hyper` and `--set` keys (algos/config.py, in
table order), `python -m runs.train --help` lists them per algorithm, and the table in
docs/scalars.md is checked against them (tests/test_registries.py). What a type checker sees:
`Scalar` and the table are typed (`Algorithm.scalars: dict[str, Scalar]`, defaults `float`);
the config classes declare the PPO core's fields by name, and an algorithm scalar only through
their checker-only `__getattr__` (`float` on `TrainConfig`, `Any` on `Hyper`), so reading
`config.kappa_max` or `h.kappa_max` type-checks but a misspelt scalar name is caught at run
time (AttributeError, `--set`'s "unknown config field"), not by the checker: the classes name
no algorithm, so adding one touches no class there.
"""
from __future__ import annotations

import dataclasses
from typing import Callable, ClassVar

import algos


@dataclasses.dataclass(frozen=True)
class Scalar:
    """One runtime scalar of an algorithm: its default and one line of help (`--help`,
    docs/scalars.md). Every scalar has the type `float`: a float32 traced value of the compiled
    programs (`Hyper`), so a count such as `cpo_cg_iters` is a whole-numbered float and a switch
    such as `focops_kl_grad` is 0 or 1."""

    default: float
    help: str
    type: ClassVar[type] = float

    def __post_init__(self):
        if isinstance(self.default, bool) or not isinstance(self.default, (int, float)):
            raise TypeError(f"algos.registry: a scalar's default must be a number, not {self.default!r}")
        object.__setattr__(self, "default", float(self.default))


@dataclasses.dataclass(frozen=True)
class Algorithm:
    """One algorithm on the PPO core (docs/algos.md).

    Simple form (`loss` and `update` are functions of no arguments that return the function):
    loss:   returns `f(x: interface.LossInputs, h: Hyper) -> scalar policy loss`
    update: returns `f(multiplier, violation, h) -> new multiplier`, called once per update with
            the per-step violation c - d/T; None keeps the multiplier fixed
    multiplier_init: the scalar whose value starts the multiplier; None means the algorithm has
            no multiplier (it stays 0 and the trace records NaN)

    General form:
    hooks:  a function of no arguments that returns the algorithm's `algos.interface.Hooks` (its
            own state, update, loss or policy step, transform, trace); `loss`, `update` and
            `multiplier_init` are then unused
    state_columns: names of the trace columns its `Hooks.trace` fills besides `multiplier`
            (static, so the trace's columns are known without JAX)

    Both forms:
    scalars: the algorithm's own runtime values, name -> `Scalar(default, help)`; names must be
            unique over the table, since each becomes a `TrainConfig` field and a `--set` key. A
            bare number is taken as a `Scalar` without help (the shipped table gives every one
            its help, tests/test_registries.py)
    multiplier: what the trace's `multiplier` column holds (figure A.2's panel title); a
            general-form algorithm without one leaves it None (the column is then NaN)
    """

    label: str  # display name in tables and figures
    uses_cost_critic: bool
    loss: Callable[[], Callable] | None = None
    update: Callable[[], Callable] | None = None
    multiplier_init: str | None = None
    scalars: dict[str, Scalar] = dataclasses.field(default_factory=dict)
    hooks: Callable[[], object] | None = None
    state_columns: tuple = ()
    multiplier: str | None = None
    learner: str = "ppo"  # the core that trains it: a key of LEARNERS (on-policy PPO or off-policy SAC)
    scalars_of: tuple = ()  # other algorithms whose scalars it reads too (part of its runs' identity)
    # (observation entries, action dims) it takes at most; None: any. The sweep's config check
    # refuses a larger task (workflow/config_validation.py, check_task_sizes) before any job runs.
    max_sizes: tuple[int, int] | None = None

    def __post_init__(self):
        object.__setattr__(self, "scalars", {
            name: value if isinstance(value, Scalar) else Scalar(value, "")
            for name, value in self.scalars.items()})

    @property
    def has_multiplier(self) -> bool:
        return self.multiplier_init is not None or self.multiplier is not None

    @property
    def loss_fn(self) -> Callable | None:
        return None if self.loss is None else self.loss()

    @property
    def update_fn(self) -> Callable | None:
        return None if self.update is None else self.update()

    @property
    def hooks_obj(self):
        """The general-form `algos.interface.Hooks` (the simple form adapted to it when `hooks` is None)."""
        if self.hooks is not None:
            return self.hooks()
        from algos.interface import simple_hooks  # JAX: only when training

        return simple_hooks(self)


ALGORITHMS: dict[str, Algorithm] = {
    "ppo": Algorithm(
        label="PPO", uses_cost_critic=False,  # CRAX's PPO has no cost critic
        loss=lambda: algos.ppo.ppo_loss),
    "ppo_lag": Algorithm(
        label="PPO-Lag", uses_cost_critic=True,
        loss=lambda: algos.ppo_lag.ppo_lag_loss, update=lambda: algos.ppo_lag.ppo_lag_update,
        multiplier_init="lagrangian_init", multiplier="\u03bb (Lagrange multiplier)",
        scalars={
            "lagrangian_lr": Scalar(3.0, "lambda's step: lambda <- max(0, lambda + lr (c - d/T)) each update"),
            "lagrangian_init": Scalar(0.0, "lambda at the start of training")}),
    "p3o": Algorithm(
        label="P3O", uses_cost_critic=True,
        loss=lambda: algos.p3o.p3o_loss, update=lambda: algos.p3o.p3o_update,
        multiplier_init="kappa_init", multiplier="\u03ba (penalty factor)",
        scalars={
            "kappa_init": Scalar(0.01, "penalty factor kappa at the start, and the floor of its decay"),
            "kappa_factor": Scalar(1.1, "kappa <- min(factor kappa, kappa_max) after an update with c > d/T"),
            "kappa_decay": Scalar(0.9, "kappa <- max(decay kappa, kappa_init) after an update with c <= d/T"),
            "kappa_max": Scalar(50.0, "upper limit of kappa")}),
    "focops": Algorithm(
        label="FOCOPS", uses_cost_critic=True,
        loss=lambda: algos.focops.focops_loss, update=lambda: algos.focops.focops_update,
        multiplier_init="nu_init", multiplier="\u03bd (cost weight)",
        scalars={
            "nu_init": Scalar(0.1, "cost weight nu at the start of training"),
            "nu_lr": Scalar(1.0, "nu's step: nu <- clip(nu + lr (c - d/T), 0, nu_max) each update"),
            "nu_max": Scalar(100.0, "upper limit of nu"),
            "focops_lam": Scalar(1.5, "temperature lambda: divides the policy surrogate"),
            "focops_eta": Scalar(0.02, "KL limit: above it the loss is scaled by eta / KL"),
            "focops_kl_grad": Scalar(1.0, "1: the KL factor is differentiated (CRAX); 0: stop-gradient")}),
    # ---- the general form (algos/interface.py) ----------------------------------------
    "ppo_pid": Algorithm(
        label="PPO-PID", uses_cost_critic=True, hooks=lambda: algos.ppo_pid.HOOKS,
        multiplier="\u03bb (PID Lagrange multiplier)",
        state_columns=("pid_integral", "pid_prev_violation", "pid_derivative"),
        # CRAX's CLI defaults (configs/training_config.py); the initial lambda is CRAX's
        # --initial_lambda_lagr, shared there with PPO-Lag
        scalars={
            "pid_kp": Scalar(10.0, "proportional gain, on v = c - d/T"),
            "pid_ki": Scalar(0.01, "integral gain, on I (the clipped sum of v)"),
            "pid_kd": Scalar(0.01, "derivative gain, on D (the average of v - v_prev)"),
            "pid_integral_clip": Scalar(1.0, "I is clipped to [-clip, clip]"),
            "pid_lambda_max": Scalar(1e6, "upper limit of lambda"),
            "pid_deriv_beta": Scalar(0.95, "D <- beta D + (1 - beta) (v - v_prev)"),
            "pid_lambda_init": Scalar(0.0, "lambda at the start of training")}),
    "ppo_saute": Algorithm(
        label="PPO-Saute", uses_cost_critic=False, hooks=lambda: algos.ppo_saute.HOOKS,  # plain PPO, as CRAX
        multiplier="budget left at episode end, b / d",
        state_columns=("saute_violations",),
        scalars={
            "saute_gamma_budget": Scalar(0.0, "the budget's discount: b <- (b - c) / gamma; 0: `discount` (CRAX's None)"),
            "saute_penalty": Scalar(-1.0, "the reward of a step costing more than the budget left"),
            "saute_normalize_obs": Scalar(1.0, "1: the observation gets clip(b / d, 0, 2); 0: b itself"),
            "saute_carry_budget": Scalar(0.0, "1: the budget carries across time-limit ends (CRAX); 0: resets")}),
    "crpo": Algorithm(
        label="CRPO", uses_cost_critic=True, hooks=lambda: algos.crpo.HOOKS,
        multiplier="cost step (1: on the cost)",  # the update minimised the cost, not the reward
        scalars={
            "crpo_eta": Scalar(0.0, "tolerance: the next update minimises the cost if c - d/T > eta")}),
    "cpo": Algorithm(
        label="CPO", uses_cost_critic=True, hooks=lambda: algos.cpo.HOOKS,
        multiplier="\u03bd* (cost dual of the step)",
        state_columns=("cpo_lambda", "cpo_case", "cpo_accept_step"),
        # OmniSafe's CPO defaults (configs/on-policy/CPO.yaml; 20 line-search steps as cpo.py passes)
        scalars={
            "cpo_target_kl": Scalar(0.01, "trust region delta: the KL a step may reach"),
            "cpo_cg_iters": Scalar(15.0, "conjugate-gradient steps, at most"),
            "cpo_cg_damping": Scalar(0.1, "added to the Fisher-vector product: H v + damping v"),
            "cpo_ls_steps": Scalar(20.0, "line-search trials, at most; none accepted: no step"),
            "cpo_ls_decay": Scalar(0.8, "line-search trial k = 0, 1, ... takes decay^k of the step")}),
    # ---- beyond the paper: constraints on the paper's own metrics, and a shield -------
    "ppo_chance": Algorithm(
        label="PPO-Chance", uses_cost_critic=True, hooks=lambda: algos.ppo_chance.HOOKS,
        multiplier="\u03bb on P(C > d) (chance constraint)",
        state_columns=("chance_rate", "chance_episodes"),
        scalars={
            "chance_alpha": Scalar(0.1, "alpha: the violation rate P(C > d) allowed"),
            "chance_lr": Scalar(2.0, "lambda <- max(0, lambda + lr (rate - alpha)) when episodes ended"),
            "chance_init": Scalar(0.0, "lambda at the start of training")}),
    "ppo_cvar": Algorithm(
        label="PPO-CVaR", uses_cost_critic=True, hooks=lambda: algos.ppo_cvar.HOOKS,
        multiplier="\u03bb on CVaR(C) (tail constraint)",
        state_columns=("cvar_estimate",),
        scalars={
            "cvar_level": Scalar(0.9, "beta: CVaR is the mean cost of the costliest 1 - beta of episodes"),
            "cvar_lr": Scalar(0.1, "lambda <- max(0, lambda + lr (CVaR - d)) when episodes ended"),
            "cvar_init": Scalar(0.0, "lambda at the start of training")}),
    "ppo_shield": Algorithm(
        label="PPO-Shield", uses_cost_critic=True, hooks=lambda: algos.ppo_shield.HOOKS,
        max_sizes=(256, 8),  # its cost model's arrays are sized before the task is known
        multiplier="\u03bb (Lagrange multiplier, shielded)",
        state_columns=("shield_corrected", "shield_correction", "shield_clipped", "shield_infeasible",
                       "shield_model_loss"),
        scalars={
            "shield_lagrangian_lr": Scalar(3.0, "PPO-Lag's lambda step, after the warm-up"),
            "shield_lagrangian_init": Scalar(0.0, "lambda at the start of training"),
            "shield_lr": Scalar(3e-3, "Adam step size of the cost model g"),
            "shield_fit_steps": Scalar(16.0, "full-batch Adam steps fitting g each update"),
            "shield_budget_scale": Scalar(1.0, "the layer's step limit C = scale * d/T"),
            "shield_warmup_updates": Scalar(10.0, "first updates acting uniformly at random (g's pre-training)")}),
    # ---- off-policy: the SAC core (algos/offpolicy.py), CRAX's training/agents/sac* -------
    # The temperature alpha is the core's (trace column `sac_alpha`); the algorithm owns the
    # multiplier, moved once per gradient step from the sampled batch's mean step cost.
    "sac": Algorithm(
        label="SAC", uses_cost_critic=False, hooks=lambda: algos.sac_lag.SAC_HOOKS, learner="sac",
        state_columns=("sac_alpha",)),
    "sac_lag": Algorithm(
        label="SAC-Lag", uses_cost_critic=True, hooks=lambda: algos.sac_lag.HOOKS, learner="sac",
        multiplier="\u03bb (Lagrange multiplier)", state_columns=("sac_alpha",),
        # CRAX's CLI defaults (training/config.py: --lagrangian_lr, --lambda_max, --initial_lambda)
        scalars={
            "sac_lagrangian_lr": Scalar(0.01, "lambda <- min(relu(lambda + lr/T (c - d/T)), max) each gradient step"),
            "sac_lambda_max": Scalar(2.0, "upper limit of lambda"),
            "sac_lambda_init": Scalar(0.0, "lambda at the start of training")}),
    "sac_pid": Algorithm(
        label="SAC-PID", uses_cost_critic=True, hooks=lambda: algos.sac_lag.PID_HOOKS, learner="sac",
        multiplier="\u03bb (PID Lagrange multiplier)",
        # PPO-PID's controller and scalars (pid_*), moved once per gradient step: CRAX's SAC-PID
        # reads the same --pid_* flags as its PPO-PID
        state_columns=("sac_alpha", "pid_integral", "pid_prev_violation", "pid_derivative"),
        scalars_of=("ppo_pid",)),
}

ALGOS: tuple[str, ...] = tuple(ALGORITHMS)
# The cores that train an algorithm (Algorithm.learner): each a module offering
# `build_programs(config, env, batched, shared)` -> algos.core.Programs (init, chunk, evaluate).
# A third learner is a module and an entry here.
LEARNERS: dict[str, Callable[[], object]] = {
    "ppo": lambda: algos.core,  # on-policy: rollouts, GAE, SGD epochs (CRAX's PPO after Brax)
    "sac": lambda: algos.offpolicy,  # off-policy: a replay buffer, soft Q-learning (CRAX's SAC after Brax)
}
# The paper's four (the default sweep's algorithms); the others are the `zoo` preset's additions.
PAPER_ALGOS: tuple[str, ...] = ("ppo", "ppo_lag", "p3o", "focops")


def get(name: str) -> Algorithm:
    try:
        return ALGORITHMS[name]
    except KeyError:
        raise ValueError(f"unknown algo {name!r}; known: {', '.join(ALGOS)}") from None


def program_algos(name: str) -> tuple[str, ...]:
    """The algorithms that one sequential program serves with `name` (algos.programs): every
    simple-form algorithm shares one program per task, the algorithm being a runtime index into
    this tuple (Hyper.algo_index); a general-form algorithm has a program of its own (its state,
    transform or policy step gives it another shape). Table order, so the index is stable."""
    if get(name).hooks is not None:
        return (name,)
    return tuple(other for other, algo in ALGORITHMS.items() if algo.hooks is None)


def label(name: str) -> str:
    """Display label of an algorithm in the table; other names show as they are."""
    return ALGORITHMS[name].label if name in ALGORITHMS else name


def multiplier_label(name: str) -> str | None:
    """What the trace's multiplier column of an algorithm holds, or None."""
    return ALGORITHMS[name].multiplier if name in ALGORITHMS else None


def foreign_scalars(name: str) -> frozenset:
    """The scalars of every algorithm in the table but `name`: they cannot change a run of
    `name`, so a run's identity (its folder's, its checkpoint's) leaves them out and adding an
    algorithm to the table leaves the runs already trained valid."""
    own = {name, *(ALGORITHMS[name].scalars_of if name in ALGORITHMS else ())}
    return frozenset(s for other, algo in ALGORITHMS.items() if other not in own for s in algo.scalars)


def algorithm_scalars() -> dict[str, float]:
    """Every algorithm's scalars (name -> default) in table order; names must not repeat."""
    out: dict[str, float] = {}
    for name, algo in ALGORITHMS.items():
        for scalar, declared in algo.scalars.items():
            if scalar in out:
                raise ValueError(f"algos.registry: scalar {scalar!r} of {name!r} is already another "
                                 f"algorithm's; scalar names must be unique")
            out[scalar] = declared.default
        if algo.multiplier_init is not None and algo.multiplier_init not in algo.scalars:
            raise ValueError(f"algos.registry: {name!r} multiplier_init {algo.multiplier_init!r} "
                             f"is not one of its scalars {sorted(algo.scalars)}")
        if algo.hooks is None and algo.loss is None:
            raise ValueError(f"algos.registry: {name!r} names neither a loss (simple form) nor hooks "
                             f"(general form)")
    return out
