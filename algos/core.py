"""The PPO core: one jitted training chunk (`lax.scan` over updates), initialisation and evaluation.

One update (CRAX/Brax PPO): collect `unrolls_per_update` unrolls of `unroll_length` steps from
all N envs with the current policy, fold the observations into the running normaliser, then
for `num_epochs` epochs shuffle the sequences into `num_minibatches` minibatches and take one
Adam step per minibatch on policy + critic losses (GAE computed inside the loss with the
current critics, as Brax does), then let the algorithm update its own state (multiplier,
penalty, PID terms, ...). An algorithm may also transform the task's observations and rewards
(per-env state carried through rollout and evaluation) and replace the SGD policy step by its
own step on the whole batch (algos/interface.py).

Episode logging happens inside the rollout, through the recorder users get
(recorders.jax_recorder.advance): each env keeps the first episode it finished since the last
logged iterate; once every env has one, those N episodes form an iterate and are written to
the chunk's log buffer together with the update, the multiplier, the algorithm's traced state
columns and the latest losses.

The programs close over the static config only; `Hyper` (bound, learning rates, algorithm
scalars) and the seed are traced arguments.
"""
from __future__ import annotations

from typing import Any, NamedTuple

import jax
import jax.numpy as jnp
import optax

from algos import distribution as dist
from algos.config import Hyper, TrainConfig
from algos import registry
from algos.hooks import standardise
from algos.interface import LossInputs, PolicyStepInputs, algo_choice, shared_hooks, update_stats
from algos.networks import apply_mlp, init_params
from algos.normalizer import Normalizer, init_normalizer, normalize, update_normalizer
from algos.trace_schema import LOSS_METRICS, POLICY_STEP_INDEX
from recorders.jax_recorder import Finished, advance, builtin_finished, keep_first, no_episodes

EVAL_SALT = 0x5EED_E7A1 & 0x7FFFFFFF  # separates evaluation layouts from training layouts
ALGO_INIT_SALT = 0xA160_5EED & 0x7FFFFFFF  # the key of an algorithm's seeded init (Hooks.keyed_init)


class TrainState(NamedTuple):
    params: dict
    opt_state: Any
    normalizer: Normalizer
    env_state: Any
    key: jnp.ndarray
    algo: Any  # the algorithm's own state (interface.AlgoState for the simple form)
    pending: Finished  # per env, the first episode it finished since the last logged iterate
    update: jnp.ndarray  # int32: updates done
    iterates: jnp.ndarray  # int32: iterates logged so far
    last_metrics: jnp.ndarray  # float32 [len(LOSS_METRICS)] of the latest update
    transform: Any = ()  # per-env state of the algorithm's observation/reward transform (() without one)


class IterateLog(NamedTuple):
    """Iterates logged during one chunk (rows beyond `count` are unused); after `count` the
    fields are the row of recorders.jax_recorder.advance: the episodes, then what the trainer adds."""

    count: jnp.ndarray  # int32: iterates completed in the chunk (> capacity means overflow)
    ret: jnp.ndarray  # float32 [C, N]
    cost: jnp.ndarray  # float32 [C, N]
    length: jnp.ndarray  # int32 [C, N]
    update: jnp.ndarray  # int32 [C]: update index during whose rollout the iterate completed
    step: jnp.ndarray  # int32 [C]: rollout step within that update
    multiplier: jnp.ndarray  # float32 [C]
    metrics: jnp.ndarray  # float32 [C, len(LOSS_METRICS)]
    state: jnp.ndarray  # float32 [C, len(state_columns)]: the algorithm's traced state


class UpdateSummary(NamedTuple):
    """Per update, for progress output."""

    mean_step_cost: jnp.ndarray
    multiplier: jnp.ndarray


class Transition(NamedTuple):
    obs: jnp.ndarray
    raw_action: jnp.ndarray
    log_prob: jnp.ndarray
    reward: jnp.ndarray
    cost: jnp.ndarray
    done: jnp.ndarray
    truncated: jnp.ndarray


