"""docs/tutorial.md, run as a reader would: every command it shows (the code blocks marked
`<!--tutorial:NAME-->`), in order, in a copy of the session's tiny sweep, with the files it
says to write (`<!--tutorial-file:PATH-->`), and what it says each command does checked."""
from __future__ import annotations

import os
import re
import shlex
import shutil
import subprocess
import sys
from pathlib import Path

import pandas as pd
import pytest

from toy_sweep import add_toy_algorithm
from workflow import plan

REPO = Path(__file__).resolve().parent.parent
TUTORIAL = (REPO / "docs" / "tutorial.md").read_text()
SCRIPT = Path(sys.executable).parent / "saferl-eval"
BLOCK = r"\n```\w*\n(.*?)```"


@pytest.fixture()
def sweep_copy(tiny_sweep, tmp_path) -> Path:
    """A copy of the session's completed tiny sweep (files, times and Snakemake's metadata): the
    reader's clone after step 1."""
    dest = tmp_path / "sweep"
    shutil.copytree(tiny_sweep, dest, symlinks=True)
    return dest


def commands() -> dict[str, str]:
    found = dict(re.findall(r"<!--tutorial:([\w-]+)-->" + BLOCK, TUTORIAL, re.S))
    return {name: text.strip() for name, text in found.items()}


def files() -> dict[str, str]:
    return dict(re.findall(r"<!--tutorial-file:([\w./-]+)-->" + BLOCK, TUTORIAL, re.S))


def run(name: str, work: Path, repo: Path = REPO) -> str:
    """The tutorial's command `name` in `work` (a clone's folder; `repo` is its code), as typed:
    only the programs are spelled as this venv has them. Returns stdout + stderr; exit 0 asserted."""
    words = shlex.split(commands()[name])
    program = {"snakemake": [sys.executable, "-m", "snakemake", "--snakefile", str(repo / "Snakefile")],
               "python": [sys.executable], "saferl-eval": [str(SCRIPT)]}[words[0]]
    args = [str(repo / w) if w.startswith("cluster_profiles/") else w for w in words[1:]]
    proc = subprocess.run(program + args, cwd=work, capture_output=True, text=True, timeout=900,
                          env={**os.environ, "PYTHONPATH": str(repo)})
    out = proc.stdout + proc.stderr
    assert proc.returncode == 0, f"{commands()[name]}\n{out[-4000:]}"
    return out


def write_file(path: str, root: Path) -> None:
    target = root / path
    target.parent.mkdir(parents=True, exist_ok=True)
    target.write_text(files()[path])


def tiers(work: Path) -> dict:
    table = pd.read_csv(work / "results-tiny" / "metrics" / "tiers.csv")
    return {(a, p): int(t) for a, p, t in zip(table["algo"], table["phase"], table["tier"])}


def test_every_command_block_is_marked_and_run_below():
    unmarked = re.findall(r"(?<!-->)\n```\n(snakemake|python|saferl-eval)", TUTORIAL)
    assert not unmarked
    assert list(commands()) == ["sweep", "status", "reference", "threshold-plan", "threshold", "compare", "ratchet",
                                "evaluate"]
    assert set(files()) == {"my-thresholds.yaml", "algos/ratchet.py", "ratchet.yaml"}


def test_steps_1_to_4_sweep_status_reference_threshold_compare(sweep_copy):
    work = sweep_copy
    out = run("sweep", work)  # the sweep is complete: nothing trains
    assert "sweep tiny in results-tiny/" in out and "rule train_" not in out
    last = run("status", work).splitlines()[-1]
    assert last == "8 done, 0 running, 0 failed, 0 missing of 8 runs" and f"`{last}`" in TUTORIAL
    assert (work / "results-tiny" / "report.html").is_file()
    run("reference", work)
    assert (work / "before.yaml").is_file()
    before = tiers(work)

    write_file("my-thresholds.yaml", work)
    planned = {job.rule for job in plan.parse_jobs(run("threshold-plan", work))}
    assert {"write_thresholds", "tiers"} <= planned
    assert not [r for r in planned if r.startswith(("train_", "summarise_", "aggregate"))], planned
    run("threshold", work)
    after = tiers(work)
    assert (before["ppo", "final_explore"], after["ppo", "final_explore"]) == (2, 1)  # what step 3 says
    iqm = pd.read_csv(work / "results-tiny" / "metrics" / "iqm.csv").query("metric == 'V'")
    assert iqm.set_index(["algo", "phase"]).loc[("ppo", "final_explore"), "iqm"] == 0.375

    out = run("compare", work)
    moved = sum(before[k] != after[k] for k in before)
    assert moved >= 1
    assert f"tiers equal for {len(before) - moved} of {len(before)} (algorithm, phase) pairs." in out
    assert "reference values of 'before' lie inside the sweep's 95 % CI" in out


@pytest.mark.slow
def test_step_5_an_algorithm_of_ones_own_trains_beside_the_sweep(sweep_copy, tmp_path):
    """The tutorial's module and registry entry in a copy of the repository (nothing else
    changed); its command trains Ratchet's runs alone in the tiny sweep's folder."""
    repo = tmp_path / "repo"
    shutil.copytree(REPO, repo, ignore=shutil.ignore_patterns(
        ".git", ".jax_cache", ".snakemake", ".pytest_cache", "results*", "__pycache__", ".venv"))
    entry = re.search(r"<!--tutorial-registry-->" + BLOCK, TUTORIAL, re.S).group(1)
    add_toy_algorithm(repo, entry, {})
    write_file("algos/ratchet.py", repo)
    work = sweep_copy
    write_file("ratchet.yaml", work)
    out = run("ratchet", work, repo)
    trained = sorted({m for m in re.findall(r"rule (train_\w+):", out)})
    assert trained == ["train_circle_ratchet_p0"], trained
    got = tiers(work)
    assert {algo for algo, _ in got} == {"ppo", "ppo_lag", "ratchet"}
    assert len(list((work / "results-tiny" / "runs" / "circle").glob("d*/ratchet/seed*/run.json"))) == 4
    run("evaluate", work, repo)
    alone = pd.read_csv(work / "circle-only" / "tiers.csv")
    assert set(alone["algo"]) == {"ppo", "ppo_lag", "ratchet"}
