"""The PPO core (CRAX's, after Brax): one update, a jitted chunk of updates, init and evaluation.

One update (`training_step` below) reads as the algorithm does on paper:

1. `collect_rollout`: `unrolls_per_update` x `unroll_length` steps of all N envs with the
   current policy (`act`, the env step, `record_step`); each finished episode goes to the
   iterate log (the recorder users get, recorders.jax_recorder.advance).
2. `rollout_batch`: the observation normaliser folds the rollout in, and the rollout becomes
   sequences of `unroll_length` steps, the unit of SGD.
3. Only for an algorithm with its own policy step (CPO): that step on the whole batch.
4. `sgd_epochs`: `num_epochs` epochs, each a shuffle into `num_minibatches` minibatches and one
   Adam step per minibatch on `minibatch_loss`: the algorithm's policy loss on GAE advantages
   (computed inside the loss with the critics as they are, as Brax does) plus the critics'
   losses, minus the entropy bonus.
5. The algorithm's own update (`Hooks.update`: a multiplier, a penalty, PID terms, ...).

An algorithm changes this path only through its `Hooks` (algos/interface.py), whose optional
parts default to doing nothing: a policy loss (PPO-Lag: algos/ppo_lag.py), an update of its
own state, an observation/reward transform of the task, a shield on the rollout's actions, or
its own policy step on the whole batch in place of the SGD policy loss (CPO).

What both cores share (the chunk loop, the evaluation, `Learner`, `Programs`) is in
algos/learning.py; the off-policy core beside this one is algos/offpolicy.py. `h` is always the
run's `Hyper`, a traced argument, as the seed is.
"""
from __future__ import annotations

from typing import Any, NamedTuple

import jax
import jax.numpy as jnp

from algos import distribution as dist
from algos import registry
from algos.config import Hyper, TrainConfig
from algos.interface import LossInputs, PolicyStepInputs, algo_choice, shared_hooks, update_stats
from algos.learning import (ADAM, IterateLog, Learner, LossMetrics, Programs, UpdateSummary, adam_step, env_batch,
                            evaluate_policy, make_env, policy_observation, run_chunk, trace_values, training_reward,
                            with_matmul_precision)
from algos.networks import apply_mlp, init_params
from algos.normalizer import Normalizer, init_normalizer, normalize, update_normalizer
from algos.ppo import standardise
from algos.trace_schema import LOSS_METRICS, POLICY_STEP_METRICS
from recorders.jax_recorder import Finished, advance, builtin_finished, no_episodes

ALGO_INIT_SALT = 0xA160_5EED & 0x7FFFFFFF  # the key of an algorithm's seeded init (Hooks.keyed_init)


# ---- the state of a run ------------------------------------------------------------------

class TrainState(NamedTuple):
    params: dict  # "policy", "value" and (with a cost critic) "cost_value" MLPs
    opt_state: Any
    normalizer: Normalizer
    env_state: Any  # the task's state of the N training envs
    key: jnp.ndarray
    algo_state: Any  # the algorithm's own state (interface.AlgoState for the simple form)
    pending: Finished  # per env, the first episode it finished since the last logged iterate
    update: jnp.ndarray  # int32: updates done
    iterates: jnp.ndarray  # int32: iterates logged so far
    last_metrics: jnp.ndarray  # float32 [len(LOSS_METRICS)]: the latest update's LossMetrics, flat
    transform_state: Any = ()  # per-env state of the algorithm's observation/reward transform (() without one)


class Transition(NamedTuple):
    """One step of the rollout ([S, N] stacked), or of a sequence ([B, U])."""

    obs: jnp.ndarray  # the policy's observation (a sequence holds U + 1: the last one bootstraps)
    raw_action: jnp.ndarray  # the pre-tanh sample z (the env got tanh(z), or a shield's correction)
    log_prob: jnp.ndarray  # of tanh(z) under the behaviour policy
    reward: jnp.ndarray  # the training reward (an algorithm's transform may change the task's)
    cost: jnp.ndarray
    done: jnp.ndarray
    truncated: jnp.ndarray  # ended by the time limit, not by the task


# ---- acting ------------------------------------------------------------------------------

def policy_distribution(learner: Learner, params, norm: Normalizer, obs):
    """(mu, sigma) [..., A] of the pre-tanh Gaussian at policy observations [..., O]."""
    return dist.split_output(apply_mlp(params["policy"], normalize(norm, obs, learner.normalize), learner.activation))


