"""The checks to run when a GPU is at hand, printed as one table (benchmarks/gpu_check.sh runs it).

    python benchmarks/gpu_check.py [--small] [--backends builtin,crax] [--sizes 1,32,96]
                                   [--pack-job 32] [--checks bitwise,throughput,job] [--label TEXT]
                                   [--set KEY=VALUE ...]

Rows, per backend (built-in goal with MJX contacts, i.e. `paper-builtin`; CRAX goal, i.e. `paper`):
- bitwise: a batched pack's member gives the same bits with its pack-mates in another order (so
  in another slot) and alone in its pack's program size (the pack program's init, one chunk and
  the greedy evaluation compared leaf by leaf);
- throughput: env steps/s of training at the `paper` trainer sizes (2,048 envs, 5x256 critics,
  262,144 steps per update) for one run alone (its own program) and batched packs of each size,
  timed over one chunk after an untimed one, with the compile time;
- pack job: one real `python -m runs.train` job training a pack of `--pack-job` paper-size runs
  for two updates, with its compile, train and evaluation times from the runs' run.json.

`--set KEY=VALUE` changes a trainer config field in every row (e.g. `matmul_precision=highest`,
to time full float32 against the default's TF32 in one session).

`--small` shrinks every size (4 envs, T = 16, small minibatches, packs of 1, 2, 3) so the same
code runs on a CPU in seconds (tests/test_gpu_check.py). On a CPU the bitwise rows need XLA
without FMA contraction (XLA_FLAGS=--xla_cpu_max_isa=AVX, as tests/batched_packs.py explains);
on a GPU no flag is needed.
"""
from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time

REPO = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..")
sys.path.insert(0, REPO)

import jax  # noqa: E402
import jax.numpy as jnp  # noqa: E402
import numpy as np  # noqa: E402

from algos.config import make_config, stacked_hyper  # noqa: E402
from algos.programs import compile_programs, enable_compilation_cache, pack_slots  # noqa: E402
from runs import runfolder  # noqa: E402

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from pack_throughput import measure  # noqa: E402  (one timed chunk after an untimed one)

SMALL = dict(num_envs=4, episode_length=16, eval_episodes=2)
SMALL_SETS = ["batch_size=4", "num_minibatches=2"]
BACKEND_SETS = {"builtin": ["env.contact_model=mjx"], "crax": []}  # paper-builtin names MJX's contact solve


def config(backend, small, bound=25.0, seed=0, chunk_updates=2, total_steps=10**12, extra=()):
    sets = [*BACKEND_SETS[backend], f"chunk_updates={chunk_updates}", "pack_mode=batched", *extra]
    values = dict(task="goal", algo="ppo_lag", backend=backend, bound=bound, seed=seed)
    if small:
        values, sets = dict(values, **SMALL), [*sets, *SMALL_SETS]
    values["total_steps"] = total_steps  # timed chunks: the chunk's budget decides how much is trained
    return make_config("paper", values, sets)


def run_pack(configs, slots):
    """(per-member leaves of the state after init + one chunk, and of a greedy evaluation)."""
    configs = configs + [configs[-1]] * (slots - len(configs))
    compiled = compile_programs(configs[0], size=slots, mode="batched")
    h = stacked_hyper(configs)
    seeds = jnp.asarray([c.seed for c in configs], jnp.int32)
    state = compiled.init(seeds, h)
    state, log, summary = compiled.chunk(state, h, jnp.full(slots, 1, jnp.int32))
    evaluated = compiled.evaluate(state, seeds + 1000, jnp.float32(0.0), h)
    leaves = [np.asarray(x) for x in jax.tree_util.tree_leaves((state.params, log, summary, evaluated))]
    return [[leaf[i] for leaf in leaves] for i in range(len(configs))]


def bitwise(backend, small, size, extra=()):
    """'yes' when member 0 gives the same bits in slot 0, in the last slot and alone."""
    members = [config(backend, small, bound=b, seed=s, extra=extra) for b, s in
               [(15.0, 0), (25.0, 1), (50.0, 2), (15.0, 3)][:size]]
    slots = pack_slots(len(members), "batched")
    first = run_pack(members, slots)[0]
    moved = run_pack(members[::-1], slots)[len(members) - 1]
    alone = run_pack(members[:1], slots)[0]
    same = all(np.array_equal(a, b, equal_nan=True) and np.array_equal(a, c, equal_nan=True)
               for a, b, c in zip(first, moved, alone))
    return "yes" if same else "NO"


def throughput(backend, small, size, extra=()):
    """(env steps/s, compile s) of one run alone (size 1: its own program) or a batched pack."""
    _, rate, compile_s = measure(config(backend, small, extra=extra), None if size == 1 else size, chunks=1, mode="batched")
    return rate, compile_s


