"""docs/architecture.md's change table, done: each typical change is made in a copy of the
checkout exactly as the table says (those files and no others), and the parts that should
follow (the trainer's choices, the sweep config's allowed names, training itself) are checked
to have followed."""
from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pandas as pd
import pytest

REPO = Path(__file__).resolve().parent.parent

pytestmark = pytest.mark.slow

# A task with no physics: the agent's position moves by 0.1 x the clipped action; reward pulls it
# towards (1, 1); cost 1 on every step with |x| > 0.5.
TOY_TASK_MODULE = '''"""A toy task for tests: a point moved directly by its action."""
import dataclasses

import jax.numpy as jnp


@dataclasses.dataclass(frozen=True)
class LineTask:
    observation_size: int = 2

    def init(self, key):
        return jnp.zeros((2,), jnp.float32), ()

    def transition(self, xy, task, action, key):
        xy = xy + 0.1 * jnp.clip(action, -1.0, 1.0)
        reward = -jnp.sum(jnp.abs(xy - 1.0))
        cost = (jnp.abs(xy[0]) > 0.5).astype(jnp.float32)
        return xy, task, reward, cost, jnp.zeros((), bool)

    def observe(self, xy, task):
        return xy
'''

# A fixed-penalty method in the general form: one module with its Hooks and a registry entry.
TOY_ALGO_MODULE = '''"""A toy algorithm for tests: PPO on reward minus a fixed multiple of the cost advantage."""
from algos.ppo import clipped_surrogate, standardise


def loss(x, h):
    return clipped_surrogate(x.ratio, x.adv - h.fixed_weight * standardise(x.cost_adv), h.clip_eps)
'''


def documented_counts() -> dict[str, int]:
    """change -> files, from the 'files' column of docs/architecture.md's change table."""
    text = (REPO / "docs" / "architecture.md").read_text()
    section = text.split("## Where a typical change goes", 1)[1].split("\n## ", 1)[0]
    counts = {}
    for line in section.splitlines():
        cells = [c.strip() for c in line.strip().strip("|").split("|")]
        if len(cells) >= 3 and re.fullmatch(r"\d+", cells[1]):
            counts[cells[0]] = int(cells[1])
    return counts


@pytest.fixture()
def repo_copy(tmp_path) -> Path:
    repo = tmp_path / "repo"
    shutil.copytree(REPO, repo, ignore=shutil.ignore_patterns(
        ".git", ".jax_cache", ".snakemake", ".pytest_cache", "results", "__pycache__", ".venv", "*.egg-info"))
    return repo


def run(repo: Path, *args, timeout=600) -> subprocess.CompletedProcess:
    env = {**os.environ, "PYTHONPATH": str(repo)}
    proc = subprocess.run([sys.executable, *args], cwd=repo, env=env, capture_output=True, text=True,
                          timeout=timeout)
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    return proc


def insert_after(path: Path, anchor: str, text: str) -> None:
    source = path.read_text()
    assert anchor in source, f"{path}: anchor {anchor!r} not found"
    path.write_text(source.replace(anchor, anchor + text, 1))


def test_the_table_names_a_count_for_each_change_tested_here():
    counts = documented_counts()
    assert {"a new task", "a new algorithm"} <= set(counts), counts


