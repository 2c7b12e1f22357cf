"""The off-policy core (CRAX's SAC, after Brax): one update, a jitted chunk of updates, init and evaluation.

It offers the PPO core's program interface (algos/learning.py `Programs`: init, a chunk of updates,
evaluate with noise scale 1 and 0), so packs, checkpoints, run folders, the trace and the final
evaluation treat both cores alike. One update (`training_step`) reads as Brax's SAC does:

1. Every env takes one step with the current policy (z ~ N(mu, sigma), the env gets tanh(z));
   finished episodes go to the iterate log; the observation normaliser folds the step in.
2. The N transitions go into the run's replay buffer (`Replay`, on the device, a ring of
   `replay_size` transitions: the oldest are overwritten).
3. Once the buffer holds `min_replay_size` transitions: `grad_updates_per_step` gradient steps,
   each on `replay_batch_size` transitions sampled uniformly (with replacement), all four parts
   from the state at the step's start, as CRAX does: the temperature (log alpha toward the
   target entropy -A/2), the reward critics (two Q networks, soft target), the cost critics
   (the same without the entropy term, unscaled cost) where the algorithm has them, and the
   actor (alpha log pi - min Q + lambda min Q_C); then the target networks move by Polyak
   averaging (tau) and the algorithm's multiplier by its `Hooks.update` on the batch's mean cost.

Time-limit ends are not terminations: a truncated transition carries no critic loss (CRAX masks
it), a terminal one has no bootstrap (`soft_target`). An algorithm (algos/sac_lag.py) owns only its
multiplier state; `Hooks.init`, `update` and `multiplier` act on it, and the core's `trace`
prepends the temperature (the `sac_alpha` column) to what the algorithm's trace gives.
"""
from __future__ import annotations

from typing import Any, NamedTuple

import jax
import jax.numpy as jnp

from algos import distribution as dist
from algos import registry
from algos.config import Hyper, TrainConfig
from algos.interface import Hooks, update_stats
from algos.learning import (ADAM, IterateLog, Learner, LossMetrics, Programs, UpdateSummary, adam_step, env_batch,
                            evaluate_policy, make_env, run_chunk, trace_values, with_matmul_precision)
from algos.networks import apply_mlp, init_mlp
from algos.normalizer import Normalizer, init_normalizer, normalize, update_normalizer
from algos.trace_schema import LOSS_METRICS
from recorders.jax_recorder import advance, builtin_finished, no_episodes

N_CRITICS = 2  # Brax's SAC: two Q networks, the target takes their minimum


class Replay(NamedTuple):
    """A run's replay buffer: `replay_size` rows (leading axis), the newest `size` of them filled."""

    obs: jnp.ndarray  # [R, O] observation (raw: normalised when sampled, with the normaliser of that step)
    action: jnp.ndarray  # [R, A] the action the env got, tanh(z)
    reward: jnp.ndarray  # [R]
    cost: jnp.ndarray  # [R]
    discount: jnp.ndarray  # [R] 0 where the episode ended (no bootstrap), else 1
    keep: jnp.ndarray  # [R] 0 where it ended by the time limit (no critic loss), else 1
    next_obs: jnp.ndarray  # [R, O] the observation after the step (the episode's last where it ended)
    position: jnp.ndarray  # int32: the row the next transition goes to
    size: jnp.ndarray  # int32: rows filled


class TemperedState(NamedTuple):
    """The algorithm state as the core carries it: the temperature beside the algorithm's own."""

    log_alpha: jnp.ndarray
    alpha_opt: Any
    own: Any  # the algorithm's state (its Hooks.init)


class TrainState(NamedTuple):
    params: dict  # "policy", "q" (N_CRITICS MLPs) and, with a cost critic, "cost_q"
    target: dict  # the target networks: "q" and "cost_q"
    opt_state: Any  # Adam over params (one per part in CRAX; Adam is elementwise, so the same)
    normalizer: Normalizer
    env_state: Any
    key: jnp.ndarray
    algo_state: TemperedState
    pending: Any  # per env, the first episode it finished since the last logged iterate
    update: jnp.ndarray  # int32: updates done (one env step of every env each)
    iterates: jnp.ndarray
    last_metrics: jnp.ndarray  # float32 [len(LOSS_METRICS)]
    replay: Replay
    transform_state: Any = ()  # no observation transforms on this core


def replay_bytes(config: TrainConfig, obs_size: int, action_size: int) -> int:
    """Device bytes of one run's replay buffer (float32 rows: obs, next obs, action, 4 scalars)."""
    return 4 * config.replay_size * (2 * obs_size + action_size + 4)


