"""Training throughput of algos (PPO-Lag on goal, 2048 envs) against this machine's physical limits.

    python benchmarks/train_throughput.py [--num-envs 2048] [--nets cpu,crax] [--chunks 3] [--crax-chunks 1]
    python benchmarks/train_throughput.py --nets preset --threads 1 --compare OLD_CHECKOUT [--rounds 3]

--compare times this checkout's trainer and another checkout's (e.g. `git worktree add /tmp/old
main`) in alternating subprocesses of this script (--code DIR imports algos/envs from DIR), so
both see the same load, and prints the ratio of their rates (best round of each, wall and per
CPU-second). --threads 1 makes XLA single-threaded (per-core rates), as the sweep's jobs run.

For each network configuration it prints: compile time, end-to-end training env-steps/s (whole
updates: rollout, normaliser, SGD epochs, multiplier; timed after compilation), the FLOPs per env
step that the networks and the update schedule imply (dense layers only: acting forward, plus per
epoch forward + backward = 3 x forward of the policy on U steps and of each critic on U + 1
observations per U-step sequence), the matmul rate measured here, and the ceiling that rate puts
on steps/s (rate / FLOPs per step), with the fraction of it reached. It also prints env-only
steps/s (random actions, same N) and the ceiling of env + matmul work together.

Network configurations:
  cpu  - the cpu preset's networks and epochs (algos/config.py), schedule scaled to N envs:
         one unroll of 8 steps per env per update, 4 minibatches;
  preset - the cpu preset exactly as a sweep job trains it (64 envs, 4 unrolls of 8 per env,
         4 minibatches of 64 sequences, 4 epochs, chunks of 100 updates; --num-envs ignored);
  crax - CRAX's sizes and schedule (the paper preset): policy 4x32, critics 5x256, 16 unrolls
         of 8, 32 minibatches of 1024 sequences, 6 epochs (262,144 steps per update).
CRAX's own trainer (its CLI, PPO-Lag on safe_goal_point with its default sizes and schedule) is
timed only with --crax-trainer and the Python of a virtualenv with crax-bench installed
(--crax-python PATH, or the environment variable CRAX_PYTHON; e.g.
`python -m venv ~/venvs/crax && ~/venvs/crax/bin/pip install crax-bench`); otherwise the script says
it was not measured.
"""
from __future__ import annotations

import argparse
import os
import subprocess
import sys
import time

def _code_dir(argv) -> str:
    """--code DIR (a checkout whose algos/envs to import), read before anything is imported."""
    for i, arg in enumerate(argv):
        if arg == "--code" and i + 1 < len(argv):
            return os.path.abspath(argv[i + 1])
    return os.path.join(os.path.dirname(os.path.abspath(__file__)), "..")


sys.path.insert(0, _code_dir(sys.argv))
if "--threads" in sys.argv and sys.argv[sys.argv.index("--threads") + 1] == "1":  # before JAX starts
    os.environ["XLA_FLAGS"] = (os.environ.get("XLA_FLAGS", "")
                               + " --xla_cpu_multi_thread_eigen=false intra_op_parallelism_threads=1").strip()

import jax  # noqa: E402
import jax.numpy as jnp  # noqa: E402

from algos.config import PRESETS, hyper_of, make_config  # noqa: E402
from algos.networks import mlp_flops_per_input  # noqa: E402
from algos.programs import compile_programs, enable_compilation_cache  # noqa: E402
from interpreters import comparison_python  # noqa: E402  (benchmarks/, the script's folder)


def matmul_rate(m: int, k: int, n: int, seconds: float = 2.0) -> float:
    """Measured float32 FLOP/s of an [m,k] x [k,n] product (jitted, repeated)."""
    a = jax.random.normal(jax.random.PRNGKey(0), (m, k), jnp.float32)
    b = jax.random.normal(jax.random.PRNGKey(1), (k, n), jnp.float32)
    f = jax.jit(lambda a, b: a @ b)
    f(a, b).block_until_ready()
    reps, start = 0, time.perf_counter()
    while time.perf_counter() - start < seconds:
        f(a, b).block_until_ready()
        reps += 1
    return 2.0 * m * k * n * reps / (time.perf_counter() - start)