class Programs(NamedTuple):
    """The pure functions of one static config (jit them to get its compiled programs)."""

    init: Any  # (seed, hyper) -> TrainState
    chunk: Any  # (TrainState, hyper, num_updates) -> (TrainState, IterateLog, UpdateSummary)
    evaluate: Any  # (params, normalizer, seed, noise_scale, hyper) -> (Finished of the eval episodes, first obs)


def gae(rewards, values, bootstrap, done, truncated, discount, lam):
    """Brax's GAE over [B, U] sequences: truncated steps carry no advantage and no bootstrap."""
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


class LossSetup(NamedTuple):
    """What the losses take from the static config: the networks' activation, whether
    observations are normalised, whether a cost critic trains, and the algorithm's hooks (with
    `hooks.policy_step` set the policy moves in the algorithm's own step; SGD fits the critics).
    A shared program (several algorithms, algos.registry.program_algos) holds a cost critic when
    any of them trains one; `cost_by_algo` then says, per runtime algorithm index, whether it does."""

    activation: str
    normalize: bool
    with_cost: bool
    hooks: Any
    cost_by_algo: tuple | None = None


def critic(params, name: str, obs, rewards, mb: Transition, h: Hyper, activation: str):
    """(values [B, U+1], GAE targets vs, advantages) of one critic over [B, U] sequences."""
    values = apply_mlp(params[name], obs, activation)[..., 0]
    vs, adv = gae(rewards, values[:, :-1], values[:, -1], mb.done, mb.truncated, h.discount, h.gae_lambda)
    return values, vs, adv


def minibatch_loss(params, mb: Transition, norm, algo_state, multiplier, h: Hyper, key, setup: LossSetup):
    """The loss of one minibatch of [B, U] sequences and its metrics (trace_schema.LOSS_METRICS):
    the algorithm's policy loss on the standardised reward advantage and the raw cost advantage,
    plus both critics' 0.25 * mean squared GAE-target error, minus the entropy bonus. GAE uses the
    critics as they are (Brax); the multiplier and the algorithm's state are constants here."""
    act = setup.activation
    obs = normalize(norm, mb.obs, setup.normalize)  # [B, U+1, O]
    sgd_policy = setup.hooks.policy_step is None
    mu, sigma = dist.split_output(apply_mlp(params["policy"], obs[:, :-1], act))
    action_std = jax.lax.stop_gradient(jnp.mean(sigma))
    if sgd_policy:
        log_ratio = dist.log_prob(mb.raw_action, mu, sigma) - mb.log_prob
        ratio = jnp.exp(log_ratio)
    values, vs, adv = critic(params, "value", obs, mb.reward * h.reward_scaling, mb, h, act)
    value_loss = 0.25 * jnp.mean(jnp.square(vs - values[:, :-1]))
    cost_adv, cost_term, cost_value_loss = cost_critic_loss(params, obs, mb, h, setup, adv)
    if not sgd_policy:  # the policy moved in the algorithm's own step; its entries come from there
        nan = jnp.float32(jnp.nan)
        return value_loss + cost_term, _metrics(policy_loss=nan, value_loss=value_loss, cost_value_loss=cost_value_loss,
                                 entropy=nan, approx_kl=nan, action_std=action_std)
    state = jax.lax.stop_gradient(algo_state)
    pol_loss = setup.hooks.loss(LossInputs(ratio, log_ratio, standardise(adv), cost_adv,
                                           jax.lax.stop_gradient(multiplier), jnp.float32(0.0), state), h)
    entropy = jnp.mean(dist.entropy(key, mu, sigma))
    total = pol_loss + value_loss + cost_term - h.entropy_cost * entropy
    approx_kl = jnp.mean((ratio - 1.0) - log_ratio)
    return total, _metrics(policy_loss=pol_loss, value_loss=value_loss, cost_value_loss=cost_value_loss,
                           entropy=entropy, approx_kl=approx_kl, action_std=action_std)


