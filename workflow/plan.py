"""What Snakemake would run: the jobs of a dry run, by rule, with their outputs.

    python -m workflow.plan [SNAKEMAKE ARGS...]

runs `snakemake --dry-run` in the current folder and prints one line per planned job
(rule, then its outputs) and the count per rule. Used to check which jobs a change
triggers (a threshold: only tiers and what reads them; a deleted run: that run and what
depends on it) without running anything.
"""
from __future__ import annotations

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
    cmd = [python, "-m", "snakemake", "--snakefile", str(snakefile), "--dry-run", "--cores", "1", *args]
    proc = subprocess.run(cmd, cwd=workdir, capture_output=True, text=True, env=env)
    if proc.returncode != 0:
        raise RuntimeError(f"{' '.join(cmd)} failed ({proc.returncode}):\n{proc.stdout}\n{proc.stderr}")
    return parse_jobs(proc.stdout + "\n" + proc.stderr)


def failure_line(log: str) -> str:
    """The line of a failed Snakemake run that says why: our own configuration error when there
    is one, else Snakemake's first error line, else its last line."""
    lines = [line.strip() for line in log.splitlines() if line.strip()]
    for marker in ("invalid configuration:", "Error"):
        found = next((line for line in lines if marker in line and not line.startswith("File ")), None)
        if found is not None:
            return found
    return lines[-1] if lines else "no output"


def main(argv: list[str] | None = None) -> int:
    try:
        jobs = dry_run(".", list(sys.argv[1:] if argv is None else argv))
    except RuntimeError as err:
        print(f"error: snakemake --dry-run failed: {failure_line(str(err).split(chr(10), 1)[-1])}", file=sys.stderr)
        return 1
    for job in jobs:
        print(job.rule, " ".join(job.outputs))
    counts = Counter(job.rule for job in jobs)
    print(", ".join(f"{n} {rule}" for rule, n in sorted(counts.items())) or "nothing to do")
    return 0


if __name__ == "__main__":
    sys.exit(main())