# ---- networks -------------------------------------------------------------------------------

def init_networks(key, obs_size: int, action_size: int, hidden: tuple, with_cost: bool) -> dict:
    """Policy (mean and raw scale per action) and N_CRITICS Q networks on (obs, action), each of
    the given hidden sizes; a cost critic of the same shape with its own key (CRAX)."""
    k_policy, k_q, k_cost = jax.random.split(key, 3)

    def critics(k):
        return [init_mlp(one, (obs_size + action_size, *hidden, 1)) for one in jax.random.split(k, N_CRITICS)]

    params = {"policy": init_mlp(k_policy, (obs_size, *hidden, 2 * action_size)), "q": critics(k_q)}
    if with_cost:
        params["cost_q"] = critics(k_cost)
    return params


def q_values(nets: list, obs, action, activation: str):
    """[..., N_CRITICS]: each critic's value of the (normalised) observation and the action."""
    x = jnp.concatenate([obs, action], axis=-1)
    return jnp.concatenate([apply_mlp(net, x, activation) for net in nets], axis=-1)


def policy_dist(learner: Learner, policy_params, obs_normalized):
    return dist.split_output(apply_mlp(policy_params, obs_normalized, learner.config.offpolicy_activation))


def sample_action(learner: Learner, policy_params, obs_normalized, key):
    """(tanh(z), log pi of it, sigma) for z sampled from the policy at the observations."""
    mu, sigma = policy_dist(learner, policy_params, obs_normalized)
    z = dist.sample_pre_tanh(key, mu, sigma)
    return jnp.tanh(z), dist.log_prob(z, mu, sigma), sigma


# ---- the losses -----------------------------------------------------------------------------

def soft_target(reward, discount, next_q_min, next_log_prob, alpha, gamma):
    """The critics' target r + gamma * discount * (min Q'(s', a') - alpha log pi(a'|s')), no
    gradient; discount 0 ends the sum at a terminal step. For the cost critics alpha is 0."""
    return jax.lax.stop_gradient(reward + discount * gamma * (next_q_min - alpha * next_log_prob))


def critic_error(q, target, keep):
    """0.5 * mean squared error of every critic's q [B, N_CRITICS] to the target [B]; a step
    ended by the time limit (keep 0) carries none, as in CRAX."""
    return 0.5 * jnp.mean(jnp.square((q - target[:, None]) * keep[:, None]))


def temperature_loss(log_alpha, log_prob, target_entropy):
    """alpha * (-log pi - target entropy), the entropy term held fixed: alpha grows while the
    policy's entropy is below the target and shrinks above it."""
    return jnp.mean(jnp.exp(log_alpha) * jax.lax.stop_gradient(-log_prob - target_entropy))


class Batch(NamedTuple):
    obs: jnp.ndarray  # normalised
    next_obs: jnp.ndarray  # normalised
    action: jnp.ndarray
    reward: jnp.ndarray
    cost: jnp.ndarray
    discount: jnp.ndarray
    keep: jnp.ndarray


def losses(trained: dict, params: dict, target: dict, batch: Batch, alpha, lam, keys, learner: Learner, h: Hyper):
    """(critic + cost critic + actor loss, their parts): each part's gradient reaches only its own
    networks in `trained`; the others are read from `params`, the state at the step's start."""
    act, with_cost = learner.config.offpolicy_activation, learner.with_cost
    k_next, k_actor = keys
    next_action, next_log_prob, _ = sample_action(learner, params["policy"], batch.next_obs, k_next)

    def critic_loss(name, reward, entropy_alpha):
        next_q = jnp.min(q_values(target[name], batch.next_obs, next_action, act), axis=-1)
        y = soft_target(reward, batch.discount, next_q, next_log_prob, entropy_alpha, h.discount)
        return critic_error(q_values(trained[name], batch.obs, batch.action, act), y, batch.keep)

    value_loss = critic_loss("q", batch.reward * h.reward_scaling, alpha)
    cost_loss = critic_loss("cost_q", batch.cost, 0.0) if with_cost else jnp.float32(0.0)
    action, log_prob, sigma = sample_action(learner, trained["policy"], batch.obs, k_actor)
    objective = alpha * log_prob - jnp.min(q_values(params["q"], batch.obs, action, act), axis=-1)
    if with_cost:
        objective = objective + lam * jnp.min(q_values(params["cost_q"], batch.obs, action, act), axis=-1)
    actor_loss = jnp.mean(objective)
    nan = jnp.float32(jnp.nan)
    metrics = LossMetrics(policy_loss=actor_loss, value_loss=value_loss,
                          cost_value_loss=cost_loss if with_cost else nan, entropy=-jnp.mean(log_prob),
                          approx_kl=nan, action_std=jnp.mean(sigma))
    return value_loss + cost_loss + actor_loss, metrics.flat()


