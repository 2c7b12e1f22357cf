"""The algorithm table: every algorithm the trainer knows, in one place.

Everything else is derived from it: `algos.config.ALGOS`, the trainer's `--algo` choices,
the runtime fields of `TrainConfig` and `Hyper` (each algorithm's scalars become `--set`
fields), whether a cost critic is trained, the trace's `multiplier` and state columns, the
display labels of tables and figures, and the sweep configuration's allowed `algos`.

An algorithm comes in one of two forms (docs/algos.md, "Adding an algorithm"):

* the simple form: a policy loss plus one scalar multiplier updated once per update
  (`loss`, `update`, `multiplier_init`), as PPO, PPO-Lag, P3O and FOCOPS are written;
* the general form: `hooks` names an `algos.interface.Hooks` object in the algorithm's own
  module: its own state (a pytree it initialises and updates once per update, checkpointed
  and traced), optionally an observation/reward transform of the task (`EnvTransform`) and
  optionally a replacement of the SGD policy step (`policy_step`).

This module imports no JAX, so the workflow can read the names cheaply: an entry names its
code as `lambda: algos.ppo_pid.HOOKS`, and `algos.ppo_pid` is imported when the lambda is
called, when training starts (algos/__init__.py loads a module on its first use).
"""
from __future__ import annotations

import dataclasses
from typing import Callable

import algos


