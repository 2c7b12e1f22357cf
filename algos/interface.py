"""The algorithm interface: what an algorithm may own and replace, on either core.

On the off-policy core (algos/offpolicy.py) an algorithm owns only its state, `init`, `update`
(once per gradient step, from the sampled batch's mean cost), `multiplier` and `trace`; the
rest below is the PPO core's (algos/core.py).

An algorithm is an `Hooks` object (the general form, named by its registry entry's `hooks`)
or a policy loss plus a scalar multiplier update (the simple form, adapted to `Hooks` by
`simple_hooks`). Everything an algorithm owns lives in the training state, so it is
checkpointed with it and a resumed run is bitwise the uninterrupted one:

* its own **state**, any pytree of arrays: `init(h)` makes it, `update(state, stats, h)`
  moves it once per update after the SGD epochs (stats: the batch's mean per-step cost c, the
  violation c - d/T, the episodes that ended in its rollout and the rollout itself),
  `trace(state, transform_state, h)` gives the trace's `multiplier` and the registry entry's
  `state_columns` once per logged iterate (the values at the start of the
  update during whose rollout the iterate completed);
* its **policy loss** for one minibatch, `loss(x: LossInputs, h)`, minimised by the core's
  SGD epochs together with the critics' losses; x.state is the state and x.multiplier what
  `multiplier(state, h)` gives (0 without it), both constants;
* optionally an **observation/reward transform** of the task (`EnvTransform`, e.g. Saute's
  remaining budget): per-env state carried through the rollout and the evaluation, extra
  observation entries the networks and the normaliser see, and the reward the critics and
  advantages are trained on (episode logs keep the task's own return and cost);
* optionally a **shield** (`act`): the rollout's env gets the action of
  `act(state, obs, tanh(z), h, cost, key) -> (action, record)` instead of the policy's action
  tanh(z) (PPO trains on z, the shield being part of the task as the policy sees it; the final
  evaluation acts through it too, in both phases, as deployed). `cost` [N] is the observed cost
  of the current state (the step cost that led into it; 0 at an episode's first state, as a
  reset reports it), `key` a
  PRNG key of the step; `record`, any pytree of per-env arrays, reaches `update` stacked over
  the rollout's steps as `UpdateStats.act_record`;
* optionally a **seeded init** (`keyed_init`): `init(h, key)` gets a PRNG key of the run (from
  its seed) to initialise what it learns;
* optionally a **policy step** replacing the SGD policy update (e.g. CPO's trust-region step):
  `policy_step(x: PolicyStepInputs, h)` runs once per update on the whole batch before the
  SGD epochs, which then fit the critics only (the policy loss and entropy bonus are left out,
  so Adam leaves the policy parameters exactly as the step set them).

Bounds, seeds and every algorithm scalar are runtime values (`Hyper`); the hooks must keep
them traced (no Python branching on them) and loop with `lax` loops, never over env steps.
"""
from __future__ import annotations

from typing import Any, Callable, NamedTuple

import jax
import jax.numpy as jnp


class AlgoState(NamedTuple):
    """The simple form's state: one multiplier and the latest violation."""

    multiplier: jnp.ndarray  # PPO-Lag lambda, P3O kappa, FOCOPS nu; 0 for PPO (the loss's x.multiplier)
    last_violation: jnp.ndarray  # c - d/T of the latest update (P3O's Delta: x.state.last_violation)


class LossInputs(NamedTuple):
    """What an algorithm's policy loss sees for one minibatch of B sequences of U steps. The
    multiplier and the state are constants for the gradient; the distribution and the values
    carry it (a loss term on `values` trains the reward critic)."""

    ratio: jnp.ndarray  # [B, U] pi / pi_old of the actions taken
    log_ratio: jnp.ndarray  # [B, U] log(pi / pi_old)
    adv: jnp.ndarray  # [B, U] reward advantages, standardised over the minibatch
    cost_adv: jnp.ndarray  # [B, U] raw cost advantages (zeros without a cost critic)
    multiplier: jnp.ndarray  # [] Hooks.multiplier of the state (0 without one)
    state: Any = None  # the algorithm's own state at the start of the update
    obs: Any = None  # [B, U, O] the policy's observations, normalised
    mu: Any = None  # [B, U, A] the policy's pre-tanh Gaussian: mean
    sigma: Any = None  # [B, U, A] and standard deviation (algos.distribution)
    values: Any = None  # [B, U] the reward critic's values
    cost_values: Any = None  # [B, U] the cost critic's values (zeros without one)


class UpdateStats(NamedTuple):
    """Once per update, of the batch just collected ([S, N]: rollout steps x envs)."""

    mean_step_cost: jnp.ndarray  # c: mean per-step cost over every transition of the batch
    violation: jnp.ndarray  # c - d/T
    ended: Any = None  # bool [S, N]: an episode ended at this step (its cost in ended_cost)
    ended_cost: Any = None  # float32 [S, N]: the ended episode's cost (meaningful where ended)
    obs: Any = None  # [S, N, O] policy observations of the rollout
    raw_action: Any = None  # [S, N, A] pre-tanh actions sampled (before a Hooks.act correction)
    step_cost: Any = None  # [S, N] the cost of each step
    act_record: Any = None  # the shield's (Hooks.act) per-step records, each [S, N, ...]; () without one
    episode_length: Any = None  # T (so an update may scale its step per episode, as SAC-Lag's does)


