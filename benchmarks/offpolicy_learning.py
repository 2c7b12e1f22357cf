"""Does SAC-Lag learn? Return, cost and V on goal at the `cpu` budget, against a random policy,
PPO-Lag and CRAX's own sac_lag.

    python benchmarks/offpolicy_learning.py [--seeds 2] [--total-steps 800000] [--bound 6.25]
                                            [--skip-crax] [--quick]

Trains SAC-Lag and PPO-Lag with the trainer (runs.train, `cpu` preset, the built-in goal task,
the same bound and seeds 0 .. seeds-1) and CRAX's `sac_lag` trainer at the same sizes (num_envs,
episode_length, budget, replay size and batch, gradient steps per env step, learning rates,
reward scaling, networks, the multiplier's rate and cap) on CRAX's `safe_goal_point` at level 1
with the preset's goal shaping. Prints one table, method x phase: episodes, mean return, mean
cost and V (the share of episodes with cost > bound):

* train: the training episodes of the last ~10 % of training (the last tenth of the logged
  iterates, each one episode of every env); CRAX logs no single episodes, so it has no row;
* final_explore / final_greedy: the final policy with its exploration noise and greedily, on
  `eval_episodes` fresh episodes per seed (CRAX's final parameters through its own
  make_policy, deterministic False / True, on fresh CRAX episodes);
* random: actions uniform in [-1, 1], `eval_episodes` fresh episodes per seed.

Then each method's wall time and SAC-Lag's env and gradient steps per second of training
(compilation and evaluation excluded, run.json's train_wall_s) against PPO-Lag's, measured in
the same run. Gradient steps: PPO-Lag's updates x epochs x minibatches, SAC-Lag's updates x
grad_updates_per_step. CRAX compiles inside its train call, so its figures include compilation.
--quick: a tiny budget and tiny networks, for a smoke test (its figures mean nothing).
"""
from __future__ import annotations

import argparse
import functools
import json
import os
import sys
import tempfile
import time

import numpy as np

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))

DEFAULT_BOUND = 6.25  # config/presets/default.yaml: the middle bound of the default sweep at T = 500
TASK = "goal"
CRAX_TASK = "safe_goal_point"
LAST_SHARE = 0.1  # the share of training whose episodes make the `train` row
METHODS = (("random", "uniform random"), ("sac_lag", "SAC-Lag"), ("ppo_lag", "PPO-Lag"),
           ("crax_sac_lag", "SAC-Lag (CRAX)"))
PHASES = ("random", "train", "final_explore", "final_greedy")
# --quick: every size tiny, so the whole script is compilation (a smoke test of its parts)
QUICK_SETS = dict(num_envs=4, episode_length=16, eval_episodes=4, chunk_updates=4,
                  batch_size=4, num_minibatches=2, unroll_length=4, num_epochs=1,
                  policy_hidden=(8,), critic_hidden=(8,),
                  replay_size=256, replay_batch_size=16, offpolicy_hidden=(8,))
QUICK_TOTAL_STEPS = 4 * 4 * 16  # four episodes of every env


def train_config(algo: str, seed: int, args):
    from algos.config import make_config

    overrides = dict(task=TASK, algo=algo, bound=args.bound, seed=seed)
    if args.quick:
        overrides.update(QUICK_SETS)
    overrides["total_steps"] = args.total_steps or (QUICK_TOTAL_STEPS if args.quick else None)
    return make_config("cpu", overrides)


# ---- episodes --------------------------------------------------------------------------------

def episode_sums(reset, step, act, n: int, T: int, key):
    """(return, cost) of n fresh episodes of at most T steps: `reset(keys)` and `step(state,
    action)` batched, `act(obs, key) -> action`, `step` giving (state, reward, cost, done). A
    step after an episode's end (an auto-reset) counts for nothing."""
    import jax
    import jax.numpy as jnp

    k_reset, k_act = jax.random.split(key)

    def one(carry, k):
        state, alive, ret, cost = carry
        state, reward, step_cost, done = step(state, act(state.obs, k))
        return (state, alive * (1.0 - done), ret + alive * reward, cost + alive * step_cost), None

    zeros = jnp.zeros((n,), jnp.float32)
    (_, _, ret, cost), _ = jax.lax.scan(one, (reset(jax.random.split(k_reset, n)), zeros + 1.0, zeros, zeros),
                                        jax.random.split(k_act, T))
    return ret, cost