def flops_per_env_step(cfg, obs_size: int, action_size: int) -> float:
    policy = mlp_flops_per_input((obs_size, *cfg.policy_hidden, 2 * action_size))
    critic = mlp_flops_per_input((obs_size, *cfg.critic_hidden, 1))
    critics = 2 if cfg.uses_cost_critic else 1
    u = cfg.unroll_length
    per_epoch = 3 * policy + critics * 3 * critic * (u + 1) / u
    return policy + cfg.num_epochs * per_epoch


def env_only_rate(env, n: int, steps: int = 200) -> float:
    states = jax.vmap(env.reset)(jax.random.split(jax.random.PRNGKey(0), n))

    def body(s, k):
        a = jax.random.uniform(k, (n, env.action_size), minval=-1.0, maxval=1.0)
        s = jax.vmap(env.step)(s, a)
        return s, s.cost

    run = jax.jit(lambda s, k: jax.lax.scan(body, s, jax.random.split(k, steps)))
    s, c = run(states, jax.random.PRNGKey(1))
    c.block_until_ready()
    start = time.perf_counter()
    s, c = run(s, jax.random.PRNGKey(2))
    c.block_until_ready()
    return n * steps / (time.perf_counter() - start)


def net_config(name: str, num_envs: int):
    if name == "preset":
        return make_config("cpu", dict(task="goal", algo="ppo_lag", bound=25.0))
    if name == "crax":
        base = dict(PRESETS["paper"].config)
        sets = []
    else:
        cpu = PRESETS["cpu"].config
        sequences = num_envs  # one unroll per env per update
        minibatches = 4
        base = dict(cpu, num_envs=num_envs)
        sets = [f"batch_size={sequences // minibatches}", f"num_minibatches={minibatches}"]
    # a few updates per jitted call, as in training (the paper preset's update is already 262k steps)
    base.update(task="goal", algo="ppo_lag", bound=25.0, num_envs=num_envs, chunk_updates=1 if name == "crax" else 4)
    preset = "paper" if name == "crax" else "cpu"
    return make_config(preset, base, sets)


def measure(name: str, num_envs: int, chunks: int, rate_peak: float, env_rate: float):
    cfg = net_config(name, num_envs)
    compiled = compile_programs(cfg)
    from algos.learning import make_env

    env = make_env(cfg)
    h = hyper_of(cfg)
    state = compiled.init(jnp.int32(0), h)
    limit = jnp.int32(10**9)
    state, log, _ = compiled.chunk(state, h, limit)  # warm-up: first call allocates
    log.count.block_until_ready()
    start, cpu_start = time.perf_counter(), time.process_time()
    for _ in range(chunks):
        state, log, _ = compiled.chunk(state, h, limit)
    log.count.block_until_ready()
    seconds, cpu_seconds = time.perf_counter() - start, time.process_time() - cpu_start
    steps = chunks * cfg.chunk_updates * cfg.steps_per_update
    rate = steps / seconds
    flops = flops_per_env_step(cfg, env.observation_size, env.action_size)
    ceiling = rate_peak / flops
    rows, width = cfg.batch_size * (cfg.unroll_length + 1), max(cfg.critic_hidden)
    rate_shape = matmul_rate(rows, width, width, seconds=1.0)
    combined = 1.0 / (1.0 / env_rate + flops / rate_peak)
    print(f"\n[{name}] policy {cfg.policy_hidden} critics {cfg.critic_hidden} {cfg.activation}; "
          f"N {cfg.num_envs}, {cfg.unrolls_per_update} unroll(s) of {cfg.unroll_length}, "
          f"{cfg.num_minibatches} minibatches of {cfg.batch_size} sequences, {cfg.num_epochs} epochs "
          f"({cfg.steps_per_update:,} steps per update)")
    print(f"  compile (init + chunk + evaluate; 0 if cached in this process): {compiled.compile_s:.1f} s")
    print(f"  training: {rate:,.0f} env-steps/s ({steps:,} steps in {seconds:.1f} s; "
          f"{steps / cpu_seconds:,.0f} per CPU-second)")
    print(f"RESULT {rate:.1f} {steps / cpu_seconds:.1f}", flush=True)
    print(f"  FLOPs per env step (dense layers): {flops / 1e6:.3f} MFLOP")
    print(f"  matmul ceiling: {ceiling:,.0f} steps/s -> reached {100 * rate / ceiling:.1f} %")
    print(f"  env + matmul ceiling: {combined:,.0f} steps/s -> reached {100 * rate / combined:.1f} %")
    print(f"  matmul rate at this config's critic layer [{rows}x{width}]x[{width}x{width}]: {rate_shape / 1e9:.1f} GFLOP/s"
          f" -> ceiling {rate_shape / flops:,.0f} steps/s, reached {100 * rate * flops / rate_shape:.1f} %")
    return rate