def test_a_new_task_is_its_module_and_one_table_entry(repo_copy, tmp_path):
    (repo_copy / "envs" / "line.py").write_text(TOY_TASK_MODULE)
    insert_after(repo_copy / "envs" / "__init__.py", "TASK_TABLE: dict[str, Task] = {\n",
                 '    "line": Task(lambda: envs.line.LineTask),\n')

    # the sweep configuration accepts it, and the trainer trains and evaluates it
    run(repo_copy, "-c", "from workflow.config_validation import check_tasks; "
        "check_tasks({'backend': 'builtin', 'tasks': ['line']})")
    out = tmp_path / "run"
    run(repo_copy, "-m", "runs.train", "--task", "line", "--bound", "5", "--algo", "ppo_lag", "--seed", "0",
        "--out", str(out), "--threads", "1", "--total-steps", "512", "--num-envs", "4",
        "--episode-length", "16", "--eval-episodes", "2")
    meta = json.loads((out / "run.json").read_text())
    assert meta["complete"] and meta["config"]["task"] == "line" and meta["config"]["algo"] == "ppo_lag"
    frame = pd.read_parquet(out / "episodes.parquet")
    assert set(frame.task) == {"line"} and set(frame.algo) == {"ppo_lag"} and set(frame.bound) == {5.0}
    train = frame[frame.phase == "train"]
    # every episode is the time limit's 16 steps (the toy task never ends one), 4 envs at a time
    assert (frame.length == 16).all() and len(train) == meta["env_steps"] // 16 and len(train) % 4 == 0
    assert (frame[frame.phase == "final_explore"].shape[0], frame[frame.phase == "final_greedy"].shape[0]) == (2, 2)
    # the toy task's own numbers: from (0, 0), 0.1 a step at most, so the first 5 steps cost nothing
    # and every step's reward is -|x - 1| - |y - 1| in (-2 - 0.2 k, 0) after step k; cost 1 a step outside |x| <= 0.5
    assert frame.cost.isin(range(12)).all() and (frame["return"] < 0).all() and (frame["return"] >= -59.2).all()
    # no randomness in the task: the greedy policy's episodes are identical
    greedy = frame[frame.phase == "final_greedy"]
    assert greedy["return"].nunique() == 1 and greedy.cost.nunique() == 1


def test_a_new_algorithm_is_its_module_and_one_registry_entry(repo_copy):
    (repo_copy / "algos" / "fixed_penalty.py").write_text(TOY_ALGO_MODULE)
    insert_after(repo_copy / "algos" / "registry.py", "ALGORITHMS: dict[str, Algorithm] = {\n",
                 '    "fixed_penalty": Algorithm(label="Fixed penalty", uses_cost_critic=True,\n'
                 '        loss=lambda: algos.fixed_penalty.loss, scalars={"fixed_weight": 0.5}),\n')

    proc = run(repo_copy, "-m", "runs.train", "--help")
    assert "fixed_penalty" in proc.stdout
    run(repo_copy, "-c", "from workflow.config_validation import schema; "
        "assert 'fixed_penalty' in schema()['properties']['algos']['items']['enum']; "
        "from algos.config import TrainConfig; import dataclasses; "
        "assert 'fixed_weight' in {f.name for f in dataclasses.fields(TrainConfig)}")


def test_a_loss_term_on_the_observations_is_one_edit_of_the_algorithms_module(repo_copy, tmp_path):
    """The loss sees the minibatch's observations, the policy's distribution and the critics'
    values (algos.interface.LossInputs): a term on them is an edit of PPO-Lag's module alone."""
    module = repo_copy / "algos" / "ppo_lag.py"
    source = module.read_text()
    old = "    return clipped_surrogate(x.ratio, x.adv - x.multiplier * standardise(x.cost_adv), h.clip_eps)\n"
    assert old in source
    module.write_text(source.replace(old, (
        "    assert x.obs.shape[:2] == x.mu.shape[:2] == x.sigma.shape[:2] == x.values.shape == x.cost_values.shape"
        " == x.ratio.shape\n"
        "    surrogate = clipped_surrogate(x.ratio, x.adv - x.multiplier * standardise(x.cost_adv), h.clip_eps)\n"
        "    return surrogate + 1000.0 * jnp.mean(jnp.square(x.obs)) + 0.0 * jnp.mean(x.mu * x.sigma * x.values[..., None])\n")))
    out = tmp_path / "run"
    run(repo_copy, "-m", "runs.train", "--task", "circle", "--bound", "15", "--algo", "ppo_lag", "--seed", "0",
        "--out", str(out), "--threads", "1", "--total-steps", "512", "--num-envs", "4",
        "--episode-length", "16", "--eval-episodes", "2", "--set", "batch_size=4", "--set", "num_minibatches=2")
    trace = pd.read_parquet(out / "trace.parquet")  # 8 updates of 64 steps, an iterate each
    # the normalised observations' mean square is about 1: the term dominates the logged policy
    # loss (PPO-Lag's own is a standardised advantage's surrogate, a few units at most)
    logged = trace.policy_loss.dropna()
    assert len(logged) and (logged > 100.0).all(), trace.policy_loss.tolist()