def random_policy(cfg, seed: int) -> dict:
    """`eval_episodes` episodes of uniform random actions on the trainer's task (envs.make)."""
    import jax

    import envs

    env = envs.make(cfg.task, episode_length=cfg.episode_length, **dict(cfg.env_kwargs))

    def step(state, action):
        state = jax.vmap(env.step)(state, action)
        return state, state.reward, state.cost, state.done.astype(np.float32)

    def act(obs, key):
        return jax.random.uniform(key, (obs.shape[0], env.action_size), minval=-1.0, maxval=1.0)

    run = jax.jit(functools.partial(episode_sums, jax.vmap(env.reset), step, act, cfg.eval_episodes,
                                    cfg.episode_length))
    ret, cost = run(jax.random.PRNGKey(seed))
    return {"random": (np.asarray(ret), np.asarray(cost))}


def our_run(cfg, out: str) -> tuple[dict, dict]:
    """Train one run with the trainer into `out`; its episodes by phase ('train': the last
    ~LAST_SHARE of the logged iterates) and its run.json."""
    import pandas as pd

    from runs.pack import Member
    from runs.train import run_pack

    # no TensorBoard files: the timing is the training's alone
    status = run_pack([Member(cfg, out, "cpu")], quiet=True, tensorboard=False)
    if status != 0:
        raise SystemExit(f"offpolicy_learning: training {cfg.algo} seed {cfg.seed} into {out} exited {status}")
    episodes = pd.read_parquet(os.path.join(out, "episodes.parquet"))
    with open(os.path.join(out, "run.json")) as f:
        meta = json.load(f)
    train = episodes[episodes.phase == "train"]
    iterates = int(train.iteration.max()) + 1
    last = train[train.iteration >= iterates - max(1, round(LAST_SHARE * iterates))]
    phases = {"train": (last["return"].to_numpy(), last.cost.to_numpy())}
    for phase in ("final_explore", "final_greedy"):
        rows = episodes[episodes.phase == phase]
        phases[phase] = (rows["return"].to_numpy(), rows.cost.to_numpy())
    return phases, meta


def gradient_steps(cfg) -> int:
    """Gradient steps of a whole run: PPO's updates x epochs x minibatches, SAC's updates x
    grad_updates_per_step."""
    per_update = cfg.num_epochs * cfg.num_minibatches if cfg.learner == "ppo" else cfg.grad_updates_per_step
    return cfg.num_updates * per_update


def device_put_replicated(value, devices):
    """The drop-in for jax.device_put_replicated from JAX's pmap migration guide: every leaf
    stacked along a leading axis of len(devices), sharded over the devices."""
    import jax
    import jax.numpy as jnp
    from jax.sharding import Mesh, NamedSharding, PartitionSpec

    sharding = NamedSharding(Mesh(np.array(devices), ("replica",)), PartitionSpec("replica"))
    return jax.tree_util.tree_map(
        lambda leaf: jax.device_put(jnp.stack([jnp.asarray(leaf)] * len(devices)), sharding), value)


def restore_device_put_replicated() -> None:
    """CRAX 0.1.0's sac_lag trainer replicates its state over devices with
    jax.device_put_replicated, which JAX 0.10 removed (reading it raises AttributeError): put
    the drop-in back where it is missing."""
    import jax

    try:
        jax.device_put_replicated  # noqa: B018 (present in the JAX CRAX was written for)
    except AttributeError:
        jax.device_put_replicated = device_put_replicated