def shielded_action(learner: Learner, algo_state, obs, action, h: Hyper, env_state, key):
    """(the action the env gets, the shield's record): the policy's action and () without a
    shield (Hooks.act); a shield sees the cost of the current state, 0 at an episode's start."""
    if learner.hooks.act is None:
        return action, ()
    current_cost = jnp.where(env_state.done, 0.0, env_state.cost)  # a fresh episode's: 0, as reset says
    return learner.hooks.act(algo_state, obs, action, h, current_cost, jax.random.fold_in(key, 1))


# ---- 1. collect the rollout ---------------------------------------------------------------

def act(learner: Learner, params, norm: Normalizer, algo_state, transform_state, env_state, key, h: Hyper):
    """The policy acts in the N envs: (policy observations [N, O], pre-tanh sample z [N, A], mu,
    sigma, the action the env gets [N, A], the shield's record)."""
    obs = policy_observation(learner, transform_state, env_state.obs, h)
    mu, sigma = policy_distribution(learner, params, norm, obs)
    z = dist.sample_pre_tanh(key, mu, sigma)
    action, record = shielded_action(learner, algo_state, obs, jnp.tanh(z), h, env_state, key)
    return obs, z, mu, sigma, action, record


def record_step(learner: Learner, next_env_state, transform_state, pending: Finished, log: IterateLog,
                obs, z, mu, sigma, logged_row: tuple, h: Hyper):
    """After the env step: (transform state, pending episodes, log, the Transition [N], the
    episodes that just ended). An iterate completed here gets `logged_row` beside its episodes."""
    transform_state, reward = training_reward(learner, transform_state, next_env_state, h)
    finished = builtin_finished(next_env_state)
    pending, rows, count = advance(pending, finished, log[1:], log.count, logged_row)
    transition = Transition(obs, z, dist.log_prob(z, mu, sigma), reward, next_env_state.cost,
                            next_env_state.done, next_env_state.truncated)
    return transform_state, pending, IterateLog(count, *rows), transition, finished


def collect_rollout(learner: Learner, state: TrainState, log: IterateLog, key, logged: tuple, h: Hyper):
    """S = unrolls_per_update x unroll_length steps of the N envs with the current policy. Each
    env's finished episodes go to `log` (`logged`: what the trainer adds to an iterate's row:
    multiplier, metrics, state columns). Returns the env, transform and pending-episode state
    after the last step, the log, and stacked over the steps: the transitions ([S, N, ...]), the
    episodes that ended (Finished [S, N]) and the shield's records."""

    def step(carry, step_index):
        env_state, transform_state, pending, log, key = carry
        key, k_act = jax.random.split(key)
        obs, z, mu, sigma, action, record = act(learner, state.params, state.normalizer, state.algo_state,
                                                transform_state, env_state, k_act, h)
        next_env_state = learner.env_step(env_state, action)
        transform_state, pending, log, transition, finished = record_step(
            learner, next_env_state, transform_state, pending, log, obs, z, mu, sigma,
            (state.update, step_index, *logged), h)
        return (next_env_state, transform_state, pending, log, key), (transition, finished, record)

    rollout_steps = learner.config.unrolls_per_update * learner.config.unroll_length
    (env_state, transform_state, pending, log, _), (rollout, ended, records) = jax.lax.scan(
        step, (state.env_state, state.transform_state, state.pending, log, key),
        jnp.arange(rollout_steps, dtype=jnp.int32))
    return env_state, transform_state, pending, log, rollout, ended, records


# ---- 2. the batch: the normaliser, sequences, the algorithm's statistics ----------------------

def rollout_sequences(rollout: Transition, last_obs, unrolls: int, unroll_length: int) -> Transition:
    """[S, N, ...] rollout (S = unrolls x U steps) -> [unrolls * N, U, ...] sequences of U steps;
    a sequence's observations hold U + 1 steps, the last (from the next unroll, or `last_obs`
    [N, O] after the rollout) bootstraps its critics' values."""
    all_obs = jnp.concatenate([rollout.obs, last_obs[None]], axis=0)  # [S + 1, N, O]
    obs_index = jnp.arange(unrolls)[:, None] * unroll_length + jnp.arange(unroll_length + 1)[None, :]

    def to_sequences(x, steps):
        x = x.reshape(unrolls, steps, *x.shape[1:]) if steps == unroll_length else x
        x = jnp.swapaxes(x, 1, 2)  # [unrolls, N, steps, ...]
        return x.reshape(x.shape[0] * x.shape[1], steps, *x.shape[3:])

    return Transition(to_sequences(all_obs[obs_index], unroll_length + 1),
                      *(to_sequences(x, unroll_length) for x in rollout[1:]))


