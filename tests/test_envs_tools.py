"""envs/ is the bottom of the training stack and holds only what decides a run's result: it
imports no other package of this project, and the tools around the tasks (tools.render,
tools.fidelity) live outside it, so editing them leaves `code_version` unchanged."""
from __future__ import annotations

import shutil
from pathlib import Path

import numpy as np
import pytest

import envs
from algos.programs import CODE_PACKAGES, code_version

REPO = Path(__file__).resolve().parent.parent

# That envs imports no other package and nothing imports tools is checked with every other
# layer rule in tests/test_architecture.py.


def test_code_version_covers_envs_but_not_the_tools(tmp_path):
    assert "tools" not in CODE_PACKAGES
    for package in (*CODE_PACKAGES, "tools"):
        shutil.copytree(REPO / package, tmp_path / package, ignore=shutil.ignore_patterns("__pycache__", "*.npz"))
    before = code_version(tmp_path)
    with open(tmp_path / "tools" / "render.py", "a") as f:
        f.write("\n# a plotting edit\n")
    assert code_version(tmp_path) == before
    with open(tmp_path / "envs" / "goal.py", "a") as f:
        f.write("\n# a task edit\n")
    assert code_version(tmp_path) != before


@pytest.fixture
def drawn(monkeypatch):
    """The figures tools.render draws, kept when it closes them (their artists hold the data)."""
    plt = pytest.importorskip("matplotlib.pyplot")
    figures, close = [], plt.close

    def keep(fig=None):
        figures.append(fig)
        close(fig)

    monkeypatch.setattr(plt, "close", keep)
    return figures


def path_and_marks(fig):
    """(the path's points and colour values, the red-ringed costly points, the start marker) of a picture."""
    (ax,) = fig.axes
    path, costly = ax.collections[-2:]  # the two scatters, drawn after the layout
    (start,) = [line for line in ax.lines if line.get_label() == "agent start"]
    return (np.asarray(path.get_offsets()), np.asarray(path.get_array()), np.asarray(costly.get_offsets()),
            np.array([start.get_xdata()[0], start.get_ydata()[0]]), ax.get_title())


def test_render_draws_known_tasks_and_writes_a_picture(tmp_path, drawn, monkeypatch):
    from envs import circle
    from tools import render

    rollouts, rollout = [], render.rollout
    monkeypatch.setattr(render, "rollout", lambda *args: rollouts.append(rollout(*args)) or rollouts[-1])

    assert set(render.DRAW) <= set(envs.TASKS) and all(callable(f) for f in render.DRAW.values())
    out = tmp_path / "circle.png"
    render.render("circle", str(out), steps=20)
    assert out.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    points, colours, costly, start, title = path_and_marks(drawn[-1])
    # the drawn path is the rollout's: its start, then the agent's position after each of the 20 steps
    ((state, path, cost, _),) = rollouts
    assert len(path) == 20
    np.testing.assert_array_equal(points, np.concatenate([np.asarray(state.point.xpos)[None], path]))
    np.testing.assert_array_equal(start, points[0])
    np.testing.assert_array_equal(colours, np.arange(21))  # coloured by time
    assert np.linalg.norm(np.diff(points, axis=0), axis=1).max() > 0  # the agent moved
    # ringed red: exactly the steps the circle task charges for (|x| > 1.125 after the step)
    outside = points[1:][np.abs(points[1:, 0]) > circle.BOUNDARY_X]
    assert len(outside) > 0  # seed 0 leaves the boundary within 20 steps, so the marks are tested
    np.testing.assert_array_equal(costly, outside)
    assert float(cost.sum()) == pytest.approx(0.1 * len(outside)) and title.endswith(f"episode cost {cost.sum():.1f}")


def test_render_command_draws_the_given_number_of_steps(tmp_path, capsys, drawn):
    from tools import render

    out = tmp_path / "circle.png"
    assert render.main(["circle", "--out", str(out), "--steps", "5"]) == 0
    assert out.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n" and f"wrote {out}" in capsys.readouterr().out
    points, colours, _, _, title = path_and_marks(drawn[-1])
    assert points.shape == (6, 2) and list(colours) == list(range(6)) and "5 random steps" in title
    with pytest.raises(SystemExit):
        render.main(["circle", "--out", str(out), "--steps", "0"])