def crax_run(cfg, seed: int) -> tuple[dict, float, float]:
    """CRAX's sac_lag trained at `cfg`'s sizes on CRAX's goal, then its final parameters on
    `eval_episodes` fresh CRAX episodes with noise and greedily: (episodes by phase, train
    seconds (compilation included), evaluation seconds)."""
    import jax

    from crax import envs as crax_envs
    from crax.training.agents.sac_lag import networks as sac_lag_networks
    from crax.training.agents.sac_lag.train import train

    restore_device_put_replicated()
    options = dict(cfg.env_kwargs)
    env = crax_envs.get_environment(CRAX_TASK, level=1, reward_distance_scale=options["reward_distance_scale"])
    started = time.perf_counter()
    make_policy, params, _, eval_env = train(
        environment=env, num_timesteps=cfg.total_steps, episode_length=cfg.episode_length,
        num_envs=cfg.num_envs, batch_size=cfg.replay_batch_size, grad_updates_per_step=cfg.grad_updates_per_step,
        max_replay_size=cfg.replay_size, min_replay_size=cfg.min_replay_size,
        learning_rate=cfg.learning_rate, discounting=cfg.discount, reward_scaling=cfg.reward_scaling, tau=cfg.tau,
        normalize_observations=cfg.normalize_observations, seed=seed,
        safety_bound=cfg.bound, lagrangian_lr=cfg.sac_lagrangian_lr, lambda_max=cfg.sac_lambda_max,
        initial_lambda=cfg.sac_lambda_init,
        network_factory=functools.partial(sac_lag_networks.make_sac_lag_networks,
                                          hidden_layer_sizes=cfg.offpolicy_hidden))
    jax.block_until_ready(params)
    train_s = time.perf_counter() - started

    def step(state, action):
        state = eval_env.step(state, action)
        return state, state.reward, state.info["cost"], state.done

    def episodes(policy_params, greedy, key):
        # both of CRAX's policies in one program (greedy a traced flag): the env compiles once
        noisy, mode = make_policy(policy_params, deterministic=False), make_policy(policy_params, deterministic=True)
        act = lambda obs, k: jax.numpy.where(greedy, mode(obs, k)[0], noisy(obs, k)[0])
        return episode_sums(eval_env.reset, step, act, cfg.eval_episodes, cfg.episode_length, key)

    started = time.perf_counter()
    phases = {}
    key = jax.random.fold_in(jax.random.PRNGKey(seed), 1)  # not the training's keys
    program = jax.jit(episodes)
    for phase, greedy in (("final_explore", False), ("final_greedy", True)):
        ret, cost = program(params, greedy, key)
        phases[phase] = (np.asarray(ret), np.asarray(cost))
    return phases, train_s, time.perf_counter() - started


# ---- the report ------------------------------------------------------------------------------

def table(results: dict, bound: float) -> str:
    """method x phase: episodes, mean return, mean cost, V (share of episodes with cost > bound)."""
    lines = ["| method | phase | episodes | mean return | mean cost | V |", "|---|---|---|---|---|---|"]
    for method, label in METHODS:
        for phase in PHASES:
            if (method, phase) not in results:
                continue
            ret = np.concatenate([r for r, _ in results[method, phase]])
            cost = np.concatenate([c for _, c in results[method, phase]])
            lines.append(f"| {label} | {phase} | {ret.size} | {ret.mean():.2f} | {cost.mean():.2f} | "
                         f"{np.mean(cost > bound):.3f} |")
    return "\n".join(lines)


