"""workflow/slurm_bin/sbatch, the sbatch the Snakefile puts first on Snakemake's PATH: it
retries a scheduler's transient errors and passes any other error on at once. A fake sbatch
after it on PATH fails as told and records what each call got (the real cluster runs in
tests/test_workflow_slurm.py)."""
from __future__ import annotations

import os
import shutil
import subprocess
import time
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
WRAPPER_DIR = REPO / "workflow" / "slurm_bin"


def fake_sbatch(tmp_path: Path, error: str, failures: int) -> Path:
    """An sbatch that fails `failures` times with `error`, then prints a job id; each call's
    arguments and stdin go to calls/<n>."""
    bin_dir = tmp_path / "bin"
    (tmp_path / "calls").mkdir()
    bin_dir.mkdir()
    script = bin_dir / "sbatch"
    script.write_text(f"""#!/usr/bin/env bash
n=$(ls {tmp_path}/calls | wc -l)
{{ echo "$*"; cat; }} > {tmp_path}/calls/$n
if [ "$n" -lt {failures} ]; then echo "sbatch: error: {error}" >&2; exit 1; fi
echo 4242
""")
    script.chmod(0o755)
    return bin_dir


def sbatch(bin_dir: Path, *args: str, stdin: str = "", **env: str):
    path = f"{WRAPPER_DIR}{os.pathsep}{bin_dir}{os.pathsep}{os.environ['PATH']}"
    return subprocess.run(["sbatch", *args], input=stdin, capture_output=True, text=True, timeout=60,
                          env={**os.environ, "PATH": path, **env})


def calls(tmp_path: Path) -> list[str]:
    return [p.read_text() for p in sorted((tmp_path / "calls").iterdir(), key=lambda p: int(p.name))]


def test_a_transient_error_is_retried_with_the_same_arguments_and_script(tmp_path):
    bin_dir = fake_sbatch(tmp_path, "Batch job submission failed: Socket timed out on send/recv operation", 1)
    start = time.monotonic()
    done = sbatch(bin_dir, "--parsable", "-p", "debug", "/dev/stdin", stdin="#!/bin/sh\necho hi\n")
    assert done.returncode == 0 and done.stdout == "4242\n"
    # the plugin fails a submission whose stderr says "submission failed": nothing of the retried error
    assert done.stderr == ""
    assert calls(tmp_path) == ["--parsable -p debug /dev/stdin\n#!/bin/sh\necho hi\n"] * 2
    assert time.monotonic() - start >= 5  # the first retry waits 5 s


def test_an_error_in_the_request_fails_at_once(tmp_path):
    bin_dir = fake_sbatch(tmp_path, "Batch job submission failed: Invalid partition name specified", 1)
    done = sbatch(bin_dir, "--parsable", "--wrap=true")
    assert done.returncode == 1 and "Invalid partition name specified" in done.stderr
    assert len(calls(tmp_path)) == 1


def test_retrying_stops_at_its_time_budget_and_says_what_it_tried(tmp_path):
    bin_dir = fake_sbatch(tmp_path, "Unable to contact slurm controller (connect failure)", 5)
    done = sbatch(bin_dir, "--wrap=true", SAFERL_SBATCH_RETRY_S="6")
    assert done.returncode == 1 and len(calls(tmp_path)) == 2  # tried, waited 5 s, tried; 10 s more would pass 6
    assert "tried again after 5 s" in done.stderr and done.stderr.count("Unable to contact slurm controller") == 2


def test_the_wrapper_needs_a_real_sbatch_after_it(tmp_path):
    tools = tmp_path / "tools"  # what the wrapper runs before it looks, and no sbatch
    tools.mkdir()
    for name in ("bash", "dirname"):
        (tools / name).symlink_to(shutil.which(name))
    (tmp_path / "alias").symlink_to(WRAPPER_DIR)  # the wrapper's own folder under another name
    path = os.pathsep.join([str(tmp_path / "alias"), str(WRAPPER_DIR), str(tools)])
    done = subprocess.run([str(WRAPPER_DIR / "sbatch"), "--wrap=true"], capture_output=True, text=True,
                          env={**os.environ, "PATH": path})
    assert done.returncode == 127 and "no sbatch on PATH besides this retry wrapper" in done.stderr