class EnvTransform(NamedTuple):
    """An observation/reward transform of the task with per-env state (leading axis: envs)."""

    extra_obs: int  # observation entries appended (static)
    init: Callable  # (n, h) -> transform state of n fresh envs
    observe: Callable  # (tstate, obs [n, O], h) -> policy observation [n, O + extra_obs]
    step: Callable  # (tstate, env state after the step [n], h) -> (tstate, training reward [n])


class PolicyStepInputs(NamedTuple):
    """The whole batch for a replacement of the SGD policy step ([S, U] = sequences x steps)."""

    params: Any  # the policy network's parameters before the step
    dist: Callable  # (policy params, obs [..., O]) -> (mu, sigma); normalises with the rollout's normaliser
    obs: jnp.ndarray  # [S, U, O] policy observations (raw; `dist` normalises)
    raw_action: jnp.ndarray  # [S, U, A] pre-tanh actions taken
    log_prob: jnp.ndarray  # [S, U] their log-probabilities under the behaviour policy
    adv: jnp.ndarray  # [S, U] reward advantages (GAE of scaled rewards with the critics before the epochs)
    cost_adv: jnp.ndarray  # [S, U] raw cost advantages (zeros without a cost critic)
    state: Any  # the algorithm's state
    stats: UpdateStats  # of this batch
    key: jnp.ndarray  # a PRNG key of the step


class Hooks(NamedTuple):
    """One algorithm on the PPO core (the general form; see the module docstring)."""

    init: Callable  # (h) -> state pytree
    trace: Callable  # (state, transform state, h) -> (multiplier, *state_columns), float32 scalars
    update: Callable | None = None  # (state, stats: UpdateStats, h) -> state, once per update
    loss: Callable | None = None  # (x: LossInputs, h) -> scalar policy loss of one minibatch
    policy_step: Callable | None = None  # (x: PolicyStepInputs, h) -> (policy params, state, (loss, entropy, kl))
    transform: EnvTransform | None = None
    act: Callable | None = None  # (state, obs [N, O], action [N, A], h, cost [N], key) -> (env action, record)
    keyed_init: bool = False  # True: init is (h, key) -> state, key a PRNG key of the run
    multiplier: Callable | None = None  # (state, h) -> the loss's LossInputs.multiplier; None: 0


def update_stats(mean_step_cost, h, episode_length: int, *rollout) -> UpdateStats:
    """c and c - d/T in float32 (d/T: the per-step bound, T the episode length), and the
    rollout's fields (UpdateStats after `violation`) where given."""
    cost = jnp.asarray(mean_step_cost, jnp.float32)
    return UpdateStats(cost, cost - h.bound / episode_length, *rollout).\
        _replace(episode_length=jnp.float32(episode_length))


def simple_hooks(spec) -> Hooks:
    """The simple form (a loss, an optional multiplier update) as `Hooks` with `AlgoState`."""
    update_fn, multiplier_init = spec.update_fn, spec.multiplier_init

    def init(h):
        initial = getattr(h, multiplier_init) if multiplier_init is not None else jnp.float32(0.0)
        return AlgoState(jnp.asarray(initial, jnp.float32), jnp.float32(0.0))

    def update(state: AlgoState, stats: UpdateStats, h):
        new = state.multiplier if update_fn is None else update_fn(state.multiplier, stats.violation, h)
        return AlgoState(jnp.asarray(new, jnp.float32), stats.violation)

    def multiplier(state: AlgoState, h):
        return state.multiplier

    def trace(state: AlgoState, transform_state, h):
        return (state.multiplier,)

    return Hooks(init=init, trace=trace, update=update, loss=spec.loss_fn, multiplier=multiplier)


def algo_choice(h):
    """The runtime index of the algorithm a shared program runs (Hyper.algo_index) as int32."""
    return jnp.asarray(h.algo_index, jnp.int32)


def shared_hooks(specs) -> Hooks:
    """Several simple-form algorithms as one `Hooks` (their `AlgoState`s have one shape): init,
    update and loss pick the algorithm by `algo_choice(h)` with `lax.switch`, a real branch where
    the index is one run's (a sequential program), so only the chosen algorithm's code runs."""
    singles = [simple_hooks(spec) for spec in specs]

    def init(h):
        return jax.lax.switch(algo_choice(h), [one.init for one in singles], h)

    def update(state: AlgoState, stats: UpdateStats, h):
        return jax.lax.switch(algo_choice(h), [one.update for one in singles], state, stats, h)

    def loss(x: LossInputs, h):
        return jax.lax.switch(algo_choice(h), [one.loss for one in singles], x, h)

    return Hooks(init=init, trace=singles[0].trace, update=update, loss=loss, multiplier=singles[0].multiplier)
