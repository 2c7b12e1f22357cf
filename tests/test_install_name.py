"""The install is one uniquely named package: a user's own `metrics.py` or `recorders.py` in
the working folder does not shadow the installed engine or recorders, and nothing called
`metrics` or `recorders` is installed. Runs in the main venv (an editable install) and in
.ci/compat.sh's venv (a regular install beside pinned framework versions)."""
from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pandas as pd

REPO = Path(__file__).resolve().parent.parent
EXAMPLE = REPO / "docs" / "examples" / "episodes_other_framework.csv"
SCRIPT = Path(sys.executable).parent / "saferl-eval"


def outside(tmp_path: Path) -> dict:
    """A user's folder: their own metrics.py and recorders.py, and no checkout on the path."""
    (tmp_path / "metrics.py").write_text("raise SystemExit('the user\\'s own metrics.py was imported')\n")
    (tmp_path / "recorders.py").write_text("raise SystemExit('the user\\'s own recorders.py was imported')\n")
    return {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}


def test_the_console_command_evaluates_beside_a_users_metrics_py(tmp_path):
    env = outside(tmp_path)
    proc = subprocess.run([str(SCRIPT), "evaluate", str(EXAMPLE), "--out", "out", "--reps", "20"], cwd=tmp_path,
                          env=env, capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, proc.stderr[-2000:]
    assert set(pd.read_csv(tmp_path / "out" / "tiers.csv")["algo"]) == {"CPO", "PPOLag"}


def test_the_recorders_import_beside_a_users_modules_and_nothing_generic_is_installed(tmp_path):
    env = outside(tmp_path)
    code = ("import importlib.util, saferl_eval.metrics as m, saferl_eval.recorders.writer as w\n"
            "from saferl_eval.recorders import EpisodeWriter\n"
            "writer = EpisodeWriter('run', task='t', bound=1.0, algo='a', seed=0)\n"
            "writer.close()\n"
            "print(m.__name__, w.__name__)\n")
    proc = subprocess.run([sys.executable, "-c", code], cwd=tmp_path, env=env, capture_output=True, text=True)
    assert proc.returncode == 0 and "saferl_eval.metrics saferl_eval.recorders.writer" in proc.stdout, proc.stderr
    elsewhere = tmp_path / "empty"
    elsewhere.mkdir()
    for name in ("metrics", "recorders", "envs", "algos", "workflow", "tools"):
        found = subprocess.run([sys.executable, "-c", f"import importlib.util as u; print(u.find_spec({name!r}))"],
                               cwd=elsewhere, env=env, capture_output=True, text=True)
        assert found.stdout.strip() == "None", f"{name} is importable outside the checkout: {found.stdout}"