def rollout_batch(learner: Learner, norm: Normalizer, rollout: Transition, ended: Finished, records,
                  transform_state, env_obs, h: Hyper):
    """(normaliser with the rollout folded in, the sequences, UpdateStats of the batch) from a
    rollout and the envs' observations [N, O] after it."""
    cfg = learner.config
    if learner.normalize:
        norm = update_normalizer(norm, rollout.obs)
    last_obs = policy_observation(learner, transform_state, env_obs, h)
    sequences = rollout_sequences(rollout, last_obs, cfg.unrolls_per_update, cfg.unroll_length)
    stats = update_stats(jnp.mean(rollout.cost), h, cfg.episode_length, ended.done, ended.cost, rollout.obs,
                         rollout.raw_action, rollout.cost, records)
    return norm, sequences, stats


# ---- 3. an algorithm's own policy step (CPO), in place of the SGD policy loss -----------------

def algorithm_policy_step(learner: Learner, params, sequences: Transition, norm: Normalizer,
                          rollout_norm: Normalizer, algo_state, stats, key, h: Hyper):
    """(params with the stepped policy, algorithm state, the step's (policy_loss, entropy,
    approx_kl)): Hooks.policy_step on the whole batch, before the critics move (advantages from
    the critics that valued the batch; the policy sees the normaliser its rollout used)."""
    adv, cost_adv = batch_advantages(learner, params, sequences, norm, h)
    step_in = PolicyStepInputs(
        params["policy"], lambda p, o: policy_distribution(learner, {"policy": p}, rollout_norm, o),
        sequences.obs[:, :-1], sequences.raw_action, sequences.log_prob, adv, cost_adv, algo_state, stats, key)
    policy, algo_state, step_metrics = learner.hooks.policy_step(step_in, h)
    return {**params, "policy": policy}, algo_state, step_metrics


# ---- the losses (of phase 4) ------------------------------------------------------------

def gae(rewards, values, bootstrap, done, truncated, discount, lam):
    """Brax's GAE over [B, U] sequences: (value targets vs, advantages), both [B, U] and without
    gradient; `bootstrap` [B] values the step after the last. Truncated steps carry no advantage
    and no bootstrap."""
    truncated = truncated.astype(jnp.float32)
    not_terminal = 1.0 - done.astype(jnp.float32) * (1.0 - truncated)
    keep = 1.0 - truncated
    values_next = jnp.concatenate([values[:, 1:], bootstrap[:, None]], axis=1)
    deltas = (rewards + discount * not_terminal * values_next - values) * keep

    def backward(acc, x):
        delta, nt, k = x
        acc = delta + discount * nt * k * lam * acc
        return acc, acc

    _, acc = jax.lax.scan(backward, jnp.zeros_like(bootstrap), (deltas.T, not_terminal.T, keep.T), reverse=True)
    vs = acc.T + values
    vs_next = jnp.concatenate([vs[:, 1:], bootstrap[:, None]], axis=1)
    advantages = (rewards + discount * not_terminal * vs_next - values) * keep
    return jax.lax.stop_gradient(vs), jax.lax.stop_gradient(advantages)


def critic(params, name: str, obs, rewards, sequences: Transition, h: Hyper, activation: str):
    """(values [B, U+1], GAE targets vs [B, U], advantages [B, U]) of one critic over sequences
    with normalised observations `obs` [B, U+1, O]."""
    values = apply_mlp(params[name], obs, activation)[..., 0]
    vs, adv = gae(rewards, values[:, :-1], values[:, -1], sequences.done, sequences.truncated, h.discount,
                  h.gae_lambda)
    return values, vs, adv


