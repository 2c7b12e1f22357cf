"""Where a training run's time goes at a trainer preset: the env, the rest of the rollout (acting,
recording), and the SGD epochs, per update, in CPU-seconds of one single-threaded process (as a
sweep job runs: XLA on one thread).

    python benchmarks/run_breakdown.py [--task push] [--algo ppo_lag] [--preset cpu] [--chunks 2]

It times the training chunk twice, at the preset's SGD epochs E and at 1 epoch (same rollout),
so one epoch costs (t_E - t_1) / (E - 1) and the rollout t_1 minus one epoch; and the env alone
(random actions, the preset's envs and rollout length, `lax.scan`). Rollout minus env is the
policy's acting, the normaliser and the episode recorder. The three shares are of t_E.
"""
from __future__ import annotations

import os
import sys

os.environ["XLA_FLAGS"] = (os.environ.get("XLA_FLAGS", "")
                           + " --xla_cpu_multi_thread_eigen=false intra_op_parallelism_threads=1").strip()
sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))

import argparse  # noqa: E402
import time  # noqa: E402

import jax  # noqa: E402

import envs  # noqa: E402
from algos.config import make_config  # noqa: E402
from algos.programs import enable_compilation_cache  # noqa: E402
from benchmarks.pack_throughput import measure  # noqa: E402


def env_only_rate(config, chunks: int) -> float:
    """Env steps per CPU-second of the env alone, stepped as the trainer's rollout steps it."""
    env = envs.make(config.task, episode_length=config.episode_length, **dict(config.env_kwargs))
    n, steps = config.num_envs, config.chunk_updates * config.unrolls_per_update * config.unroll_length

    def body(state, key):
        action = jax.random.uniform(key, (n, env.action_size), minval=-1.0, maxval=1.0)
        return jax.vmap(env.step)(state, action), None

    run = jax.jit(lambda s, k: jax.lax.scan(body, s, jax.random.split(k, steps))[0])
    state = jax.vmap(env.reset)(jax.random.split(jax.random.PRNGKey(0), n))
    state = jax.block_until_ready(run(state, jax.random.PRNGKey(1)))  # compile + warm up
    cpu = time.process_time()
    for i in range(chunks):
        state = jax.block_until_ready(run(state, jax.random.PRNGKey(2 + i)))
    return chunks * steps * n / (time.process_time() - cpu)


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--task", default="push")
    parser.add_argument("--algo", default="ppo_lag")
    parser.add_argument("--preset", default="cpu")
    parser.add_argument("--chunks", type=int, default=2, help="timed chunks per measurement")
    parser.add_argument("--chunk-updates", type=int, default=20)
    args = parser.parse_args(argv)
    enable_compilation_cache()
    base = make_config(args.preset, dict(task=args.task, algo=args.algo), [f"chunk_updates={args.chunk_updates}"])
    epochs = base.num_epochs
    one = make_config(args.preset, dict(task=args.task, algo=args.algo),
                      [f"chunk_updates={args.chunk_updates}", "num_epochs=1"])
    per_update = base.steps_per_update
    t_full = per_update / measure(base, None, args.chunks)[0]  # CPU-s per update
    t_one = per_update / measure(one, None, args.chunks)[0]
    t_env = per_update / env_only_rate(base, args.chunks)
    epoch = (t_full - t_one) / (epochs - 1)
    rollout = t_one - epoch
    print(f"{args.task} {args.algo} preset {args.preset}: {base.num_envs} envs, {per_update:,} steps and "
          f"{epochs} SGD epochs per update; CPU-ms per update (single-threaded XLA), load average "
          f"{os.getloadavg()[0]:.1f}")
    for name, t in (("env", t_env), ("acting + recording", rollout - t_env), (f"SGD ({epochs} epochs)", epochs * epoch),
                    ("whole update", t_full)):
        print(f"  {name:<22} {1e3 * t:8.1f} ms  {t / t_full:6.0%}")
    print(f"  whole update: {per_update / t_full:,.0f} env steps per CPU-second")
    return 0


if __name__ == "__main__":
    sys.exit(main())