def cost_critic_loss(params, obs, mb: Transition, h: Hyper, setup: LossSetup, adv):
    """(cost advantages, the cost critic's loss term, its logged value): zeros, 0 and NaN for an
    algorithm without a cost critic; in a shared program a `lax.switch` on the algorithm skips
    the critic for those without one (their cost critic parameters get no gradient and stay put)."""

    def trained(_):
        cvalues, cvs, cost_adv = critic(params, "cost_value", obs, mb.cost, mb, h, setup.activation)
        loss = 0.25 * jnp.mean(jnp.square(cvs - cvalues[:, :-1]))
        return cost_adv, loss, loss

    def untrained(_):
        return jnp.zeros_like(adv), jnp.float32(0.0), jnp.float32(jnp.nan)

    if setup.cost_by_algo is None or len(set(setup.cost_by_algo)) == 1:
        return trained(None) if setup.with_cost else untrained(None)
    return jax.lax.switch(algo_choice(h), [trained if cost else untrained for cost in setup.cost_by_algo], None)


def _metrics(**values):
    return jnp.stack([values[name] for name in LOSS_METRICS])


def batch_advantages(params, data: Transition, norm, h: Hyper, setup: LossSetup):
    """GAE advantages (reward, cost) of the whole batch with the critics as they are (for an
    algorithm's own policy step); the cost advantage is 0 without a cost critic."""
    obs = normalize(norm, data.obs, setup.normalize)
    _, _, adv = critic(params, "value", obs, data.reward * h.reward_scaling, data, h, setup.activation)
    return adv, cost_critic_loss(params, obs, data, h, setup, adv)[0]


def make_env(config: TrainConfig):
    import envs  # imported here so algos imports without the envs package being built

    return envs.make(config.task, backend=config.backend, level=config.level,
                     episode_length=config.episode_length, **dict(config.env_kwargs))


def env_batch(fn, fold_members: bool = False):
    """`jax.vmap(fn)` over a run's envs. With `fold_members`, a further vmap over a batched
    pack's members folds the member axis into the env axis: the task sees one flat batch of
    P x N envs, so each lazy branch (envs/lazy.py: respawns, the contact solve) stays one
    `cond` over the whole pack instead of becoming a select that computes every branch."""
    over_envs = jax.vmap(fn)
    if not fold_members:
        return over_envs
    fold = jax.custom_batching.custom_vmap(lambda *args: over_envs(*args))

    @fold.def_vmap
    def over_members(axis_size, in_batched, *args):
        args = jax.tree_util.tree_map(
            lambda x, b: x if b else jnp.broadcast_to(x, (axis_size,) + jnp.shape(x)), args, tuple(in_batched))
        out = over_envs(*jax.tree_util.tree_map(merge_member_axis, args))
        return jax.tree_util.tree_map(lambda x: split_member_axis(x, axis_size), out), \
            jax.tree_util.tree_map(lambda _: True, out)

    return fold


# The fold's two reshapes. Every leaf a task's state holds carries the env axis first (it comes
# out of a vmap over envs), whatever else it is: zero-size (MJX keeps empty contact arrays),
# integer, boolean, or a per-env scalar. The sizes are spelled out rather than inferred with -1,
# which is ambiguous, and fails, for a leaf with no elements.
def merge_member_axis(x):
    """[P, N, ...] -> [P*N, ...]."""
    x = jnp.asarray(x)
    if x.ndim < 2:
        raise ValueError(f"env_batch: a leaf of shape {x.shape} has no env axis to fold the members into")
    return x.reshape((x.shape[0] * x.shape[1],) + x.shape[2:])


