"""Packs (runs.pack): runs of one program trained together give exactly the episodes each
gives alone, resume member by member, and fail member by member.

Tiny circle runs (4 envs, T = 64, 16 updates in chunks of 4), so the two compiled programs
(a block of 2 runs, two blocks) take seconds.
"""
import json
import os

import pandas as pd
import pytest

from runs import train
from algos.config import make_config
from runs.pack import Member

pytestmark = pytest.mark.slow
KW = dict(task="circle", algo="ppo_lag", total_steps=16 * 2048, num_envs=4, episode_length=64, eval_episodes=4)
RUNS = [(15.0, 0), (25.0, 1), (15.0, 1)]  # (bound, seed)


def config(bound, seed):
    return make_config("cpu", dict(KW, bound=bound, seed=seed), ["chunk_updates=4"])


def members(base, name, runs):
    return [Member(config(b, s), str(base / f"{name}-d{b:g}-s{s}"), "cpu") for b, s in runs]


def table(member, name="episodes.parquet"):
    frame = pd.read_parquet(os.path.join(member.out, name))
    return frame.drop(columns="wall_time") if "wall_time" in frame else frame


@pytest.fixture(scope="module")
def trained(tmp_path_factory):
    base = tmp_path_factory.mktemp("packs")
    alone = [members(base, "alone", [run]) for run in RUNS]
    for m in alone:
        assert train.run_pack(m, quiet=True) == 0
    pack = members(base, "pack", RUNS)
    assert train.run_pack(pack, quiet=True) == 0
    return base, [m[0] for m in alone], pack


def test_a_run_gives_the_same_episodes_alone_and_in_a_pack(trained):
    _, alone, pack = trained
    for a, p in zip(alone, pack):
        pd.testing.assert_frame_equal(table(a), table(p), check_exact=True)
        pd.testing.assert_frame_equal(table(a, "trace.parquet"), table(p, "trace.parquet"), check_exact=True)
    assert not table(pack[0]).equals(table(pack[2]))  # other bound, same seed: another run
    meta = json.load(open(os.path.join(pack[0].out, "run.json")))
    assert meta["pack_size"] == 3 and meta["config"]["bound"] == 15.0


def test_a_preempted_pack_resumes_every_member_as_if_uninterrupted(trained):
    base, _, pack = trained
    resumed = members(base, "resumed", RUNS)
    assert train.run_pack(resumed, quiet=True, stop_after_chunks=2) == train.EXIT_TEMPFAIL
    assert all(os.path.exists(os.path.join(m.out, "checkpoint", "state-0.json")) for m in resumed)
    progress = json.load(open(os.path.join(resumed[0].out, "progress.json")))  # what workflow.status shows
    assert progress["updates"] == 16 and 0 < progress["update"] < 16
    assert progress["fraction"] == progress["update"] / 16
    # the members resume in another order and composition: one alone, two together
    assert train.run_pack(resumed[2:], quiet=True) == 0
    assert train.run_pack(resumed[:2][::-1], quiet=True) == 0
    for r, p in zip(resumed, pack):
        pd.testing.assert_frame_equal(table(r), table(p), check_exact=True)
        assert json.load(open(os.path.join(r.out, "run.json")))["restarts"] == 1


def test_a_failed_member_fails_alone_and_a_folder_of_another_run_is_refused(trained, tmp_path):
    base, alone, pack = trained
    fresh = members(tmp_path, "fresh", RUNS[:2])
    os.makedirs(os.path.join(fresh[1].out, "checkpoint"))
    with open(os.path.join(fresh[1].out, "checkpoint", "state-0.json"), "w") as f:
        f.write("{not json")  # an unusable checkpoint fails this member only
    other = Member(config(25.0, 0), pack[0].out, "cpu")  # pack[0]'s folder holds bound 15
    assert train.run_pack([fresh[0], fresh[1], other], quiet=True) == 1
    pd.testing.assert_frame_equal(table(fresh[0]), table(alone[0]), check_exact=True)
    assert not os.path.exists(os.path.join(fresh[1].out, "run.json"))
    assert "no usable checkpoint" in json.load(open(os.path.join(fresh[1].out, "failure.json")))["error"]
    refused = json.load(open(os.path.join(pack[0].out, "failure.json")))["error"]
    assert "holds a complete run of another config (fields ['bound'])" in refused
    assert json.load(open(os.path.join(pack[0].out, "run.json")))["config"]["bound"] == 15.0  # kept