def cost_critic(learner: Learner, params, obs, sequences: Transition, h: Hyper, adv):
    """(cost values [B, U], cost advantages [B, U], the loss term, its logged value): zeros, 0 and
    NaN for an algorithm without a cost critic; in a shared program a `lax.switch` on the algorithm
    skips the critic for those without one (their cost critic parameters get no gradient)."""

    def trained(_):
        cost_values, cost_vs, cost_adv = critic(params, "cost_value", obs, sequences.cost, sequences, h,
                                                learner.activation)
        loss = 0.25 * jnp.mean(jnp.square(cost_vs - cost_values[:, :-1]))
        return cost_values[:, :-1], cost_adv, loss, loss

    def untrained(_):
        return jnp.zeros_like(adv), jnp.zeros_like(adv), jnp.float32(0.0), jnp.float32(jnp.nan)

    if learner.cost_by_algo is None or len(set(learner.cost_by_algo)) == 1:
        return trained(None) if learner.with_cost else untrained(None)
    return jax.lax.switch(algo_choice(h), [trained if cost else untrained for cost in learner.cost_by_algo], None)


class LossConstants(NamedTuple):
    """What the loss holds fixed through one update's epochs (no gradient flows into it)."""

    normalizer: Normalizer  # after this update's rollout
    algo_state: Any  # the algorithm's state at the start of the update
    multiplier: jnp.ndarray  # Hooks.multiplier of that state (0 for an algorithm without one)
    hyper: Hyper


def minibatch_loss(params, sequences: Transition, constants: LossConstants, key, learner: Learner):
    """(loss, LossMetrics) of one minibatch of [B, U] sequences: the algorithm's policy loss
    (Hooks.loss on LossInputs: standardised reward advantages, raw cost advantages) plus each
    critic's 0.25 x mean squared error to its GAE targets, minus `entropy_cost` x the entropy.
    With the algorithm's own policy step (Hooks.policy_step) the loss fits the critics only."""
    h = constants.hyper
    obs = normalize(constants.normalizer, sequences.obs, learner.normalize)  # [B, U+1, O]
    sgd_policy = learner.hooks.policy_step is None
    mu, sigma = dist.split_output(apply_mlp(params["policy"], obs[:, :-1], learner.activation))  # [B, U, A]
    action_std = jax.lax.stop_gradient(jnp.mean(sigma))
    if sgd_policy:
        log_ratio = dist.log_prob(sequences.raw_action, mu, sigma) - sequences.log_prob
        ratio = jnp.exp(log_ratio)
    values, vs, adv = critic(params, "value", obs, sequences.reward * h.reward_scaling, sequences, h,
                             learner.activation)
    value_loss = 0.25 * jnp.mean(jnp.square(vs - values[:, :-1]))
    cost_values, cost_adv, cost_term, cost_value_loss = cost_critic(learner, params, obs, sequences, h, adv)
    if not sgd_policy:  # the policy moved in the algorithm's own step; its entries come from there
        nan = jnp.float32(jnp.nan)
        return value_loss + cost_term, LossMetrics(policy_loss=nan, value_loss=value_loss,
                                                   cost_value_loss=cost_value_loss, entropy=nan, approx_kl=nan,
                                                   action_std=action_std)
    policy_loss = learner.hooks.loss(LossInputs(
        ratio=ratio, log_ratio=log_ratio, adv=standardise(adv), cost_adv=cost_adv,
        multiplier=jax.lax.stop_gradient(constants.multiplier),
        state=jax.lax.stop_gradient(constants.algo_state),
        obs=obs[:, :-1], mu=mu, sigma=sigma, values=values[:, :-1], cost_values=cost_values), h)
    entropy = jnp.mean(dist.entropy(key, mu, sigma))
    total = policy_loss + value_loss + cost_term - h.entropy_cost * entropy
    approx_kl = jnp.mean((ratio - 1.0) - log_ratio)
    return total, LossMetrics(policy_loss=policy_loss, value_loss=value_loss, cost_value_loss=cost_value_loss,
                              entropy=entropy, approx_kl=approx_kl, action_std=action_std)


def flat_loss(params, sequences: Transition, constants: LossConstants, key, learner: Learner):
    """`minibatch_loss` with its metrics flat (the form SGD stacks over minibatches)."""
    total, metrics = minibatch_loss(params, sequences, constants, key, learner)
    return total, metrics.flat()