def gradient_step(learner: Learner, norm: Normalizer, h: Hyper, carry, xs):
    """One gradient step of every part on one sampled batch (see the module docstring)."""
    params, target, opt_state, algo = carry
    rows, key = xs
    k_alpha, k_next, k_actor = jax.random.split(key, 3)
    on = learner.config.normalize_observations
    batch = Batch(**{**rows, "obs": normalize(norm, rows["obs"], on), "next_obs": normalize(norm, rows["next_obs"], on)})
    hooks = learner.hooks
    alpha = jnp.exp(algo.log_alpha)
    lam = jnp.float32(0.0) if hooks.multiplier is None else hooks.multiplier(algo.own, h)

    _, log_prob, _ = sample_action(learner, params["policy"], batch.obs, k_alpha)
    target_entropy = -0.5 * batch.action.shape[-1]
    alpha_grad = jax.grad(temperature_loss)(algo.log_alpha, log_prob, target_entropy)
    log_alpha, alpha_opt = adam_step(algo.log_alpha, algo.alpha_opt, alpha_grad, h.alpha_learning_rate)

    grads, metrics = jax.grad(losses, has_aux=True)(params, params, target, batch, alpha, lam, (k_next, k_actor),
                                                    learner, h)
    params, opt_state = adam_step(params, opt_state, grads, h.learning_rate)
    target = jax.tree_util.tree_map(lambda t, p: (1.0 - h.tau) * t + h.tau * p, target,
                                    {name: params[name] for name in target})
    own = algo.own
    if hooks.update is not None:
        own = hooks.update(own, update_stats(jnp.mean(batch.cost), h, learner.config.episode_length), h)
    return (params, target, opt_state, TemperedState(log_alpha, alpha_opt, own)), metrics


# ---- the replay buffer ------------------------------------------------------------------------

def empty_replay(size: int, obs_size: int, action_size: int) -> Replay:
    zeros = lambda *shape: jnp.zeros((size, *shape), jnp.float32)
    return Replay(zeros(obs_size), zeros(action_size), zeros(), zeros(), zeros(), zeros(), zeros(obs_size),
                  jnp.int32(0), jnp.int32(0))


def insert(replay: Replay, rows: dict) -> Replay:
    """The N transitions `rows` (each [N, ...]) written at the next N rows of the ring."""
    capacity = replay.obs.shape[0]
    n = rows["obs"].shape[0]
    at = (replay.position + jnp.arange(n, dtype=jnp.int32)) % capacity
    filled = {name: getattr(replay, name).at[at].set(rows[name]) for name in rows}
    return replay._replace(**filled, position=(replay.position + n) % capacity,
                           size=jnp.minimum(replay.size + n, capacity))


ROW_FIELDS = Replay._fields[:7]  # a transition's fields (the rest is the ring's bookkeeping)


def sample(replay: Replay, key, steps: int, batch_size: int) -> dict:
    """`steps` batches of `batch_size` rows drawn uniformly from the filled ones (each [steps, B, ...])."""
    rows = jax.random.randint(key, (steps, batch_size), 0, jnp.maximum(replay.size, 1))
    return {name: getattr(replay, name)[rows] for name in ROW_FIELDS}


# ---- one update ---------------------------------------------------------------------------------