# ---- batched packs (algos.programs: pack_mode=batched) ----------------------------------------
@pytest.fixture(scope="module")
def batched(tmp_path_factory):
    """Goal runs (lazy respawns and MJX contacts) in batched packs, in a process without FMA
    (tests/batched_packs.py says why)."""
    import subprocess
    import sys

    out = tmp_path_factory.mktemp("batched")
    env = dict(os.environ, XLA_FLAGS="--xla_cpu_max_isa=AVX")
    script = os.path.join(os.path.dirname(__file__), "batched_packs.py")
    done = subprocess.run([sys.executable, script, str(out)], env=env, capture_output=True, text=True, timeout=1500)
    assert done.returncode == 0, done.stderr[-3000:]
    return out


def folders(base, name):
    return {os.path.basename(p): p for p in sorted((base / name).iterdir())}


def run_tables(folder):
    return [table(Member(None, str(folder)), name) for name in ("episodes.parquet", "trace.parquet")]


def test_a_batched_member_does_not_depend_on_its_pack_mates_or_slot(batched):
    full, perm, alone = (folders(batched, n) for n in ("full", "perm", "alone"))
    for run, folder in full.items():
        for a, b in zip(run_tables(folder), run_tables(perm[run])):
            pd.testing.assert_frame_equal(a, b, check_exact=True)
    (run, folder), = alone.items()  # retrained alone after its pack-mates finished
    for a, b in zip(run_tables(folder), run_tables(full[run])):
        pd.testing.assert_frame_equal(a, b, check_exact=True)
    meta = json.load(open(os.path.join(folder, "run.json")))
    assert meta["pack_mode"] == "batched" and meta["program_slots"] == 3 and meta["pack_size"] == 1
    assert meta["config"]["pack_mode"] == "batched"


def test_a_killed_batched_pack_resumes_every_member_to_the_uninterrupted_result(batched):
    full, killed = folders(batched, "full"), folders(batched, "killed")
    for run, folder in full.items():
        for a, b in zip(run_tables(folder), run_tables(killed[run])):
            pd.testing.assert_frame_equal(a, b, check_exact=True)
        meta = json.load(open(os.path.join(killed[run], "run.json")))
        assert meta["restarts"] == 1
        assert not os.path.exists(os.path.join(killed[run], "progress.json"))


def _count_branches(jaxpr, counts=None):
    """cond and while primitives in a jaxpr, sub-jaxprs included."""
    counts = counts if counts is not None else {"cond": 0, "while": 0}
    for eqn in jaxpr.eqns:
        if eqn.primitive.name in counts:
            counts[eqn.primitive.name] += 1
        for value in eqn.params.values():
            for sub in value if isinstance(value, (list, tuple)) else [value]:
                inner = getattr(sub, "jaxpr", sub)
                if hasattr(inner, "eqns"):
                    _count_branches(inner, counts)
    return counts