# Runs CRAX's own CLI (crax.training.train_env) in the CRAX virtualenv. Its logging and video
# imports (wandb, imageio, matplotlib) get do-nothing stand-ins when absent, and its progress
# function is wrapped to print Brax's own `training/sps` (env steps of an epoch / its wall time).
_CRAX_DRIVER = """
import importlib.util, runpy, sys, time, types
for name in ("wandb", "imageio", "imageio.v3", "matplotlib", "matplotlib.pyplot"):
    if name.split(".")[0] in sys.modules or importlib.util.find_spec(name.split(".")[0]) is None:
        module = types.ModuleType(name); module.run = None
        module.__getattr__ = lambda attr: (lambda *a, **k: None)
        sys.modules[name] = module
for parent, child in (("imageio", "v3"), ("matplotlib", "pyplot")):
    if parent in sys.modules and not hasattr(sys.modules[parent], "__file__"):
        setattr(sys.modules[parent], child, sys.modules[parent + "." + child])
import crax.training.run_utils as run_utils
original = run_utils.custom_progress_fn
def progress(num_steps, metrics, *args, **kwargs):
    print(f"[crax-progress] step={num_steps} sps={metrics.get('training/sps')}", flush=True)
    return original(num_steps, metrics, *args, **kwargs)
run_utils.custom_progress_fn = progress
sys.argv = ["train_env"] + sys.argv[1:]
runpy.run_module("crax.training.train_env", run_name="__main__", alter_sys=True)
"""


def crax_trainer(python: str | None, num_envs: int, run: bool) -> float | None:
    """CRAX's PPO-Lag trainer on safe_goal_point with its CLI defaults (CRAX sizes and schedule).

    Two epochs of one 262,144-step update each; the second epoch's sps excludes compilation.
    main() has already checked that `python` exists when `run` is set.
    """
    if not run:
        print("\nCRAX's own trainer: not measured (pass --crax-trainer and --crax-python PATH or CRAX_PYTHON "
              "to run it; about 15 minutes on a 2-core CPU)")
        return None
    steps = 2 * 262_144 if num_envs == 2048 else 2 * num_envs * 128
    cmd = [python, "-c", _CRAX_DRIVER, "--env_name", "safe_goal_point", "--alg", "ppo_lag",
           "--num_timesteps", str(steps), "--num_envs", str(num_envs), "--episode_length", "2000",
           "--num_evals", "3", "--num_eval_envs", "1", "--use_wandb", "False", "--skip_rollout",
           "--skip_video", "--store_model", "False", "--safety_bound", "25", "--lagrangian_coef_rate", "3.0"]
    start = time.perf_counter()
    result = subprocess.run(cmd, capture_output=True, text=True, timeout=3600, env=dict(os.environ, JAX_PLATFORMS="cpu"))
    rates = [float(line.split("sps=")[1]) for line in result.stdout.splitlines()
             if line.startswith("[crax-progress]") and "sps=None" not in line]
    if result.returncode != 0 or len(rates) < 2:
        print(f"\nCRAX's own trainer: failed (exit {result.returncode}): {result.stderr.strip()[-400:]}")
        return None
    print(f"\nCRAX's own trainer (PPO-Lag, safe_goal_point, {num_envs} envs, CRAX sizes, MJX): "
          f"{rates[-1]:,.0f} env-steps/s in its second epoch (first, with compilation: {rates[0]:,.0f}); "
          f"{time.perf_counter() - start:.0f} s in all")
    return rates[-1]


