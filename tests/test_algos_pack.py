"""Packs (algos.pack): runs of one program trained together give exactly the episodes each
gives alone, resume member by member, and fail member by member.

Tiny circle runs (4 envs, T = 64, 16 updates in chunks of 4), so the two compiled programs
(a block of 2 runs, two blocks) take seconds.
"""
import json
import os

import pandas as pd
import pytest

from algos import train
from algos.config import make_config
from algos.pack import Member

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