def pack_job(backend, small, size, workdir, extra=()):
    """(runs, compile s, train s per run summed / pack, eval s, env steps/s) of one runs.train job."""
    specs = []
    for i in range(size):
        cfg = config(backend, small, bound=[15.0, 25.0, 50.0][i % 3], seed=i // 3, extra=extra)
        cfg = config(backend, small, bound=cfg.bound, seed=cfg.seed, total_steps=2 * cfg.steps_per_update,
                     extra=extra)
        folder = os.path.join(workdir, f"{backend}-run{i}")
        runfolder.write_spec(folder, runfolder.spec_of("paper", cfg))
        specs.append(os.path.join(folder, "spec.json"))
    start = time.perf_counter()
    done = subprocess.run([sys.executable, "-m", "runs.train", "--pack-runs", str(size), "--spec", *specs],
                          cwd=REPO, capture_output=True, text=True)
    wall = time.perf_counter() - start
    if done.returncode != 0:
        raise RuntimeError(f"runs.train failed ({done.returncode}): {done.stderr[-2000:]}")
    meta = [json.load(open(os.path.join(os.path.dirname(s), "run.json"))) for s in specs]
    steps = sum(m["env_steps"] for m in meta)
    return dict(runs=size, compile_s=meta[0]["compile_s"], train_s=meta[0]["train_wall_s"],
                eval_s=meta[0]["eval_wall_s"], steps_per_s=steps / meta[0]["train_wall_s"], job_wall_s=wall)


def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--small", action="store_true", help="CPU-sized shapes (the test of this script)")
    p.add_argument("--backends", default="builtin,crax", help="comma-separated: builtin, crax")
    p.add_argument("--sizes", default=None, help="pack sizes timed (default 1,32,96; --small 1,2,3)")
    p.add_argument("--pack-job", type=int, default=None, help="runs in the runs.train job (default 32; --small 2)")
    p.add_argument("--bitwise-size", type=int, default=3, help="members of the bitwise check's pack (2-4)")
    p.add_argument("--checks", default="bitwise,throughput,job",
                   help="comma-separated rows to run: bitwise, throughput, job (the runs.train pack job)")
    p.add_argument("--label", default="", help="added to each row's check name (gpu_check.sh flags: the XLA flags)")
    p.add_argument("--set", dest="sets", action="append", default=[], metavar="KEY=VALUE",
                   help="a trainer config field for every row (repeatable), e.g. matmul_precision=highest")
    args = p.parse_args(argv)
    checks = set(args.checks.split(","))
    label = args.label + (f" [{' '.join(args.sets)}]" if args.sets else "")
    if checks - {"bitwise", "throughput", "job"}:
        p.error(f"--checks {args.checks}: choose from bitwise, throughput, job")
    sizes = [int(s) for s in (args.sizes or ("1,2,3" if args.small else "1,32,96")).split(",")]
    job_size = args.pack_job if args.pack_job is not None else (2 if args.small else 32)
    enable_compilation_cache(os.environ.get("JAX_COMPILATION_CACHE_DIR") or os.path.join(REPO, ".jax_cache"))
    device = jax.devices()[0]
    print(f"gpu_check: {device.platform} {device.device_kind}, jax {jax.__version__}, "
          f"{'small' if args.small else 'paper'} sizes", flush=True)
    print("| backend | check | members | result | compile s |", flush=True)
    print("|---|---|---|---|---|", flush=True)
    with tempfile.TemporaryDirectory() as workdir:
        for backend in args.backends.split(","):
            if backend == "crax":
                try:
                    import crax  # noqa: F401
                except ImportError:
                    print("| crax | (all) | - | skipped: crax-bench not installed | - |", flush=True)
                    continue
            row = lambda check, n, result, comp="-": print(  # noqa: E731
                f"| {backend} | {check}{label} | {n} | {result} | {comp} |", flush=True)
            if "bitwise" in checks:
                row("bitwise: slot, pack-mates, alone", args.bitwise_size,
                    bitwise(backend, args.small, args.bitwise_size, args.sets))
            for size in sizes if "throughput" in checks else ():
                rate, compile_s = throughput(backend, args.small, size, args.sets)
                row("train env steps/s" + (" (alone)" if size == 1 else " (batched)"), size,
                    f"{rate / 1e6:.3f}M", f"{compile_s:.1f}")
            if "job" not in checks:
                continue
            job = pack_job(backend, args.small, job_size, workdir, args.sets)
            row("runs.train pack job", job["runs"],
                f"train {job['train_s']:.1f} s ({job['steps_per_s'] / 1e6:.3f}M steps/s), "
                f"eval {job['eval_s']:.1f} s, job {job['job_wall_s']:.1f} s", f"{job['compile_s']:.1f}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