def main(argv=None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--num-envs", type=int, default=2048)
    parser.add_argument("--nets", default="cpu,crax", help="comma-separated: cpu, crax")
    parser.add_argument("--chunks", type=int, default=3, help="jitted calls timed per configuration after warm-up")
    parser.add_argument("--crax-chunks", type=int, default=1,
                        help="calls timed for the crax nets (each is one 262,144-step update)")
    parser.add_argument("--crax-python", default=os.environ.get("CRAX_PYTHON") or None, metavar="PATH",
                        help="Python of a virtualenv with crax-bench, for --crax-trainer "
                             "(default: the environment variable CRAX_PYTHON)")
    parser.add_argument("--crax-trainer", action="store_true", help="also time CRAX's own trainer (slow)")
    parser.add_argument("--code", help="checkout whose algos/envs to time (default: this one)")
    parser.add_argument("--threads", type=int, default=None, help="1: single-threaded XLA (per-core rates)")
    parser.add_argument("--compare", help="another checkout to time against this one, alternating")
    parser.add_argument("--rounds", type=int, default=3, help="alternating rounds with --compare")
    args = parser.parse_args(argv)
    if args.crax_trainer:
        comparison_python("--crax-python", "CRAX_PYTHON", args.crax_python, "crax-bench", required=True)
    if args.compare:
        return compare(args)
    enable_compilation_cache()
    device = jax.devices()[0]
    print(f"machine: {os.cpu_count()} CPUs visible, jax {jax.__version__} on {device.platform} ({device.device_kind})")
    peak = matmul_rate(2048, 2048, 2048)
    layer = matmul_rate(1024 * 9, 256, 256)
    print(f"matmul rate: {peak / 1e9:.1f} GFLOP/s at 2048^3; {layer / 1e9:.1f} GFLOP/s at [9216x256]x[256x256] "
          f"(a CRAX critic layer on one minibatch); ceilings below use the larger")
    peak = max(peak, layer)
    from algos.learning import make_env

    env = make_env(net_config("cpu", args.num_envs))
    env_rate = env_only_rate(env, args.num_envs)
    print(f"env only (goal, {args.num_envs} envs, random actions): {env_rate:,.0f} env-steps/s")
    rates = {}
    for name in filter(None, (n.strip() for n in args.nets.split(","))):
        rates[name] = measure(name, args.num_envs, args.crax_chunks if name == "crax" else args.chunks, peak, env_rate)
    crax_rate = crax_trainer(args.crax_python, args.num_envs, args.crax_trainer)
    if crax_rate and "crax" in rates:
        print(f"algos with CRAX's sizes vs CRAX's own trainer, same run: {rates['crax'] / crax_rate:.2f}x")


def compare(args) -> None:
    """Alternate subprocesses of this script on this checkout and on --compare; print the ratio."""
    new, old = _code_dir([]), os.path.abspath(args.compare)
    base = [sys.executable, os.path.abspath(__file__), "--nets", args.nets, "--num-envs", str(args.num_envs),
            "--chunks", str(args.chunks)] + (["--threads", str(args.threads)] if args.threads else [])
    rates = {old: [], new: []}
    print(f"comparing {new} (new) with {old} (old): nets {args.nets}, {args.rounds} rounds, "
          f"threads {args.threads or 'all'}, load average {os.getloadavg()[0]:.1f}")
    for r in range(args.rounds):
        for code in (old, new):
            out = subprocess.run(base + ["--code", code], capture_output=True, text=True, env=dict(os.environ))
            found = [line.split()[1:] for line in out.stdout.splitlines() if line.startswith("RESULT")]
            if out.returncode != 0 or not found:
                raise SystemExit(f"{code}: failed:\n{out.stderr[-2000:]}")
            wall, cpu = map(float, found[0])
            rates[code].append((wall, cpu))
            print(f"  round {r} {'new' if code == new else 'old'}: {wall:,.0f} env-steps/s wall, {cpu:,.0f} per CPU-s",
                  flush=True)
    best = {c: (max(w for w, _ in v), max(p for _, p in v)) for c, v in rates.items()}
    print(f"old {best[old][0]:,.0f} / new {best[new][0]:,.0f} env-steps/s (best round, wall): {best[new][0] / best[old][0]:.2f}x; "
          f"per CPU-second {best[old][1]:,.0f} / {best[new][1]:,.0f}: {best[new][1] / best[old][1]:.2f}x; "
          f"load average {os.getloadavg()[0]:.1f}")


if __name__ == "__main__":
    main()
