"""The built-in tasks against the CRAX reference recorded by the fidelity suite (tools.fidelity).

tools/fidelity_reference.npz holds, per task, CRAX's initial states (layouts, poses) and its
per-episode cost, return and contact steps for each policy (regenerate with the command in
docs/envs.md). These tests replay the built-in side from the same starts and check it against
the reference within the tolerances docs/envs.md reports; the live comparison (both backends
in one process) is marked `crax` and runs when crax-bench is installed.
"""

import jax.numpy as jnp
import numpy as np
import pytest

from envs import contacts, goal, point
from tools import fidelity

REFERENCE = fidelity.REFERENCE


def test_reference_file_holds_starts_and_results_for_every_recorded_policy():
    ref = fidelity.load_reference(REFERENCE)
    length = int(ref["meta/length"])
    assert length == fidelity.EPISODE_LENGTH
    for task in ("goal", "button"):
        n = ref[f"{task}/keys"].shape[0]
        for name in fidelity.POLICIES[task]:
            if f"{task}/{name}/cost" in ref:
                for field in ("cost", "return", "contacts"):
                    assert ref[f"{task}/{name}/{field}"].shape == (n,)
                assert np.all(ref[f"{task}/{name}/contacts"] <= length)


def test_builtin_goal_matches_the_crax_reference():
    """Goal: random and the goal seeker within 10 % on mean cost, V within 0.05."""
    ref = fidelity.load_reference(REFERENCE)
    result = fidelity.replay_builtin({**ref}, ["goal"], fidelity.reference_params(ref), only=("random", "goal_seeker"))
    for (task, name), (cost, ret, contacts) in result.items():
        b = fidelity.summarise(cost, ret, contacts)
        c = fidelity.summarise(*(ref[f"{task}/{name}/{f}"] for f in ("cost", "return", "contacts")))
        assert abs(b["cost"] / c["cost"] - 1) <= 0.10, (name, b, c)
        for bound in fidelity.BOUNDS:
            assert abs(b[f"V{bound:g}"] - c[f"V{bound:g}"]) <= 0.05, (name, bound, b, c)


@pytest.mark.parametrize("model", ["mjx", "simple"])
def test_contact_rows_push_out_and_turn_the_agent(model):
    """A front corner pressed into the +x wall: the normal force points -x, and because it acts
    off the hinge axis (corner at y = +0.05) it applies a torque."""
    qpos = jnp.array([2.80, 0.0, -0.05])  # heading slightly right: the left corner leads
    con = contacts.square_wall_contacts(qpos, goal.WALL_INNER)
    deep = contacts.deepest(con)  # candidates [sphere, left, right corner] per wall -> deepest
    assert float(deep.dist[0]) < 0 and float(deep.ry[0]) > 0  # the left front corner
    force, touching = contacts.agent_force(qpos, jnp.array([1.5, 0.0, 0.0]), jnp.array([1.0, 0.0]), con, None, model)
    assert bool(touching[0]) and not bool(jnp.any(touching[1:]))
    assert float(force[0]) < 0 and float(force[2]) != 0.0
    free, touching = contacts.agent_force(jnp.zeros(3), jnp.array([1.5, 0.0, 0.0]), jnp.array([1.0, 0.0]),
                                          contacts.square_wall_contacts(jnp.zeros(3), goal.WALL_INNER), None, model)
    np.testing.assert_array_equal(free, np.zeros(3))
    assert not bool(jnp.any(touching))


@pytest.mark.slow
@pytest.mark.crax
def test_live_builtin_vs_crax_on_goal():
    pytest.importorskip("crax", reason="the crax extra (PyPI crax-bench) is not installed")
    import jax

    keys = jax.random.split(jax.random.PRNGKey(3), 8)
    crax0, builtin0 = fidelity.crax_starts("goal", keys)
    index = jnp.int32(fidelity.POLICIES["goal"].index("goal_seeker"))
    c = fidelity.summarise(*fidelity.rollout_fn("goal", "crax", 200)((crax0, ()), keys, index, None))
    b = fidelity.summarise(*fidelity.rollout_fn("goal", "builtin", 200)(builtin0, keys, index, None))
    assert abs(b["cost"] - c["cost"]) <= 0.25 * c["cost"] + 3.0, (b, c)


