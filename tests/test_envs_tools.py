"""envs/ is the bottom of the training stack and holds only what decides a run's result: it
imports no other package of this project, and the tools around the tasks (tools.render,
tools.fidelity) live outside it, so editing them leaves `code_version` unchanged."""
from __future__ import annotations

import shutil
from pathlib import Path

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


def test_render_draws_known_tasks_and_writes_a_picture(tmp_path):
    pytest.importorskip("matplotlib")
    from tools import render

    assert set(render.DRAW) <= set(envs.TASKS) and all(callable(f) for f in render.DRAW.values())
    out = tmp_path / "circle.png"
    render.render("circle", str(out), steps=20)
    assert out.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"


def test_render_command_draws_the_given_number_of_steps(tmp_path, capsys):
    from tools import render

    out = tmp_path / "circle.png"
    assert render.main(["circle", "--out", str(out), "--steps", "5"]) == 0
    assert out.stat().st_size > 0 and f"wrote {out}" in capsys.readouterr().out
    with pytest.raises(SystemExit):
        render.main(["circle", "--out", str(out), "--steps", "0"])
