"""A new figure is one new module of the product table (workflow/products/catalog/): added to a
copy of the workflow, and nothing else changed there, it becomes a Snakemake target of `all`,
is built on a completed tiny sweep with its own setting, and shows in both reports with its
caption, with nothing else rerun."""
from __future__ import annotations

import filecmp
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pandas as pd
import pytest

from workflow import plan

REPO = Path(__file__).resolve().parent.parent
# What a workflow needs to run (the rest of a checkout: tests, docs, benchmarks, caches).
WORKFLOW_PARTS = ["Snakefile", "workflow", "config", "metrics", "algos", "runs", "envs", "cluster_profiles"]
TOY = "workflow/products/catalog/figure_toy.py"

pytestmark = pytest.mark.slow

TOY_MODULE = '''"""A toy figure: one final-phase IQM per algorithm as bars."""
from workflow.products.registry import ALL_PHASES, FIGURE, Product


def inputs(files, wildcards):
    return {"iqm": files.aggregate["iqm"]}


def build(inputs, outputs, settings, wildcards):
    import matplotlib.pyplot as plt
    import pandas as pd

    from workflow.products.style import algo_label
    from workflow.products.outputs import save_figure

    iqm = pd.read_csv(inputs["iqm"])
    rows = iqm[(iqm["metric"] == settings["toy_metric"]) & (iqm["phase"] == "final_greedy")]
    fig, ax = plt.subplots()
    ax.bar([algo_label(a) for a in rows["algo"]], rows["iqm"])
    ax.set_title(f"toy: IQM({settings['toy_metric']}) of {len(rows)} algorithms")
    save_figure(fig, outputs, settings)


PRODUCT = Product(
    kind=FIGURE, category=ALL_PHASES, settings={"toy_metric": "V"}, inputs=inputs, build=build,
    caption="**A toy figure**: the final greedy IQM of {{ snakemake.params.settings['toy_metric'] }} per algorithm.")
'''


def _copy_workflow(dest: Path) -> None:
    dest.mkdir()
    for part in WORKFLOW_PARTS:
        src = REPO / part
        if src.is_dir():
            shutil.copytree(src, dest / part, ignore=shutil.ignore_patterns("__pycache__"))
        else:
            shutil.copy2(src, dest / part)


def _changed_files(copy: Path) -> list[str]:
    """Files of the copy that are new or differ from the checkout's."""
    changed = []

    def walk(cmp: filecmp.dircmp, rel: str):
        changed.extend(os.path.join(rel, name) for name in cmp.left_only + cmp.diff_files)
        changed.extend(os.path.join(rel, name) for name in cmp.right_only)
        for name, sub in cmp.subdirs.items():
            walk(sub, os.path.join(rel, name))

    for part in WORKFLOW_PARTS:
        if (copy / part).is_dir():
            walk(filecmp.dircmp(copy / part, REPO / part, ignore=["__pycache__"]), part)
        elif not filecmp.cmp(copy / part, REPO / part, shallow=False):
            changed.append(part)
    return sorted(changed)


def _snakemake(workflow_dir: Path, workdir: Path, *args: str) -> subprocess.CompletedProcess:
    env = {**os.environ, "PYTHONPATH": str(workflow_dir)}  # the copy's packages, in the controller and the jobs
    return subprocess.run([sys.executable, "-m", "snakemake", "--snakefile", str(workflow_dir / "Snakefile"),
                           "--workflow-profile", str(workflow_dir / "cluster_profiles" / "local"),
                           "--configfile", "tiny.yaml", *args], cwd=workdir, capture_output=True, text=True, env=env)


def test_a_toy_figure_added_as_one_module_is_built_and_reported(tiny_sweep, tmp_path):
    workflow_dir = tmp_path / "repo"
    _copy_workflow(workflow_dir)
    (workflow_dir / TOY).write_text(TOY_MODULE)
    sweep = tmp_path / "sweep"
    shutil.copytree(tiny_sweep, sweep, symlinks=True)

    # the new module is a target of `all`: only it and the report (which lists every product) are planned
    jobs = plan.dry_run(sweep, ["--workflow-profile", str(workflow_dir / "cluster_profiles" / "local"),
                                "--configfile", "tiny.yaml", "--rerun-triggers", "mtime"],
                        snakefile=workflow_dir / "Snakefile")
    assert {j.rule for j in jobs} == {"figure_toy", "report", "all"}

    done = _snakemake(workflow_dir, sweep, "--rerun-triggers", "mtime", "--config", "products={toy_metric: Dnorm}")
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    png = sweep / "results-tiny" / "figures" / "figure_toy.png"
    assert png.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    assert (sweep / "results-tiny" / "figures" / "figure_toy.pdf").read_bytes()[:5] == b"%PDF-"
    report = (sweep / "results-tiny" / "report.html").read_text()
    # shown once, under its caption's title, the setting it ran with rendered, its PDF a link
    assert report.count("alt='figure_toy.png'") == 1 and ">A toy figure</h3>" in report
    assert "The final greedy IQM of Dnorm per algorithm" in report and "href='figures/figure_toy.pdf'" in report
    n_algos = pd.read_csv(sweep / "results-tiny" / "metrics" / "iqm.csv")["algo"].nunique()
    assert n_algos == 2  # the tiny preset's two algorithms, which the toy figure drew

    # a misspelt value of its setting is refused like any other products setting
    bad = _snakemake(workflow_dir, sweep, "-n", "--config", "products={toy_metrc: V}")
    assert bad.returncode != 0 and "unknown key 'toy_metrc'" in bad.stdout + bad.stderr

    # and Snakemake's report carries it with its caption, rendered with the setting the rule ran with
    out = tmp_path / "snakemake-report.html"
    rep = _snakemake(workflow_dir, sweep, "--report", str(out), "--config", "products={toy_metric: Dnorm}")
    assert rep.returncode == 0, rep.stderr[-3000:]
    text = out.read_text(errors="replace")
    assert "figure_toy.png" in text and "the final greedy IQM of Dnorm per algorithm" in text
    # building and reporting it wrote nothing into the workflow (no generated rule, caption or registry file)
    assert _changed_files(workflow_dir) == [TOY]
