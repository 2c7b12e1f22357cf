"""The device memory of a run's training state, known before any job runs.

A pack holds every member's training state on the device at once. For the off-policy core that
state includes the run's replay buffer (`replay_size` transitions), so the state, not the
networks, decides how many members fit on a device: 0.5 GB a member at the `paper` sizes on
goal, 90 members 47 GB. `state_bytes(config)` measures it with `jax.eval_shape` of the
learner's init (nothing is allocated or compiled). The sweep's planner (workflow/packs.py) reads
it through `planned_state_bytes`, cached per code version beside the JAX compilation cache and
computed in a subprocess on a miss, so Snakemake's process never imports JAX.

    python -m runs.memory --preset cpu --algo sac_lag --task goal     # one run's state, printed
"""
from __future__ import annotations

import argparse
import hashlib
import json
import os
import subprocess
import sys

from metrics.atomic import write_text

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def state_bytes(config) -> int:
    """Bytes of one run's training state (every leaf of the learner's init), replay buffer included."""
    import jax
    import jax.numpy as jnp

    from algos.config import hyper_of
    from algos.registry import LEARNERS

    programs = LEARNERS[config.learner]().build_programs(config)
    state = jax.eval_shape(programs.init, jnp.int32(0), hyper_of(config))
    return int(sum(leaf.size * leaf.dtype.itemsize for leaf in jax.tree_util.tree_leaves(state)))


def _key(config_dict: dict, version: str) -> str:
    return hashlib.sha256((version + json.dumps(config_dict, sort_keys=True)).encode()).hexdigest()[:16]


def planned_state_bytes(config_dicts: list[dict], cache_dir: str) -> list[int]:
    """state_bytes of each config (TrainConfig.to_dict form), from `<cache_dir>/state_bytes.json`
    where known (keyed by the config and the code version); the others computed in one
    subprocess and added to the file atomically."""
    from algos.programs import code_version

    version = code_version()
    path = os.path.join(cache_dir, "state_bytes.json")
    try:
        with open(path) as f:
            known = json.load(f)
    except (OSError, ValueError):
        known = {}
    keys = [_key(c, version) for c in config_dicts]
    missing = {k: c for k, c in zip(keys, config_dicts) if k not in known}
    if missing:
        job = subprocess.run([sys.executable, "-m", "runs.memory", "--configs", "-"], cwd=REPO, check=True,
                             input=json.dumps(list(missing.values())), capture_output=True, text=True)
        known.update(zip(missing, json.loads(job.stdout)))
        os.makedirs(cache_dir, exist_ok=True)
        write_text(path, json.dumps(known, indent=1, sort_keys=True))
    return [int(known[k]) for k in keys]


def members_that_fit(memory_gb: float, bytes_per_member: int) -> int:
    """How many members' training states fit in `memory_gb` (at least one: a run too large for
    the budget still trains alone, and the device's own error says so if it does not fit)."""
    return max(1, int(memory_gb * 1e9 // max(bytes_per_member, 1)))


def main(argv=None) -> int:
    from algos.config import config_from_dict, make_config

    parser = argparse.ArgumentParser(prog="python -m runs.memory", description=__doc__.split("\n\n")[0])
    parser.add_argument("--configs", help="'-': a JSON list of configs on stdin; prints their bytes as a JSON list")
    parser.add_argument("--preset", default="cpu")
    parser.add_argument("--algo", default="sac_lag")
    parser.add_argument("--task", default="goal")
    parser.add_argument("--backend", default="builtin")
    args = parser.parse_args(argv)
    if args.configs:
        configs = [config_from_dict(c) for c in json.load(sys.stdin)]
        print(json.dumps([state_bytes(c) for c in configs]))
        return 0
    config = make_config(args.preset, {"algo": args.algo, "task": args.task, "backend": args.backend})
    print(f"{args.task} {args.algo} ({args.preset}): {state_bytes(config) / 1e6:,.1f} MB of training state per run")
    return 0


if __name__ == "__main__":
    sys.exit(main())
