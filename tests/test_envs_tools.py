"""envs/ is the bottom of the training stack and holds only what decides a run's result: it
imports no other package of this project, and the tools around the tasks (tools.render,
tools.fidelity) live outside it, so editing them leaves `code_version` unchanged."""
from __future__ import annotations

import ast
import shutil
from pathlib import Path

import pytest

import envs
from algos.runfolder import CODE_PACKAGES, code_version

REPO = Path(__file__).resolve().parent.parent
PROJECT = {"envs", "algos", "metrics", "workflow", "recorders", "tools"}


def project_imports(path: Path) -> set[str]:
    """Top-level project packages a source file imports (anywhere in it, lazy imports included)."""
    found = set()
    for node in ast.walk(ast.parse(path.read_text(), filename=str(path))):
        if isinstance(node, ast.Import):
            found |= {alias.name.split(".")[0] for alias in node.names}
        elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
            found.add(node.module.split(".")[0])
    return found & PROJECT


def test_envs_imports_no_other_package_of_the_project():
    above = {str(p.relative_to(REPO)): sorted(project_imports(p) - {"envs"}) for p in (REPO / "envs").rglob("*.py")}
    assert {k: v for k, v in above.items() if v} == {}


def test_nothing_but_tools_imports_tools():
    users = [str(p.relative_to(REPO)) for package in PROJECT - {"tools"} if (REPO / package).is_dir()
             for p in (REPO / package).rglob("*.py") if "tools" in project_imports(p)]
    assert users == []


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