def test_a_batched_pack_keeps_every_lazy_branch_of_the_task_a_cond():
    """Members' envs fold into one flat batch, so the task's conds (respawn, contact solve)
    survive the vmap over members; only the two per-member conds of the chunk (the budget,
    now a mask, and the recorder's write) become selects."""
    import jax
    import jax.numpy as jnp

    from algos.config import hyper_of, stacked_hyper
    from algos.core import build_programs
    from algos.learning import env_batch, make_env

    cfg = make_config("cpu", dict(task="goal", algo="ppo_lag", num_envs=16))
    env = make_env(cfg)
    state = jax.eval_shape(env_batch(env.reset), jax.random.split(jax.random.PRNGKey(0), 16))
    action = jnp.zeros((16, env.action_size))
    alone = _count_branches(jax.make_jaxpr(env_batch(env.step))(state, action).jaxpr)
    stack = lambda tree: jax.tree_util.tree_map(lambda x: jnp.zeros((2, *x.shape), x.dtype), tree)  # noqa: E731
    folded = _count_branches(jax.make_jaxpr(jax.vmap(env_batch(env.step, fold_members=True)))(
        stack(state), stack(action)).jaxpr)
    assert alone == folded and alone["cond"] >= 2, (alone, folded)

    single, batched = build_programs(cfg, shared=False), build_programs(cfg, batched=True)  # both: PPO-Lag's own
    h, hP = hyper_of(cfg), stacked_hyper([cfg] * 2)
    s1 = jax.eval_shape(single.init, jnp.int32(0), h)
    sP = jax.eval_shape(jax.vmap(batched.init), jnp.zeros(2, jnp.int32), hP)
    one = _count_branches(jax.make_jaxpr(single.chunk)(s1, h, jnp.int32(1)).jaxpr)
    pack = _count_branches(jax.make_jaxpr(jax.vmap(batched.chunk))(sP, hP, jnp.zeros(2, jnp.int32)).jaxpr)
    assert pack == {"cond": one["cond"] - 2, "while": one["while"]}, (one, pack)


def test_batched_programs_come_in_a_few_sizes_that_hold_the_planned_pack():
    from algos.programs import pack_slots

    assert [pack_slots(n, "batched") for n in (1, 2, 3, 5, 7, 90)] == [1, 2, 3, 6, 8, 96]
    assert pack_slots(1, "batched", planned=5) == 6  # a member retrained alone: its pack's size
    assert pack_slots(3, "sequential", planned=6) == 6  # its full pack's program: cached, not compiled again
    assert [pack_slots(n, "sequential") for n in (1, 5, 90)] == [1, 5, 90]  # no buckets: slots train one by one
    with pytest.raises(ValueError, match="pack_mode 'fast'"):
        from algos.programs import resolve_mode
        resolve_mode("fast")


def test_a_pack_reports_progress_after_its_first_update_without_moving_any_result(trained, tmp_path, capfd,
                                                                                   monkeypatch):
    """A sequential pack ends its first call after one update and later calls every
    PROGRESS_EVERY_S (here 0: every update); where calls end changes no result."""
    from runs import pack as pack_module

    _, _, pack = trained
    monkeypatch.setattr(pack_module, "PROGRESS_EVERY_S", 0.0)
    fine = members(tmp_path, "fine", RUNS)
    assert train.run_pack(fine, quiet=False) == 0
    lines = [line for line in capfd.readouterr().err.splitlines() if "steps/s" in line]
    assert len(lines) == 16 and "update 1/16" in lines[0] and "update 16/16" in lines[-1]
    assert "0.10M/0.10M steps" in lines[-1]
    for f, p in zip(fine, pack):
        pd.testing.assert_frame_equal(table(f), table(p), check_exact=True)
        assert not os.path.exists(os.path.join(f.out, "progress.json"))  # removed once complete


def test_status_shows_a_running_runs_fraction_and_time_left(tmp_path):
    from runs.pack import write_progress
    from workflow.status import progress_detail

    assert progress_detail(tmp_path) == ""  # before the first chunk ends
    write_progress(str(tmp_path), 40, 160, 5000.0, 75.0)
    assert progress_detail(tmp_path) == "25% (update 40/160), 00:01:15 left"
    write_progress(str(tmp_path), 40, 160, 5000.0, 25 * 3600 + 61.4)
    assert progress_detail(tmp_path) == "25% (update 40/160), 25:01:01 left"  # past a day, not wrapped
    write_progress(str(tmp_path), 0, 160, float("nan"), float("nan"))  # no rate yet: eta_s null
    assert progress_detail(tmp_path) == "0% (update 0/160), ? left"
