"""A new figure is a build function plus one entry of the product table: added to a copy of the
workflow, it becomes a Snakemake target of `all`, is built on a completed tiny sweep, and
shows in the sweep's report, with nothing else rerun."""
from __future__ import annotations

import shutil
import subprocess
import sys
from pathlib import Path

import pandas as pd
import pytest

from workflow import plan

REPO = Path(__file__).resolve().parent.parent
# What a workflow needs to run (the rest of a checkout: tests, docs, benchmarks, caches).
WORKFLOW_PARTS = ["Snakefile", "workflow", "config", "metrics", "algos", "envs", "cluster_profiles"]

pytestmark = pytest.mark.slow

TOY_MODULE = '''"""A toy product: the final greedy IQM(V) per algorithm as bars."""
import matplotlib.pyplot as plt
import pandas as pd

from workflow.products.outputs import save_figure


def figure_toy(inputs, outputs, settings, wildcards):
    iqm = pd.read_csv(inputs["iqm"])
    v = iqm[(iqm["metric"] == "V") & (iqm["phase"] == "final_greedy")]
    fig, ax = plt.subplots()
    ax.bar(v["algo"], v["iqm"])
    ax.set_title(f"toy: {len(v)} algorithms")
    save_figure(fig, outputs, dpi=settings["dpi"])
'''
TOY_ENTRY = '''
PRODUCTS.append(Product("figure_toy", FIGURE, "figure_toy", "workflow.products.toy:figure_toy",
                        lambda f, w: {"iqm": f.aggregate["iqm"]}, "figure_toy", ALL_PHASES))
'''


def _snakemake(workflow_dir: Path, workdir: Path, *args: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "snakemake", "--snakefile", str(workflow_dir / "Snakefile"),
                           "--workflow-profile", str(workflow_dir / "cluster_profiles" / "local"),
                           "--configfile", "tiny.yaml", *args], cwd=workdir, capture_output=True, text=True)


def test_a_toy_figure_added_through_the_product_table_is_built_and_reported(tiny_sweep, tmp_path):
    workflow_dir = tmp_path / "repo"
    workflow_dir.mkdir()
    for part in WORKFLOW_PARTS:
        src = REPO / part
        if src.is_dir():
            shutil.copytree(src, workflow_dir / part, ignore=shutil.ignore_patterns("__pycache__"))
        else:
            shutil.copy2(src, workflow_dir / part)
    (workflow_dir / "workflow" / "products" / "toy.py").write_text(TOY_MODULE)
    with open(workflow_dir / "workflow" / "products" / "registry.py", "a") as fh:
        fh.write(TOY_ENTRY)
    (workflow_dir / "workflow" / "report" / "figure_toy.rst").write_text("**A toy figure**: final greedy IQM(V).\n")
    sweep = tmp_path / "sweep"
    shutil.copytree(tiny_sweep, sweep, symlinks=True)

    # the new entry is a target of `all`: only it and the report (which lists every product) are planned
    jobs = plan.dry_run(sweep, ["--workflow-profile", str(workflow_dir / "cluster_profiles" / "local"),
                                "--configfile", "tiny.yaml", "--rerun-triggers", "mtime"],
                        snakefile=workflow_dir / "Snakefile")
    assert {j.rule for j in jobs} == {"figure_toy", "report", "all"}

    done = _snakemake(workflow_dir, sweep, "--rerun-triggers", "mtime")
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    png = sweep / "results" / "figures" / "figure_toy.png"
    assert png.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    assert (sweep / "results" / "figures" / "figure_toy.pdf").read_bytes()[:5] == b"%PDF-"
    report = (sweep / "results" / "report.html").read_text()
    assert "results/figures/figure_toy.png" in report
    n_algos = pd.read_csv(sweep / "results" / "metrics" / "iqm.csv")["algo"].nunique()
    assert n_algos == 2  # the tiny preset's two algorithms, which the toy figure drew

    # and Snakemake's report carries it with its caption
    out = tmp_path / "snakemake-report.html"
    rep = _snakemake(workflow_dir, sweep, "--report", str(out))
    assert rep.returncode == 0, rep.stderr[-3000:]
    assert "figure_toy.png" in out.read_text(errors="replace")
