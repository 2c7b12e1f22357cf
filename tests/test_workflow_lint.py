"""The workflow as a model Snakemake workflow reads: `snakemake --lint` finds nothing but the
one kind docs/workflow.md justifies (no conda environment or container per rule: one Python
environment serves every rule), the rule files are included by name, local rules are marked one
way, and reading the workflow changes no environment variable (workflow.jobenv sets the jobs'
environment when a real run starts)."""
from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

from workflow import jobenv

REPO = Path(__file__).resolve().parent.parent
# The finding kinds docs/workflow.md justifies ("Lint"), by Snakemake's title.
JUSTIFIED = {"Specify a conda environment or container for each rule."}
# The rules that are cluster jobs; every other rule says `localrule: True`.
CLUSTER_RULES = re.compile(r"train_\w*|aggregate")


def parse_lints(text: str) -> list[tuple[str, str]]:
    """(item, kind) per finding of `snakemake --lint`'s text output: item "rule NAME" or
    "snakefile PATH", kind the finding's title less its line number."""
    found, item = [], None
    for line in text.splitlines():
        header = re.match(r"Lints for (rule \S+|snakefile \S+?)( \(line .*\))?:$", line)
        if header:
            item = header.group(1)
            continue
        finding = re.match(r"    \* (.+):$", line)
        if finding and item is not None:
            found.append((item, re.sub(r" in line \d+", "", finding.group(1))))
    return found


def written(folder: Path) -> list[str]:
    """What is in `folder` but Snakemake's own bookkeeping (.snakemake/)."""
    return sorted(p.name for p in folder.iterdir() if p.name != ".snakemake")


def lint(tmp_path: Path, *args: str) -> tuple[subprocess.CompletedProcess, list[tuple[str, str]]]:
    env = {**os.environ, "PYTHONPATH": str(REPO), "COLUMNS": "200"}
    proc = subprocess.run([sys.executable, "-m", "snakemake", "--snakefile", str(REPO / "Snakefile"), "--lint", *args],
                          cwd=tmp_path, capture_output=True, text=True, env=env, timeout=600)
    assert "Traceback" not in proc.stderr and "Error" not in proc.stderr, proc.stderr[-3000:]
    return proc, parse_lints(proc.stdout + proc.stderr)


def test_the_parser_reads_each_finding_of_snakemakes_lint_output():
    text = """Lints for snakefile /x/Snakefile:
    * Path composition with '+' in line 8:
      This becomes quickly unreadable.

Lints for rule summarise_goal_ppo_p0 (line 16, /x/workflow/rules/metrics.smk):
    * No log directive defined:
      Without a log directive, all output will be printed
    * Specify a conda environment or container for each rule.:
      This way, the used software for each specific step is documented
"""
    assert parse_lints(text) == [
        ("snakefile /x/Snakefile", "Path composition with '+'"),
        ("rule summarise_goal_ppo_p0", "No log directive defined"),
        ("rule summarise_goal_ppo_p0", "Specify a conda environment or container for each rule.")]


@pytest.mark.parametrize("config", ["default", "adaptive"])
def test_lint_finds_only_the_justified_kind(tmp_path, config):
    args = []
    if config == "adaptive":  # the adaptive rules exist only in an adaptive sweep
        (tmp_path / "a.yaml").write_text("preset: tiny\nseeds: 2\nadaptive: {target: 0.9, step: 1, max_seeds: 3}\n")
        args = ["--configfile", "a.yaml"]
    proc, found = lint(tmp_path, *args)
    assert found, proc.stdout[-2000:] + proc.stderr[-2000:]  # the justified kind is reported, so it is read
    unjustified = sorted({f"{item}: {kind}" for item, kind in found if kind not in JUSTIFIED})
    assert unjustified == []
    # only script and shell rules need a software environment; none is a snakefile-level finding
    assert all(item.startswith("rule ") for item, _ in found)
    assert written(tmp_path) == (["a.yaml"] if args else [])  # linting wrote nothing


def test_every_justified_kind_is_explained_in_the_docs():
    docs = (REPO / "docs" / "workflow.md").read_text()
    section = " ".join(docs.split("## Lint", 1)[1].split("\n## ", 1)[0].split())
    for kind in JUSTIFIED:
        assert kind in section


def test_rule_files_are_included_by_name_and_local_rules_marked_one_way():
    snakefile = (REPO / "Snakefile").read_text()
    included = re.findall(r'^include: "workflow/rules/(\w+\.smk)"$', snakefile, re.M)
    assert sorted(included) == sorted(p.name for p in (REPO / "workflow" / "rules").glob("*.smk"))
    assert included[0] == "common.smk" and "glob" not in snakefile
    for path in [REPO / "Snakefile", *sorted((REPO / "workflow" / "rules").glob("*.smk"))]:
        text = path.read_text()
        assert "localrules" not in text and "workflow.localrules" not in text, path
        assert "os.environ" not in text and "tempfile" not in text, path


def rule_blocks(text: str) -> list[tuple[str, str]]:
    """(name, text) of each rule or checkpoint of a rule file (a generated rule: its `name:`)."""
    starts = [m for m in re.finditer(r"^ *(?:rule|checkpoint)\b *(\w*) *:", text, re.M)]
    blocks = []
    for k, m in enumerate(starts):
        body = text[m.start():starts[k + 1].start() if k + 1 < len(starts) else len(text)]
        named = re.search(r'^ +name: f?"?(\w+)', body, re.M)
        blocks.append((m.group(1) or (named.group(1) if named else "?"), body))
    return blocks


def test_every_rule_but_training_and_aggregate_is_marked_local():
    blocks = [b for path in [REPO / "Snakefile", *sorted((REPO / "workflow" / "rules").glob("*.smk"))]
              for b in rule_blocks(path.read_text())]
    names = {name for name, _ in blocks}
    assert {"all", "runs", "metrics", "stale_run", "aggregate", "tiers", "write_thresholds", "report",
            "seed_round", "seed_table", "train_", "summarise_"} <= names, names
    for name, body in blocks:
        local = re.search(r"^ +localrule: True$", body, re.M) is not None
        assert local != bool(CLUSTER_RULES.fullmatch(name)), name


def test_the_jobs_environment_puts_this_checkout_and_the_sbatch_wrapper_first(tmp_path):
    repo = str(REPO)
    env = jobenv.job_environment(repo, {"PATH": "/usr/bin", "PYTHONPATH": "/elsewhere"}, python="/venv/bin/python")
    assert env["PYTHONPATH"] == f"{repo}{os.pathsep}/elsewhere"
    assert env["PATH"].split(os.pathsep) == ["/venv/bin", str(REPO / "workflow" / "slurm_bin"), "/usr/bin"]
    assert env["JAX_COMPILATION_CACHE_DIR"] == os.path.abspath(".jax_cache")
    # a wrapper already on the PATH is not added twice; a cache folder already set is kept
    again = jobenv.job_environment(repo, {**env, "JAX_COMPILATION_CACHE_DIR": "/cache"}, python="/venv/bin/python")
    assert again["PATH"].split(os.pathsep).count(str(REPO / "workflow" / "slurm_bin")) == 1
    assert again["JAX_COMPILATION_CACHE_DIR"] == "/cache"
    assert (REPO / "workflow" / "slurm_bin" / "sbatch").is_file()