def batch_advantages(learner: Learner, params, sequences: Transition, norm: Normalizer, h: Hyper):
    """GAE advantages (reward, cost), [B, U] each, of the whole batch with the critics as they are
    (for an algorithm's own policy step); the cost advantage is 0 without a cost critic."""
    obs = normalize(norm, sequences.obs, learner.normalize)
    _, _, adv = critic(params, "value", obs, sequences.reward * h.reward_scaling, sequences, h, learner.activation)
    return adv, cost_critic(learner, params, obs, sequences, h, adv)[1]


# ---- 4. the SGD epochs ---------------------------------------------------------------------

def minibatch_order(learner: Learner, key):
    """One epoch's shuffle: each minibatch's rows of the sequences ([num_minibatches, batch_size],
    a permutation of them all) and a key per minibatch. Only these indices are shuffled; each SGD
    step gathers its own rows (`gather_rows`), so no shuffled copy of the batch is made."""
    cfg = learner.config
    k_perm, k_minibatches = jax.random.split(key)
    order = jax.random.permutation(k_perm, cfg.sequences_per_update)
    return order.reshape(cfg.num_minibatches, cfg.batch_size), jax.random.split(k_minibatches, cfg.num_minibatches)


def gather_rows(sequences: Transition, rows) -> Transition:
    """The sequences at `rows` (any shape of indices: their shape replaces the leading axis)."""
    return jax.tree_util.tree_map(lambda x: x[rows], sequences)


def sgd_epochs(learner: Learner, params, opt_state, sequences: Transition, constants: LossConstants, key):
    """`num_epochs` epochs over the [unrolls * N, U] sequences: each shuffles them into
    `num_minibatches` minibatches of `batch_size` and takes one Adam step per minibatch.
    Returns (params, opt_state, the LossMetrics averaged over every minibatch, flat)."""
    loss_and_grad = jax.value_and_grad(flat_loss, has_aux=True)

    def minibatch_step(carry, xs):
        params, opt_state = carry
        rows, key = xs
        (_, metrics), grads = loss_and_grad(params, gather_rows(sequences, rows), constants, key, learner)
        params, opt_state = adam_step(params, opt_state, grads, constants.hyper.learning_rate)
        return (params, opt_state), metrics

    def epoch(carry, key):
        return jax.lax.scan(minibatch_step, carry, minibatch_order(learner, key))

    (params, opt_state), metrics = jax.lax.scan(epoch, (params, opt_state),
                                                jax.random.split(key, learner.config.num_epochs))
    return params, opt_state, jnp.mean(metrics, axis=(0, 1))


# ---- one update ----------------------------------------------------------------------------

def training_step(learner: Learner, state: TrainState, log: IterateLog, h: Hyper):
    """One PPO update of the run (the phases above, in order): (state, log, UpdateSummary)."""
    hooks = learner.hooks
    key, k_rollout, k_sgd = jax.random.split(state.key, 3)
    multiplier, state_columns = trace_values(learner, state.algo_state, state.transform_state, h)

    # 1. collect the rollout
    env_state, transform_state, pending, log, rollout, ended, records = collect_rollout(
        learner, state, log, k_rollout, (multiplier, state.last_metrics, state_columns), h)

    # 2. the batch: the normaliser folds the rollout in; sequences of unroll_length steps
    norm, sequences, stats = rollout_batch(learner, state.normalizer, rollout, ended, records, transform_state,
                                           env_state.obs, h)

    # 3. an algorithm's own policy step (CPO); the epochs then fit the critics only
    params, algo_state = state.params, state.algo_state
    if hooks.policy_step is not None:
        params, algo_state, step_metrics = algorithm_policy_step(
            learner, params, sequences, norm, state.normalizer, algo_state, stats, jax.random.fold_in(k_sgd, 1), h)

    # 4. the SGD epochs, the multiplier and the algorithm's state held fixed
    loss_multiplier = jnp.float32(0.0) if hooks.multiplier is None else hooks.multiplier(state.algo_state, h)
    constants = LossConstants(norm, state.algo_state, loss_multiplier, h)
    params, opt_state, metrics = sgd_epochs(learner, params, state.opt_state, sequences, constants, k_sgd)
    if hooks.policy_step is not None:  # its policy loss, entropy and KL come from the algorithm's step
        metrics = LossMetrics.from_flat(metrics)._replace(**{
            name: jnp.asarray(value, jnp.float32) for name, value in zip(POLICY_STEP_METRICS, step_metrics)}).flat()

    # 5. the algorithm's own update (multiplier, penalty, ...) from this batch's statistics
    if hooks.update is not None:
        algo_state = hooks.update(algo_state, stats, h)
    new_state = TrainState(params, opt_state, norm, env_state, key, algo_state, pending, state.update + 1,
                           state.iterates, metrics, transform_state)
    summary = UpdateSummary(stats.mean_step_cost, trace_values(learner, algo_state, transform_state, h)[0])
    return new_state, log, summary


