"""Config files are read by the project's strict YAML reader (metrics.strict_yaml) before
Snakemake's own: an unsafe tag, a tab or a repeated key is refused naming the file, line and
cause, never with Snakemake's "not valid JSON or YAML ... mix whitespace and tab"."""
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parent.parent
UNSAFE = 'preset: tiny\nseeds: !!python/object/apply:os.system ["touch {marker}"]\n'


def test_the_workflows_own_config_file_is_read_strictly_before_snakemake_reads_it(tmp_path):
    copy = tmp_path / "repo"  # the Snakefile reads config/config.yaml beside itself
    copy.mkdir()
    shutil.copy(REPO / "Snakefile", copy)
    for folder in ("workflow", "config", "cluster_profiles"):
        shutil.copytree(REPO / folder, copy / folder, ignore=shutil.ignore_patterns("__pycache__"))
    marker = tmp_path / "code-ran"
    (copy / "config" / "config.yaml").write_text(UNSAFE.format(marker=marker))
    work = tmp_path / "work"
    work.mkdir()
    proc = subprocess.run([sys.executable, "-m", "snakemake", "--snakefile", str(copy / "Snakefile"), "-n"], cwd=work,
                          env={**os.environ, "PYTHONPATH": str(REPO)}, capture_output=True, text=True, timeout=300)
    out = proc.stdout + proc.stderr
    assert proc.returncode != 0 and not marker.exists()
    assert (f"invalid configuration: {copy / 'config' / 'config.yaml'}: not valid YAML: line 2, column 8: could not "
            "determine a constructor for the tag 'tag:yaml.org,2002:python/object/apply:os.system'") in out, out
    assert "mix whitespace" not in out


@pytest.mark.parametrize("text, cause", [
    (UNSAFE, "line 2, column 8: could not determine a constructor for the tag "
             "'tag:yaml.org,2002:python/object/apply:os.system' (a config file holds plain values: tags such as "
             "!!python/object are never read)"),
    ("preset:\ttiny\n\t- x\n", "line 1, column 8: while scanning for the next token found character '\\t' "
                               "that cannot start any token"),
], ids=["unsafe-tag", "tab"])
def test_a_config_file_that_is_not_plain_yaml_is_refused_naming_file_line_and_cause(tmp_path, text, cause):
    path = tmp_path / "mine.yaml"
    path.write_text(text.format(marker=tmp_path / "code-ran"))
    for command in (["-m", "workflow.config_validation", str(path)],
                    ["-m", "workflow.launch", "--profile", str(REPO / "cluster_profiles" / "local"), "--dry-run",
                     "--", "--configfile", str(path)]):
        proc = subprocess.run([sys.executable, *command], cwd=tmp_path, env={**os.environ, "PYTHONPATH": str(REPO)},
                              capture_output=True, text=True, timeout=120)
        assert proc.returncode == 1, proc.stderr
        assert proc.stderr == f"invalid configuration: {path}: not valid YAML: {cause}\n", proc.stderr
