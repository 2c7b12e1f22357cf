"""What Snakemake would run: the jobs of a dry run, by rule, with their outputs.

    python -m workflow.plan [--preset NAME] [SNAKEMAKE ARGS...]

runs `snakemake --dry-run` in the current folder and prints the sweep and results folder it
plans (the Snakefile's first line, workflow.sweep), one line per planned job (rule, then its
outputs) and the count per rule. `--preset NAME` is `--config preset=NAME`; the other
arguments go to Snakemake as they are (targets, --configfile, --config, --workflow-profile). Used to check which jobs a change
triggers (a threshold: only tiers and what reads them; a deleted run: that run and what
depends on it) without running anything.
"""
from __future__ import annotations

import os
import re
import subprocess
import sys
from collections import Counter
from dataclasses import dataclass
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
_RULE = re.compile(r"^\s*(?:local)?(?:rule|checkpoint) (\w+):\s*$")
_OUTPUT = re.compile(r"^\s*output: (.*)$")


@dataclass(frozen=True)
class PlannedJob:
    rule: str
    outputs: tuple[str, ...]


def parse_jobs(log: str) -> list[PlannedJob]:
    """Jobs from Snakemake's job listing (dry run or real run; group jobs too)."""
    jobs: list[PlannedJob] = []
    rule = None
    outputs: tuple[str, ...] = ()
    for line in log.splitlines():
        m = _RULE.match(line)
        if m:
            if rule is not None:
                jobs.append(PlannedJob(rule, outputs))
            rule, outputs = m.group(1), ()
            continue
        if rule is not None:
            o = _OUTPUT.match(line)
            if o:
                outputs = tuple(p.strip() for p in o.group(1).split(","))
            elif not line.strip() or line.lstrip().startswith("["):
                jobs.append(PlannedJob(rule, outputs))
                rule = None
    if rule is not None:
        jobs.append(PlannedJob(rule, outputs))
    return jobs


def dry_run(workdir: str | Path, args: list[str] = (), snakefile: str | Path = REPO / "Snakefile",
            python: str = sys.executable, env: dict | None = None) -> list[PlannedJob]:
    """Planned jobs of `snakemake --dry-run ARGS` in `workdir`; raises on a Snakemake error."""
    return parse_jobs(dry_run_log(workdir, args, snakefile, python, env))


def dry_run_log(workdir: str | Path, args: list[str] = (), snakefile: str | Path = REPO / "Snakefile",
                python: str = sys.executable, env: dict | None = None) -> str:
    """The log of `snakemake --dry-run ARGS` in `workdir`, every job's files listed whole
    (workflow.joblog); raises on a Snakemake error."""
    from workflow.joblog import FULL_LISTING_ENV

    cmd = [python, "-m", "snakemake", "--snakefile", str(snakefile), "--dry-run", "--cores", "1", *args]
    env = {**(os.environ if env is None else env), FULL_LISTING_ENV: "1"}
    proc = subprocess.run(cmd, cwd=workdir, capture_output=True, text=True, env=env)
    if proc.returncode != 0:
        raise RuntimeError(f"{' '.join(cmd)} failed ({proc.returncode}):\n{proc.stdout}\n{proc.stderr}")
    return proc.stdout + "\n" + proc.stderr


def sweep_line(log: str) -> str:
    """The Snakefile's first line: which sweep, which results folder (workflow.sweep.headline)."""
    return next((line.strip() for line in log.splitlines() if line.startswith("sweep ")), "")


def failure_line(log: str) -> str:
    """The line of a failed Snakemake run that says why: our own configuration error when there
    is one, else Snakemake's first error line, else its last line."""
    lines = [line.strip() for line in log.splitlines() if line.strip()]
    for marker in ("invalid configuration:", "holds runs of another sweep", "Error"):
        found = next((line for line in lines if marker in line and not line.startswith("File ")), None)
        if found is not None:
            return found
    return lines[-1] if lines else "no output"


def main(argv: list[str] | None = None) -> int:
    args = list(sys.argv[1:] if argv is None else argv)
    if args and args[0] in ("-h", "--help"):
        print(__doc__.strip())
        return 0
    preset = None
    if "--preset" in args:
        i = args.index("--preset")
        if i + 1 >= len(args) or args[i + 1].startswith("-"):
            print("error: --preset needs a NAME (a preset of config/presets/)", file=sys.stderr)
            return 2
        preset = args[i + 1]
        args = args[:i] + args[i + 2:]
    from workflow.sweep import preset_args

    try:
        log = dry_run_log(".", preset_args(args, preset))
    except RuntimeError as err:
        message = str(err).split(chr(10), 1)[-1]
        if sweep_line(message):
            print(sweep_line(message))
        print(f"error: snakemake --dry-run failed: {failure_line(message)}", file=sys.stderr)
        return 1
    jobs = parse_jobs(log)
    if sweep_line(log):
        print(sweep_line(log))
    for job in jobs:
        print(job.rule, " ".join(job.outputs))
    counts = Counter(job.rule for job in jobs)
    print(", ".join(f"{n} {rule}" for rule, n in sorted(counts.items())) or "nothing to do")
    return 0


if __name__ == "__main__":
    sys.exit(main())
