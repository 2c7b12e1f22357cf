"""The product rules plug into the workflow: every table and figure is a target of `all`
and each can be planned alone (a dry run of the tiny preset; nothing is trained)."""
import os
import re
import subprocess
import sys

import pytest
import yaml

from workflow.products import registry

pytest.importorskip("snakemake")
REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
with open(os.path.join(REPO, "config", "presets", "tiny.yaml")) as _f:
    TASKS = yaml.safe_load(_f)["tasks"]
FIGURES = ["figure1", "figure2", "figureA1", "figureA2", "figure_tier_sensitivity", "figure_pairwise",
           "figure_reference"] + \
    [f"figureA_{kind}_{t}" for kind in ("curves", "final") for t in TASKS]
TABLES = ["table1", "tableA1", "table2", "tableA2", "tableA3", "table_pairwise", "table_reference"] + \
    [f"tableA_task_{t}" for t in TASKS]
PRODUCT_RULES = {"figure1", "figure2", "figureA1", "figureA2_multipliers", "figure_tier_sensitivity",
                 "figureA_training_curves", "figureA_final_costs", "table1", "tableA1", "table2", "tableA2",
                 "tableA3", "tableA_task", "table_pairwise", "figure_pairwise", "table_reference", "figure_reference"}


def test_the_product_table_lists_every_product_once(tmp_path):
    # these products and their files at least: a module added to the catalog joins them
    products = registry.by_name()
    assert PRODUCT_RULES <= set(products)
    dirs = {registry.FIGURE: "F", registry.TABLE: "T"}
    targets = registry.targets(dirs, TASKS)
    assert {f"F/{n}.{ext}" for n in FIGURES for ext in ("pdf", "png")} | \
        {f"T/{n}.{ext}" for n in TABLES for ext in ("csv", "md", "tex", "html")} <= set(targets)
    per_product = {p.name: (len(TASKS) if p.per_task else 1) * (2 if p.kind == registry.FIGURE else 4)
                   for p in products.values()}
    assert len(targets) == len(set(targets)) == sum(per_product.values())
    captions = registry.write_captions(str(tmp_path))
    assert sorted(os.listdir(tmp_path)) == sorted(f"{name}.rst" for name in products)
    for product in registry.products():
        assert open(captions[product.name]).read() == product.caption.strip() + "\n"
        assert product.caption.lstrip().startswith("**"), product.name  # a bold first sentence
    table2 = registry.by_name()["table2"]
    with pytest.raises(ValueError, match=r"duplicate name\(s\) \['table2'\]"):
        registry.by_name(registry.products() + (table2,))


def test_a_module_that_is_not_a_product_is_a_clear_error(tmp_path, monkeypatch):
    package = tmp_path / "toy_catalog"
    package.mkdir()
    (package / "__init__.py").write_text("")
    (package / "_helper.py").write_text("X = 1\n")  # "_" modules are helpers, never products
    (package / "stray.py").write_text("X = 1\n")
    monkeypatch.syspath_prepend(str(tmp_path))
    with pytest.raises(ValueError, match=r"stray.py: a product module defines PRODUCT = Product\(...\)"):
        registry.discover("toy_catalog")
    (package / "stray.py").unlink()
    (package / "elsewhere.py").write_text(
        "from workflow.products.registry import FIGURE, Product\n"
        "PRODUCT = Product(kind=FIGURE, category='Elsewhere', caption='x', inputs=dict, build=print)\n")
    with pytest.raises(ValueError, match="elsewhere.py: PRODUCT: category 'Elsewhere' is not one of"):
        registry.discover("toy_catalog")


def dry_run(tmp_path, *targets):
    cmd = [sys.executable, "-m", "snakemake", "-n", "-s", os.path.join(REPO, "Snakefile"), "-d", str(tmp_path),
           "--config", "preset=tiny", "-c1", *targets]
    done = subprocess.run(cmd, capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    text = done.stdout + done.stderr
    stats = text[text.index("Job stats:"):]
    jobs = dict(re.findall(r"^(\w+)\s+(\d+)$", stats[:stats.index("total")], re.M))
    return text, {k: int(v) for k, v in jobs.items()}


def test_all_plans_every_product(tmp_path):
    text, jobs = dry_run(tmp_path)
    for name in FIGURES:
        for ext in ("pdf", "png"):
            assert f"results-tiny/figures/{name}.{ext}" in text
    for name in TABLES:
        for ext in ("csv", "md", "tex", "html"):
            assert f"results-tiny/tables/{name}.{ext}" in text
    assert PRODUCT_RULES <= set(jobs)
    assert jobs["figureA_training_curves"] == jobs["figureA_final_costs"] == jobs["tableA_task"] == len(TASKS)


@pytest.mark.parametrize("target, rule", [("results-tiny/figures/figure2.png", "figure2"),
                                          (f"results-tiny/tables/tableA_task_{TASKS[-1]}.md", "tableA_task")])
def test_one_product_is_its_own_target(tmp_path, target, rule):
    _, jobs = dry_run(tmp_path, target)
    assert set(jobs) & PRODUCT_RULES == {rule}
    assert jobs[rule] == 1
