"""Batched packs for tests/test_algos_pack.py, trained in a process of their own:

    XLA_FLAGS=--xla_cpu_max_isa=AVX python tests/batched_packs.py OUT [crax | sac | tasks]

XLA:CPU contracts `a * b + c` into FMA instructions in some positions of a vectorised loop and
not in others, so on a CPU with FMA a batched member's last bits depend on where its envs sit
in the flat batch. Without FMA (`--xla_cpu_max_isa=AVX`, set before JAX starts, hence the
process of its own) every element runs the same instructions, as on a GPU. Writes, under OUT:
full/ (the three runs in order), perm/ (in another order, so other slots), alone/ (the second
run alone, in its full pack's program size), killed/ (the full pack killed with SIGKILL after
its first checkpoint, then resumed).

With `sac`: SAC-Lag circle runs (the off-policy core, its replay buffers in the state) in
full/, perm/, alone/ and killed/, as for the PPO runs.

With `tasks`: CRAX tasks beyond the paper's (the crax extra): SAC-Lag on safe_velocity_hopper
(its episodes end when the walker falls) and PPO-Lag on safe_goal_point at level 2, each pack
in full/ and again in perm/ (the other slots), under hopper-sac_lag/ and goal_l2-ppo_lag/.
(PPO-Lag's hopper packs are compared by tests/test_crax_tasks_sweep.py, marked heavy.)

With `crax`: CRAX goal runs (the crax extra; the trainer's `paper` preset shrunk to 4 envs and
T = 16, the shapes of tests/test_paper_path.py's sweep, so the two share compiled programs)
in full/, perm/, alone/, and seq/ (the same runs as a sequential pack); no killed/.
"""
import os
import signal
import subprocess
import sys
import time

REPO = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..")
sys.path.insert(0, REPO)

from runs import runfolder, train  # noqa: E402
from algos.config import make_config  # noqa: E402
from runs.pack import Member  # noqa: E402

KW = dict(task="goal", algo="ppo_lag", total_steps=16 * 2048, num_envs=4, episode_length=64, eval_episodes=4)
RUNS = [(15.0, 0), (25.0, 1), (15.0, 1)]  # (bound, seed)


CRAX_KW = dict(task="goal", algo="ppo_lag", backend="crax", total_steps=256, num_envs=4, episode_length=16,
               eval_episodes=2)
CRAX_SETS = ["batch_size=4", "num_minibatches=2"]
CRAX_RUNS = [(15.0, 0), (25.0, 0)]


SAC_KW = dict(task="circle", algo="sac_lag", total_steps=4 * 96, num_envs=4, episode_length=32, eval_episodes=4)
SAC_SETS = ["chunk_updates=24", "replay_size=256", "replay_batch_size=32", "offpolicy_hidden=16,16"]


def members(base, runs, sets=(), mode="batched"):
    kw, sets = (SAC_KW, [*SAC_SETS, *sets]) if os.environ.get("PACK_ALGO") == "sac" else (KW, ["chunk_updates=4", *sets])
    return [Member(make_config("cpu", dict(kw, bound=b, seed=s), [f"pack_mode={mode}", *sets]),
                   os.path.join(base, f"d{b:g}-s{s}"), "cpu") for b, s in runs]


def crax_members(base, runs, mode="batched"):
    return [Member(make_config("paper", dict(CRAX_KW, bound=b, seed=s), [*CRAX_SETS, f"pack_mode={mode}"]),
                   os.path.join(base, f"d{b:g}-s{s}"), "paper") for b, s in runs]


def killed_then_resumed(base):
    """The full pack in a child trainer, SIGKILLed once every member has a checkpoint (no
    signal handler runs), then resumed here."""
    pack = members(base, RUNS, ["checkpoint_every_s=0"])
    specs = []
    for m in pack:
        runfolder.write_spec(m.out, runfolder.spec_of(m.preset, m.config))
        specs.append(os.path.join(m.out, "spec.json"))
    child = subprocess.Popen([sys.executable, "-m", "runs.train", "--pack-runs", "3", "--spec", *specs],
                             stderr=subprocess.DEVNULL, cwd=REPO)
    saved = [os.path.join(m.out, "checkpoint", "state-0.json") for m in pack]
    deadline = time.time() + 900
    while not all(os.path.exists(p) for p in saved) and child.poll() is None and time.time() < deadline:
        time.sleep(0.05)
    child.send_signal(signal.SIGKILL)
    child.wait()
    if os.path.exists(os.path.join(pack[0].out, "run.json")):
        raise SystemExit("the child finished before it was killed: nothing was resumed")
    return train.run_pack(members(base, RUNS), quiet=True, planned=3)


def crax_main(out):
    planned = len(CRAX_RUNS)
    return max([
        train.run_pack(crax_members(os.path.join(out, "full"), CRAX_RUNS), quiet=True, planned=planned),
        train.run_pack(crax_members(os.path.join(out, "perm"), CRAX_RUNS[::-1]), quiet=True, planned=planned),
        train.run_pack(crax_members(os.path.join(out, "alone"), CRAX_RUNS[1:]), quiet=True, planned=planned),
        train.run_pack(crax_members(os.path.join(out, "seq"), CRAX_RUNS, "sequential"), quiet=True, planned=planned),
    ])


# (task, level, algo, its --set options); velocity-tiny's shapes (4 envs, T = 64, 1,024 steps)
TASK_PACKS = {
    "hopper-sac_lag": ("safe_velocity_hopper", 1, "sac_lag",
                       ["replay_size=256", "replay_batch_size=32", "offpolicy_hidden=16,16"]),
    "goal_l2-ppo_lag": ("safe_goal_point", 2, "ppo_lag", ["batch_size=8", "num_minibatches=2"]),
}


def tasks_main(out):
    statuses = []
    for name, (task, level, algo, sets) in TASK_PACKS.items():
        kw = dict(task=task, level=level, algo=algo, backend="crax", total_steps=1024, num_envs=4, episode_length=64,
                  eval_episodes=4)
        for folder, runs in (("full", [(0.5, 0), (0.5, 1)]), ("perm", [(0.5, 1), (0.5, 0)])):
            pack = [Member(make_config("cpu", dict(kw, bound=b, seed=s), [*sets, "pack_mode=batched"]),
                           os.path.join(out, name, folder, f"seed{s}"), "cpu") for b, s in runs]
            statuses.append(train.run_pack(pack, quiet=True, planned=2))
    return max(statuses)


def main(out):
    statuses = [
        train.run_pack(members(os.path.join(out, "full"), RUNS), quiet=True, planned=3),
        train.run_pack(members(os.path.join(out, "perm"), RUNS[::-1]), quiet=True, planned=3),
        train.run_pack(members(os.path.join(out, "alone"), RUNS[1:2]), quiet=True, planned=3),
        killed_then_resumed(os.path.join(out, "killed")),
    ]
    return max(statuses)


if __name__ == "__main__":
    if sys.argv[2:] == ["sac"]:
        os.environ["PACK_ALGO"] = "sac"  # members() and the killed child trainer's specs read it
    mains = {("crax",): crax_main, ("tasks",): tasks_main}
    sys.exit(mains.get(tuple(sys.argv[2:]), main)(sys.argv[1]))