def split_member_axis(x, members: int):
    """[P*N, ...] -> [P, N, ...]."""
    return x.reshape((members, x.shape[0] // members) + x.shape[1:])


def build_programs(config: TrainConfig, env=None, batched: bool = False, shared: bool | None = None) -> Programs:
    """The (unjitted) init / chunk / evaluate functions of `config`'s static part: built from the
    blanked config, so no runtime value is baked in (algos.programs memoises their compiled form).
    `shared` (default: unbatched): the simple-form algorithms share one program, the algorithm
    being `Hyper.algo_index` (TrainConfig.static_key).

    `batched`: the functions are meant to be vmapped over a pack's members (algos.programs): the
    env step folds the member axis into the env batch (env_batch) and the chunk's budget is a
    mask, not a `cond` (a cond on a per-member value would become a select anyway)."""
    shared = not batched if shared is None else shared
    return _build_programs(config.static_key(shared), env if env is not None else make_env(config), batched)


def _build_programs(cfg: TrainConfig, env, batched: bool = False) -> Programs:
    N, T, U = cfg.num_envs, cfg.episode_length, cfg.unroll_length
    R, M, B = cfg.unrolls_per_update, cfg.num_minibatches, cfg.batch_size
    S = R * U  # rollout steps per env per update
    C = cfg.iterate_capacity
    act, use_norm, algo = cfg.activation, cfg.normalize_observations, cfg.algo
    adam = optax.scale_by_adam()
    n_metrics = len(LOSS_METRICS)
    specs = [registry.get(name) for name in algo.split("+")]  # several: a shared program (static_key)
    spec = specs[0]
    hooks = spec.hooks_obj if len(specs) == 1 else shared_hooks(specs)
    cost_by_algo = tuple(s.uses_cost_critic for s in specs)
    with_cost = any(cost_by_algo)  # the state holds a cost critic
    transform = hooks.transform
    n_state = len(spec.state_columns)
    sgd_policy = hooks.policy_step is None  # False: the algorithm's own policy step, the SGD fits the critics
    obs_size = env.observation_size + (transform.extra_obs if transform is not None else 0)
    env_reset, env_step = env_batch(env.reset, batched), env_batch(env.step, batched)

    def policy_dist(params, norm, obs):
        return dist.split_output(apply_mlp(params["policy"], normalize(norm, obs, use_norm), act))

    def policy_obs(tstate, obs, h):
        return obs if transform is None else transform.observe(tstate, obs, h)

    def traced(algo_state, tstate, h):
        """(multiplier, state columns [n_state]) the trace records for this state."""
        values = hooks.trace(algo_state, tstate, h)
        if len(values) != 1 + n_state:
            raise ValueError(f"algos.registry {algo!r}: trace gives {len(values) - 1} state columns, the entry "
                             f"names {n_state} ({spec.state_columns})")
        columns = (jnp.stack([jnp.asarray(v, jnp.float32) for v in values[1:]]) if n_state
                   else jnp.zeros((0,), jnp.float32))
        return jnp.asarray(values[0], jnp.float32), columns

    # ---- init ------------------------------------------------------------------------
    def init(seed, h: Hyper) -> TrainState:
        key = jax.random.PRNGKey(seed)
        k_params, k_env, k_run = jax.random.split(key, 3)
        params = init_params(k_params, obs_size, env.action_size, cfg.policy_hidden,
                             cfg.critic_hidden, with_cost)
        env_state = env_reset(jax.random.split(k_env, N))
        tstate = () if transform is None else transform.init(N, h)
        algo_state = hooks.init(h, jax.random.fold_in(key, ALGO_INIT_SALT)) if hooks.keyed_init else hooks.init(h)
        return TrainState(params, adam.init(params), init_normalizer(obs_size), env_state, k_run,
                          algo_state, no_episodes(N), jnp.int32(0), jnp.int32(0),
                          jnp.full((n_metrics,), jnp.nan, jnp.float32), tstate)

    setup = LossSetup(act, use_norm, with_cost, hooks, cost_by_algo)
    grad_fn = jax.value_and_grad(minibatch_loss, has_aux=True)

    # ---- one update ------------------------------------------------------------------
    def do_update(state: TrainState, log: IterateLog, h: Hyper):
        key, k_roll, k_sgd = jax.random.split(state.key, 3)
        norm = state.normalizer
        multiplier, state_columns = traced(state.algo, state.transform, h)

        def rollout_step(carry, step_index):
            env_state, tstate, pending, log, key = carry
            key, k_act = jax.random.split(key)
            obs = policy_obs(tstate, env_state.obs, h)
            mu, sigma = policy_dist(state.params, norm, obs)
            z = dist.sample_pre_tanh(k_act, mu, sigma)
            action, record = jnp.tanh(z), ()
            if hooks.act is not None:  # a shield: the env gets its correction, PPO trains on z
                current_cost = jnp.where(env_state.done, 0.0, env_state.cost)  # a fresh episode's: 0, as reset says
                action, record = hooks.act(state.algo, obs, action, h, current_cost, jax.random.fold_in(k_act, 1))
            next_state = env_step(env_state, action)
            if transform is None:
                reward = next_state.reward
            else:
                tstate, reward = transform.step(tstate, next_state, h)
            extra = (state.update, step_index, multiplier, state.last_metrics, state_columns)
            finished = builtin_finished(next_state)
            pending, rows, count = advance(pending, finished, log[1:], log.count, extra)
            log = IterateLog(count, *rows)
            transition = Transition(obs, z, dist.log_prob(z, mu, sigma), reward, next_state.cost,
                                    next_state.done, next_state.truncated)
            return (next_state, tstate, pending, log, key), (transition, finished, record)

        (env_state, tstate, pending, log, _), (traj, ended, records) = jax.lax.scan(
            rollout_step, (state.env_state, state.transform, state.pending, log, k_roll),
            jnp.arange(S, dtype=jnp.int32))
        if use_norm:
            norm = update_normalizer(norm, traj.obs)

        # [S, N, ...] -> R*N sequences of U steps; observations get one more step for the bootstrap
        all_obs = jnp.concatenate([traj.obs, policy_obs(tstate, env_state.obs, h)[None]], axis=0)  # [S+1, N, O]
        obs_index = jnp.arange(R)[:, None] * U + jnp.arange(U + 1)[None, :]  # [R, U+1]

        def to_sequences(x, steps):
            x = x.reshape(R, steps, N, *x.shape[2:]) if steps == U else x
            x = jnp.swapaxes(x, 1, 2)  # [R, N, steps, ...]
            return x.reshape(R * N, steps, *x.shape[3:])

        data = Transition(to_sequences(all_obs[obs_index], U + 1),
                          *(to_sequences(x, U) for x in traj[1:]))
        mean_cost = jnp.mean(traj.cost)
        stats = update_stats(mean_cost, h, T, ended.done, ended.cost, traj.obs, traj.raw_action, traj.cost, records)
        algo_state, params = state.algo, state.params
        if not sgd_policy:
            # the algorithm's step on the whole batch, before the critics move (advantages from the
            # critics that valued the batch; the policy sees the normaliser its rollout used)
            adv, cost_adv = batch_advantages(params, data, norm, h, setup)
            rollout_norm = state.normalizer
            step_in = PolicyStepInputs(
                params["policy"], lambda p, o: dist.split_output(apply_mlp(p, normalize(rollout_norm, o, use_norm),
                                                                           act)),
                data.obs[:, :-1], data.raw_action, data.log_prob, adv, cost_adv, algo_state, stats,
                jax.random.fold_in(k_sgd, 1))
            policy, algo_state, step_metrics = hooks.policy_step(step_in, h)
            params = {**params, "policy": policy}

        def sgd_step(carry, xs):
            params, opt_state = carry
            minibatch, key = xs
            (_, metrics), grads = grad_fn(params, minibatch, norm, state.algo, multiplier, h, key, setup)
            updates, opt_state = adam.update(grads, opt_state, params)
            params = jax.tree_util.tree_map(lambda p, u: p - h.learning_rate * u, params, updates)
            return (params, opt_state), metrics

        def epoch(carry, key):
            k_perm, k_mb = jax.random.split(key)
            perm = jax.random.permutation(k_perm, R * N)
            shuffled = jax.tree_util.tree_map(lambda x: x[perm].reshape(M, B, *x.shape[1:]), data)
            return jax.lax.scan(sgd_step, carry, (shuffled, jax.random.split(k_mb, M)))

        (params, opt_state), metrics = jax.lax.scan(
            epoch, (params, state.opt_state), jax.random.split(k_sgd, cfg.num_epochs))
        metrics = jnp.mean(metrics, axis=(0, 1))
        if not sgd_policy:  # policy_loss, entropy, approx_kl of the algorithm's own step
            step_metrics = jnp.asarray(step_metrics, jnp.float32)
            metrics = metrics.at[jnp.array(POLICY_STEP_INDEX)].set(step_metrics)
        if hooks.update is not None:
            algo_state = hooks.update(algo_state, stats, h)
        new_state = TrainState(params, opt_state, norm, env_state, key, algo_state, pending, state.update + 1,
                               state.iterates, metrics, tstate)
        summary = UpdateSummary(mean_cost, traced(algo_state, tstate, h)[0])
        return new_state, log, summary

    # ---- chunk -----------------------------------------------------------------------
    def chunk(state: TrainState, h: Hyper, num_updates):
        """`chunk_updates` updates, skipping those at or past `num_updates` (a runtime budget)."""
        log = IterateLog(jnp.int32(0), jnp.zeros((C, N), jnp.float32), jnp.zeros((C, N), jnp.float32),
                         jnp.zeros((C, N), jnp.int32), jnp.zeros((C,), jnp.int32), jnp.zeros((C,), jnp.int32),
                         jnp.zeros((C,), jnp.float32),
                         jnp.zeros((C, n_metrics), jnp.float32), jnp.zeros((C, n_state), jnp.float32))

        def run(args):
            state, log, summary = do_update(*args, h)
            return (state, log), summary

        def skip(args):
            return args, UpdateSummary(jnp.float32(0.0), traced(args[0].algo, args[0].transform, h)[0])

        def body(carry, _):
            active = carry[0].update < num_updates
            if not batched:
                return jax.lax.cond(active, run, skip, carry)
            # a member past its budget computes the update with its pack-mates and keeps its state
            return jax.tree_util.tree_map(lambda a, b: jnp.where(active, a, b), run(carry), skip(carry))

        (state, log), summaries = jax.lax.scan(body, (state, log), None, length=cfg.chunk_updates)
        state = state._replace(iterates=state.iterates + log.count)
        return state, log, summaries

    # ---- evaluation ------------------------------------------------------------------
    E = cfg.eval_episodes

    def evaluate(params, norm, seed, noise_scale, h: Hyper):
        """E fresh-layout episodes; noise_scale 1 samples the policy, 0 acts with its mode tanh(mu).

        Both settings use the same layouts and the same noise draws, so they differ only in the noise.
        An algorithm's observation transform starts fresh for each episode (h: its runtime values).
        """
        k_reset, k_noise = jax.random.split(jax.random.fold_in(jax.random.PRNGKey(seed), EVAL_SALT))
        env_state = env_reset(jax.random.split(k_reset, E))

        def step(carry, _):
            env_state, tstate, pending, key = carry
            key, k_act = jax.random.split(key)
            mu, sigma = policy_dist(params, norm, policy_obs(tstate, env_state.obs, h))
            z = dist.sample_pre_tanh(k_act, mu, sigma, noise_scale)
            env_state = env_step(env_state, jnp.tanh(z))
            if transform is not None:
                tstate, _ = transform.step(tstate, env_state, h)
            return (env_state, tstate, keep_first(pending, builtin_finished(env_state)), key), None

        first_obs = env_state.obs
        tstate = () if transform is None else transform.init(E, h)
        (_, _, pending, _), _ = jax.lax.scan(step, (env_state, tstate, no_episodes(E), k_noise), None, length=T)
        return pending, first_obs

    return Programs(init, chunk, evaluate)