@dataclasses.dataclass(frozen=True)
class Algorithm:
    """One algorithm on the PPO core (docs/algos.md).

    Simple form (`loss` and `update` are functions of no arguments that return the function):
    loss:   returns `f(x: hooks.LossInputs, h: Hyper) -> scalar policy loss`
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
    scalars: the algorithm's own runtime values (name -> default); names must be unique over
            the table, since each becomes a `TrainConfig` field and a `--set` key
    multiplier: what the trace's `multiplier` column holds (figure A.2's panel title); a
            general-form algorithm without one leaves it None (the column is then NaN)
    """

    label: str  # display name in tables and figures
    uses_cost_critic: bool
    loss: Callable[[], Callable] | None = None
    update: Callable[[], Callable] | None = None
    multiplier_init: str | None = None
    scalars: dict = dataclasses.field(default_factory=dict)
    hooks: Callable[[], object] | None = None
    state_columns: tuple = ()
    multiplier: str | None = None

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
        loss=lambda: algos.hooks.ppo_loss),
    "ppo_lag": Algorithm(
        label="PPO-Lag", uses_cost_critic=True,
        loss=lambda: algos.hooks.ppo_lag_loss, update=lambda: algos.hooks.ppo_lag_update,
        multiplier_init="lagrangian_init", multiplier="\u03bb (Lagrange multiplier)",
        scalars={"lagrangian_lr": 3.0, "lagrangian_init": 0.0}),
    "p3o": Algorithm(
        label="P3O", uses_cost_critic=True,
        loss=lambda: algos.hooks.p3o_loss, update=lambda: algos.hooks.p3o_update,
        multiplier_init="kappa_init", multiplier="\u03ba (penalty factor)",
        scalars={"kappa_init": 0.01, "kappa_factor": 1.1, "kappa_decay": 0.9, "kappa_max": 50.0}),
    "focops": Algorithm(
        label="FOCOPS", uses_cost_critic=True,
        loss=lambda: algos.hooks.focops_loss, update=lambda: algos.hooks.focops_update,
        multiplier_init="nu_init", multiplier="\u03bd (cost weight)",
        # focops_kl_grad 1: CRAX differentiates FOCOPS's KL factor; 0: stop-gradient
        scalars={"nu_init": 0.1, "nu_lr": 1.0, "nu_max": 100.0, "focops_lam": 1.5, "focops_eta": 0.02,
                 "focops_kl_grad": 1.0}),
    # ---- the general form (algos/interface.py) ----------------------------------------
    "ppo_pid": Algorithm(
        label="PPO-PID", uses_cost_critic=True, hooks=lambda: algos.ppo_pid.HOOKS,
        multiplier="\u03bb (PID Lagrange multiplier)",
        state_columns=("pid_integral", "pid_prev_violation", "pid_derivative"),
        # CRAX's CLI defaults (configs/training_config.py); the initial lambda is CRAX's
        # --initial_lambda_lagr, shared there with PPO-Lag
        scalars={"pid_kp": 10.0, "pid_ki": 0.01, "pid_kd": 0.01, "pid_integral_clip": 1.0,
                 "pid_lambda_max": 1e6, "pid_deriv_beta": 0.95, "pid_lambda_init": 0.0}),
    "ppo_saute": Algorithm(
        label="PPO-Saute", uses_cost_critic=False, hooks=lambda: algos.ppo_saute.HOOKS,  # plain PPO, as CRAX
        multiplier="budget left at episode end, b / d",
        state_columns=("saute_violations",),
        # saute_gamma_budget 0: the discount (CRAX's None); saute_carry_budget 1: CRAX's carry-over
        # of the budget across time-limit ends (docs/algos.md)
        scalars={"saute_gamma_budget": 0.0, "saute_penalty": -1.0, "saute_normalize_obs": 1.0,
                 "saute_carry_budget": 0.0}),
    "crpo": Algorithm(
        label="CRPO", uses_cost_critic=True, hooks=lambda: algos.crpo.HOOKS,
        multiplier="cost step (1: on the cost)",  # the update minimised the cost, not the reward
        scalars={"crpo_eta": 0.0}),
    "cpo": Algorithm(
        label="CPO", uses_cost_critic=True, hooks=lambda: algos.cpo.HOOKS,
        multiplier="\u03bd* (cost dual of the step)",
        state_columns=("cpo_lambda", "cpo_case", "cpo_accept_step"),
        # OmniSafe's CPO defaults (configs/on-policy/CPO.yaml; 20 line-search steps as cpo.py passes)
        scalars={"cpo_target_kl": 0.01, "cpo_cg_iters": 15.0, "cpo_cg_damping": 0.1, "cpo_ls_steps": 20.0,
                 "cpo_ls_decay": 0.8}),
    # ---- beyond the paper: constraints on the paper's own metrics, and a shield -------
    "ppo_chance": Algorithm(
        label="PPO-Chance", uses_cost_critic=True, hooks=lambda: algos.ppo_chance.HOOKS,
        multiplier="\u03bb on P(C > d) (chance constraint)",
        state_columns=("chance_rate", "chance_episodes"),
        scalars={"chance_alpha": 0.1, "chance_lr": 2.0, "chance_init": 0.0}),
    "ppo_cvar": Algorithm(
        label="PPO-CVaR", uses_cost_critic=True, hooks=lambda: algos.ppo_cvar.HOOKS,
        multiplier="\u03bb on CVaR(C) (tail constraint)",
        state_columns=("cvar_estimate",),
        scalars={"cvar_level": 0.9, "cvar_lr": 0.1, "cvar_init": 0.0}),
    "ppo_shield": Algorithm(
        label="PPO-Shield", uses_cost_critic=True, hooks=lambda: algos.ppo_shield.HOOKS,
        multiplier="\u03bb (Lagrange multiplier, shielded)",
        state_columns=("shield_corrected", "shield_correction", "shield_clipped", "shield_infeasible",
                       "shield_model_loss"),
        # the step limit C = shield_budget_scale * d/T; the first shield_warmup_updates updates act
        # uniformly at random (Dalal et al.'s pre-training of the cost model)
        scalars={"shield_lagrangian_lr": 3.0, "shield_lagrangian_init": 0.0, "shield_lr": 3e-3,
                 "shield_fit_steps": 16.0, "shield_budget_scale": 1.0, "shield_warmup_updates": 10.0}),
}

ALGOS: tuple[str, ...] = tuple(ALGORITHMS)
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
    return frozenset(s for other, algo in ALGORITHMS.items() if other != name for s in algo.scalars)


def algorithm_scalars() -> dict[str, float]:
    """Every algorithm's scalars (name -> default) in table order; names must not repeat."""
    out: dict[str, float] = {}
    for name, algo in ALGORITHMS.items():
        for scalar, default in algo.scalars.items():
            if scalar in out:
                raise ValueError(f"algos.registry: scalar {scalar!r} of {name!r} is already another "
                                 f"algorithm's; scalar names must be unique")
            out[scalar] = float(default)
        if algo.multiplier_init is not None and algo.multiplier_init not in algo.scalars:
            raise ValueError(f"algos.registry: {name!r} multiplier_init {algo.multiplier_init!r} "
                             f"is not one of its scalars {sorted(algo.scalars)}")
        if algo.hooks is None and algo.loss is None:
            raise ValueError(f"algos.registry: {name!r} names neither a loss (simple form) nor hooks "
                             f"(general form)")
    return out