def add(results: dict, method: str, phases: dict) -> None:
    for phase, sums in phases.items():
        results.setdefault((method, phase), []).append(sums)


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--seeds", type=int, default=2, help="seeds 0 .. N-1 of every method (default %(default)s)")
    parser.add_argument("--total-steps", type=int, default=None,
                        help="env steps of every training run (default: the cpu preset's, 800,000)")
    parser.add_argument("--bound", type=float, default=DEFAULT_BOUND,
                        help="safety bound d on the episode cost (default %(default)s: the default sweep's middle bound)")
    parser.add_argument("--skip-crax", action="store_true", help="leave CRAX's sac_lag out")
    parser.add_argument("--quick", action="store_true", help="tiny sizes and budget: a smoke test")
    args = parser.parse_args(argv)
    if args.seeds < 1:
        parser.error(f"--seeds {args.seeds}: must be >= 1")
    if args.total_steps is not None and args.total_steps < 1:
        parser.error(f"--total-steps {args.total_steps}: must be >= 1")

    from algos.programs import enable_compilation_cache

    enable_compilation_cache()
    seeds = range(args.seeds)
    sac = train_config("sac_lag", 0, args)
    print(f"goal, bound {args.bound:g}, seeds {args.seeds}, {sac.total_steps:,} env steps per run; "
          f"num_envs {sac.num_envs}, T {sac.episode_length}, replay {sac.replay_size:,} x batch "
          f"{sac.replay_batch_size}, {sac.grad_updates_per_step} gradient step(s) per env step, "
          f"networks {sac.offpolicy_hidden}" + (" (--quick)" if args.quick else ""), flush=True)
    results, wall, train_s, steps = {}, {}, {}, {}
    with tempfile.TemporaryDirectory(prefix="offpolicy_learning_") as work:
        started = time.perf_counter()
        for seed in seeds:
            add(results, "random", random_policy(train_config("sac_lag", seed, args), seed))
        wall["random"] = time.perf_counter() - started
        for algo in ("sac_lag", "ppo_lag"):
            started = time.perf_counter()
            train_s[algo], steps[algo] = 0.0, [0, 0]
            for seed in seeds:
                cfg = train_config(algo, seed, args)
                phases, meta = our_run(cfg, os.path.join(work, f"{algo}-seed{seed}"))
                add(results, algo, phases)
                train_s[algo] += meta["train_wall_s"]
                steps[algo][0] += meta["env_steps"]
                steps[algo][1] += gradient_steps(cfg)
            wall[algo] = time.perf_counter() - started
            print(f"[{algo}] done in {wall[algo]:.0f} s", file=sys.stderr, flush=True)
    if not args.skip_crax:
        # CRAX's MJX goal trains far slower on a CPU: the rows so far, in case it is stopped
        print(f"table before CRAX's sac_lag:\n{table(results, args.bound)}", file=sys.stderr, flush=True)
        started = time.perf_counter()
        train_s["crax_sac_lag"], steps["crax_sac_lag"] = 0.0, [0, 0]
        for seed in seeds:
            phases, seconds, _ = crax_run(train_config("sac_lag", seed, args), seed)
            add(results, "crax_sac_lag", phases)
            train_s["crax_sac_lag"] += seconds
            steps["crax_sac_lag"][0] += sac.num_updates * sac.num_envs
            steps["crax_sac_lag"][1] += gradient_steps(sac)
        wall["crax_sac_lag"] = time.perf_counter() - started

    print()
    print(table(results, args.bound))
    print()
    labels = dict(METHODS)
    print("wall time (all seeds; compilation, training and evaluation; training alone in brackets):")
    for method, seconds in wall.items():
        alone = f" ({train_s[method]:.1f} s training)" if method in train_s else ""
        print(f"  {labels[method]:<16} {seconds:9.1f} s{alone}")
    print()
    print("training throughput (all seeds; compilation and evaluation excluded, CRAX's included):")
    for method, (env_steps, grad_steps) in steps.items():
        print(f"  {labels[method]:<16} env steps/s {env_steps / train_s[method]:10,.0f}   "
              f"gradient steps/s {grad_steps / train_s[method]:8,.1f}   "
              f"({env_steps:,} env steps, {grad_steps:,} gradient steps in {train_s[method]:.1f} s)")
    rate = {m: (env / train_s[m], grad / train_s[m]) for m, (env, grad) in steps.items()}
    print(f"SAC-Lag / PPO-Lag: env steps/s {rate['sac_lag'][0] / rate['ppo_lag'][0]:.3f}, "
          f"gradient steps/s {rate['sac_lag'][1] / rate['ppo_lag'][1]:.3f}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