def training_step(learner: Learner, state: TrainState, log: IterateLog, h: Hyper):
    """One update: every env steps once, the replay buffer takes the steps, then the gradient steps."""
    cfg = learner.config
    key, k_act, k_sample, k_sgd = jax.random.split(state.key, 4)
    multiplier, state_columns = trace_values(learner, state.algo_state, (), h)

    # 1. act and step; finished episodes go to the log
    env_state = state.env_state
    on = cfg.normalize_observations
    action, _, _ = sample_action(learner, state.params["policy"], normalize(state.normalizer, env_state.obs, on), k_act)
    next_env = learner.env_step(env_state, action)
    pending, rows, count = advance(state.pending, builtin_finished(next_env), log[1:], log.count,
                                   (state.update, jnp.int32(0), multiplier, state.last_metrics, state_columns))
    log = IterateLog(count, *rows)
    norm = update_normalizer(state.normalizer, env_state.obs) if on else state.normalizer

    # 2. the transitions into the replay buffer
    replay = insert(state.replay, {
        "obs": env_state.obs, "action": action, "reward": next_env.reward, "cost": next_env.cost,
        "discount": 1.0 - next_env.done.astype(jnp.float32), "keep": 1.0 - next_env.truncated.astype(jnp.float32),
        "next_obs": next_env.terminal_obs})

    # 3. the gradient steps, once the buffer holds min_replay_size transitions
    def train(_):
        batches = sample(replay, k_sample, cfg.grad_updates_per_step, cfg.replay_batch_size)
        carry, metrics = jax.lax.scan(
            lambda c, xs: gradient_step(learner, norm, h, c, xs),
            (state.params, state.target, state.opt_state, state.algo_state),
            (batches, jax.random.split(k_sgd, cfg.grad_updates_per_step)))
        return (*carry, jnp.mean(metrics, axis=0))

    def wait(_):
        return (state.params, state.target, state.opt_state, state.algo_state,
                jnp.full((len(LOSS_METRICS),), jnp.nan, jnp.float32))

    params, target, opt_state, algo_state, metrics = jax.lax.cond(replay.size >= cfg.min_replay_size, train, wait,
                                                                  None)
    new_state = TrainState(params, target, opt_state, norm, next_env, key, algo_state, pending, state.update + 1,
                           state.iterates, metrics, replay)
    summary = UpdateSummary(jnp.mean(next_env.cost), trace_values(learner, algo_state, (), h)[0])
    return new_state, log, summary


# ---- building the programs ------------------------------------------------------------------------

def tempered(hooks: Hooks) -> Hooks:
    """The algorithm's hooks with a trace of the core's TemperedState: (multiplier, alpha, *own columns)."""
    def trace(state: TemperedState, transform_state, h):
        multiplier, *columns = hooks.trace(state.own, transform_state, h)
        return (multiplier, jnp.exp(state.log_alpha), *columns)

    return hooks._replace(trace=trace)


def make_learner(cfg: TrainConfig, env, batched: bool = False) -> Learner:
    spec = registry.get(cfg.algo)
    return Learner(config=cfg, hooks=tempered(spec.hooks_obj), env_reset=env_batch(env.reset, batched),
                   env_step=env_batch(env.step, batched), with_cost=spec.uses_cost_critic, cost_by_algo=None,
                   state_columns=spec.state_columns)


def init(learner: Learner, action_size: int, obs_size: int, seed, h: Hyper) -> TrainState:
    cfg = learner.config
    key = jax.random.PRNGKey(seed)
    k_params, k_env, k_run = jax.random.split(key, 3)
    params = init_networks(k_params, obs_size, action_size, cfg.offpolicy_hidden, learner.with_cost)
    target = {name: params[name] for name in ("q", "cost_q") if name in params}
    log_alpha = jnp.float32(0.0)
    algo_state = TemperedState(log_alpha, ADAM.init(log_alpha), learner.hooks.init(h))
    return TrainState(params, target, ADAM.init(params), init_normalizer(obs_size),
                      learner.env_reset(jax.random.split(k_env, cfg.num_envs)), k_run, algo_state,
                      no_episodes(cfg.num_envs), jnp.int32(0), jnp.int32(0),
                      jnp.full((len(LOSS_METRICS),), jnp.nan, jnp.float32),
                      empty_replay(cfg.replay_size, obs_size, action_size))


def evaluate(learner: Learner, state: TrainState, seed, noise_scale, h: Hyper):
    """The final policy on `eval_episodes` fresh layouts (algos.learning.evaluate_policy)."""
    on = learner.config.normalize_observations
    return evaluate_policy(
        learner, lambda obs: policy_dist(learner, state.params["policy"], normalize(state.normalizer, obs, on)),
        seed, noise_scale, h)


def build_programs(config: TrainConfig, env=None, batched: bool = False, shared: bool | None = None) -> Programs:
    """The (unjitted) init / chunk / evaluate of `config`'s static part (the PPO core's
    build_programs' interface; an off-policy algorithm always has a program of its own, so `shared` changes nothing)."""
    env = env if env is not None else make_env(config)
    learner = make_learner(config.static_key(), env, batched)
    precise = with_matmul_precision(config.matmul_precision)

    def chunk(state, h, num_updates):
        return run_chunk(learner, batched, state, h, num_updates, lambda st, log: training_step(learner, st, log, h))

    return Programs(init=precise(lambda seed, h: init(learner, env.action_size, env.observation_size, seed, h)),
                    chunk=precise(chunk), evaluate=precise(lambda *args: evaluate(learner, *args)))