# ---- building the programs -----------------------------------------------------------------


def make_learner(cfg: TrainConfig, env, batched: bool = False) -> Learner:
    """The static pieces of `cfg`'s programs (`cfg.algo` may join several with "+": a shared program)."""
    specs = [registry.get(name) for name in cfg.algo.split("+")]
    cost_by_algo = tuple(s.uses_cost_critic for s in specs)
    return Learner(config=cfg, hooks=specs[0].hooks_obj if len(specs) == 1 else shared_hooks(specs),
                   env_reset=env_batch(env.reset, batched), env_step=env_batch(env.step, batched),
                   with_cost=any(cost_by_algo), cost_by_algo=cost_by_algo, state_columns=specs[0].state_columns)


def build_programs(config: TrainConfig, env=None, batched: bool = False, shared: bool | None = None) -> Programs:
    """The (unjitted) init / chunk / evaluate functions of `config`'s static part: built from the
    blanked config, so no runtime value is baked in (algos.programs memoises their compiled form).
    `shared` (default: unbatched): the simple-form algorithms share one program, the algorithm
    being `Hyper.algo_index` (TrainConfig.static_key).

    `batched`: the functions are meant to be vmapped over a pack's members (algos.programs): the
    env step folds the member axis into the env batch (env_batch) and the chunk's budget is a
    mask, not a `cond` (a cond on a per-member value would become a select anyway)."""
    shared = not batched if shared is None else shared
    env = env if env is not None else make_env(config)
    learner = make_learner(config.static_key(shared), env, batched)
    obs_size = env.observation_size + (learner.transform.extra_obs if learner.transform is not None else 0)
    precise = with_matmul_precision(config.matmul_precision)
    return Programs(init=precise(lambda seed, h: init(learner, env.action_size, obs_size, seed, h)),
                    chunk=precise(lambda state, h, num_updates: chunk(learner, batched, state, h, num_updates)),
                    evaluate=precise(lambda *args: evaluate(learner, *args)))


def init(learner: Learner, action_size: int, obs_size: int, seed, h: Hyper) -> TrainState:
    """A run's training state from its seed: fresh networks, envs and algorithm state."""
    cfg, hooks, transform = learner.config, learner.hooks, learner.transform
    key = jax.random.PRNGKey(seed)
    k_params, k_env, k_run = jax.random.split(key, 3)
    params = init_params(k_params, obs_size, action_size, cfg.policy_hidden, cfg.critic_hidden, learner.with_cost)
    env_state = learner.env_reset(jax.random.split(k_env, cfg.num_envs))
    transform_state = () if transform is None else transform.init(cfg.num_envs, h)
    algo_state = hooks.init(h, jax.random.fold_in(key, ALGO_INIT_SALT)) if hooks.keyed_init else hooks.init(h)
    return TrainState(params, ADAM.init(params), init_normalizer(obs_size), env_state, k_run,
                      algo_state, no_episodes(cfg.num_envs), jnp.int32(0), jnp.int32(0),
                      jnp.full((len(LOSS_METRICS),), jnp.nan, jnp.float32), transform_state)


def chunk(learner: Learner, batched: bool, state: TrainState, h: Hyper, num_updates):
    """`chunk_updates` PPO updates, skipping those at or past `num_updates` (a runtime budget)."""
    return run_chunk(learner, batched, state, h, num_updates,
                     lambda state, log: training_step(learner, state, log, h))


def evaluate(learner: Learner, state: TrainState, seed, noise_scale, h: Hyper):
    """The final policy of a PPO-core run on `eval_episodes` fresh layouts (evaluate_policy), as
    deployed: behind its shield (Hooks.act) where the algorithm has one."""
    shield = None if learner.hooks.act is None else (
        lambda obs, action, env_state, key: shielded_action(learner, state.algo_state, obs, action, h, env_state, key)[0])
    return evaluate_policy(learner, lambda obs: policy_distribution(learner, state.params, state.normalizer, obs),
                           seed, noise_scale, h, shield)