def test_builtin_block_speed_matches_the_crax_reference():
    """The pushed block's speed (agent thrusting straight into it, pair started settled) within
    3 % of the CRAX figure stored in the reference (`--record-block-speed`)."""
    ref = fidelity.load_reference(REFERENCE)
    c = fidelity.block_speed_summary(ref["push/block_speed/total"], ref["push/block_speed/steps"])
    b = fidelity.block_speed_summary(*fidelity.block_speed_runs("builtin"))
    assert c["starts"] == b["starts"] == len(fidelity.BLOCK_SPEED_HEADINGS) * len(fidelity.BLOCK_SPEED_OFFSETS)
    assert abs(b["speed"] / c["speed"] - 1) <= 0.03, (b, c)
    # both near the force balance: full thrust over both dampings
    assert abs(c["speed"] / fidelity.coupled_speed() - 1) <= 0.05, c


@pytest.mark.slow
@pytest.mark.crax
def test_live_block_speed_builtin_vs_crax():
    pytest.importorskip("crax", reason="the crax extra (PyPI crax-bench) is not installed")
    c = fidelity.block_speed_summary(*fidelity.block_speed_runs("crax"))
    b = fidelity.block_speed_summary(*fidelity.block_speed_runs("builtin"))
    assert abs(b["speed"] / c["speed"] - 1) <= 0.03, (b, c)


def test_an_unknown_contact_model_is_refused_by_name():
    import envs

    with pytest.raises(ValueError, match="contact_model='exact'.*mjx"):
        envs.make("push", contact_model="exact")


def test_every_task_defaults_to_mjx_contacts_and_simple_is_selectable():
    """MJX's contact solve is the default of every task (circle accepts the option, no obstacles)."""
    import envs

    for task in envs.TASKS:
        assert envs.make(task).task.contact_model == "mjx"
        assert envs.make(task, contact_model="simple").task.contact_model == "simple"


def _fidelity_cli(*args: str, cwd=None):
    import subprocess
    import sys
    from pathlib import Path

    repo = Path(__file__).resolve().parent.parent
    return subprocess.run([sys.executable, "-m", "tools.fidelity", *args], cwd=cwd or repo, capture_output=True,
                          text=True, timeout=900, env={**__import__("os").environ, "PYTHONPATH": str(repo)})


def test_cli_compares_a_task_with_the_reference_draws_the_figure_and_the_block_speed(tmp_path):
    reference = "tools/fidelity_reference.npz"
    png = tmp_path / "fidelity.png"
    done = _fidelity_cli("--reference", reference, "--tasks", "goal", "--contact-model", "simple",
                         "--figure", str(png))
    assert done.returncode == 0, done.stderr[-2000:]
    assert "goal" in done.stdout and png.stat().st_size > 0
    speed = _fidelity_cli("--reference", reference, "--block-speed")
    assert speed.returncode == 0 and speed.stdout.strip(), speed.stderr[-2000:]
    refused = _fidelity_cli("--block-speed")  # without a reference: a usage error naming the flag
    assert refused.returncode == 2 and "--reference" in refused.stderr


@pytest.mark.slow
@pytest.mark.crax
def test_cli_records_chosen_policies_with_trained_params_and_appends(tmp_path):
    pytest.importorskip("crax", reason="the crax extra (PyPI crax-bench) is not installed")
    params, out = tmp_path / "params.npz", tmp_path / "rec.npz"
    assert _fidelity_cli("--train", str(params)).returncode == 0
    policy = fidelity.POLICIES["goal"][0]
    first = _fidelity_cli("--record", str(out), "--tasks", "goal", "--episodes", "2", "--params", str(params),
                          "--policies", policy)
    assert first.returncode == 0, first.stderr[-2000:]
    second = _fidelity_cli("--record", str(out), "--tasks", "push", "--episodes", "2", "--append")
    assert second.returncode == 0, second.stderr[-2000:]
    recorded = np.load(out)
    assert any(k.startswith("goal/") for k in recorded.files) and any(k.startswith("push/") for k in recorded.files)
