"""Seconds to get a run's compiled programs in a fresh process, by what the caches hold.

    python benchmarks/program_load.py [--task circle] [--algo ppo_lag] [--preset cpu] [--repeat 2]

Each line is a new process calling algos.programs.compile_programs on one cache folder:
    cold         nothing cached: trace, lower, XLA compile (and both caches filled)
    jax cache    JAX's persistent cache only (the serialised executables removed): trace, lower, load
    executables  the serialised executables: load only
`--repeat` runs each warm case that many times; the ratio column is the cold time over the case's.
"""
from __future__ import annotations

import argparse
import os
import shutil
import subprocess
import sys
import tempfile

REPO = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..")
CHILD = """
import sys, time
sys.path.insert(0, {repo!r})
from algos.config import make_config
from algos.programs import compile_programs, enable_compilation_cache
enable_compilation_cache({cache!r})
config = make_config({preset!r}, dict(task={task!r}, algo={algo!r}))
compiled = compile_programs(config)
print(compiled.compile_s)
"""


def load_seconds(cache: str, args) -> float:
    code = CHILD.format(repo=REPO, cache=cache, preset=args.preset, task=args.task, algo=args.algo)
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    return float(out.stdout.split()[-1])


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--task", default="circle")
    parser.add_argument("--algo", default="ppo_lag")
    parser.add_argument("--preset", default="cpu")
    parser.add_argument("--repeat", type=int, default=2)
    args = parser.parse_args(argv)
    cache = tempfile.mkdtemp(prefix="program-load-")
    try:
        cold = load_seconds(cache, args)
        print(f"{args.task} {args.algo} preset {args.preset}: init, chunk and evaluate programs")
        print(f"{'cold':>12} {cold:8.2f} s {1.0:7.1f}x")
        for case in ("jax cache", "executables"):
            for _ in range(args.repeat):
                if case == "jax cache":
                    shutil.rmtree(os.path.join(cache, "executables"), ignore_errors=True)
                seconds = load_seconds(cache, args)
                print(f"{case:>12} {seconds:8.2f} s {cold / seconds:7.1f}x", flush=True)
    finally:
        shutil.rmtree(cache, ignore_errors=True)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
