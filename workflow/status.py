"""Per-run state of the sweep: done, running, failed (with its log) or missing.

    python -m workflow.status [--config KEY=VALUE ...] [--configfile FILE] [--dir DIR] [--json]
                              [--only done,running,failed,missing]

It reads the same configuration as the Snakefile (config/config.yaml, the preset and the
overrides) and looks at each run's folder under DIR/results/runs/:
- done: episodes.parquet, trace.parquet and run.json exist;
- running: the job marker (DIR/.../job.json, written by workflow.train_job when the trainer
  starts) names a process that is alive on this host, or a SLURM job still in squeue;
- failed: the job marker names a job that has ended, but the run is not done (the log's
  last line is shown); a checkpoint, when there is one, is where the rerun resumes;
- missing: no job has started in this run folder (or the folder was deleted).
Rerunning the sweep's command submits exactly the failed and missing runs.
"""
from __future__ import annotations

import argparse
import json
import os
import shutil
import socket
import subprocess
import sys
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Iterable

import yaml

from workflow.config_validation import DEFAULT_CONFIG, ConfigError, deep_merge, parse_overrides, resolve

RUN_FILES = ("episodes.parquet", "trace.parquet", "run.json")
JOB_MARKER = "job.json"
STATES = ("done", "running", "failed", "missing")


@dataclass(frozen=True)
class RunStatus:
    run: str
    state: str
    log: str | None = None
    detail: str = ""


def bound_label(bound: float) -> str:
    return str(int(bound)) if float(bound).is_integer() else repr(float(bound))


def run_ids(cfg: dict) -> list[str]:
    return [f"{t}/d{bound_label(b)}/{a}/seed{s}"
            for t in cfg["tasks"] for b in cfg["bounds"] for a in cfg["algos"] for s in cfg["seeds"]]


def slurm_active_jobs() -> set[str] | None:
    """Ids of this user's SLURM jobs that are pending or running; None without SLURM."""
    if shutil.which("squeue") is None:
        return None
    try:
        out = subprocess.run(["squeue", "--me", "-h", "-o", "%i|%T"], capture_output=True,
                             text=True, timeout=30, check=True).stdout
    except (subprocess.SubprocessError, OSError):
        return None
    return {line.split("|")[0] for line in out.splitlines()
            if line.strip() and line.split("|")[1] in {"PENDING", "RUNNING", "CONFIGURING", "COMPLETING", "SUSPENDED"}}


def _process_alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


def marker_alive(marker: dict, slurm_jobs: set[str] | None, host: str) -> bool:
    """Whether the job a marker describes still runs."""
    job_id = marker.get("slurm_job_id")
    if job_id and slurm_jobs is not None:
        return str(job_id) in slurm_jobs
    if marker.get("host") == host and isinstance(marker.get("pid"), int):
        return _process_alive(marker["pid"])
    return False


def run_status(workdir: Path, run: str, slurm_jobs: set[str] | None, host: str) -> RunStatus:
    run_dir = workdir / "results" / "runs" / run
    log = workdir / "results" / "logs" / "train" / f"{run}.log"
    log_text = str(log) if log.exists() else None
    if all((run_dir / f).exists() for f in RUN_FILES):
        return RunStatus(run, "done", log_text)
    marker = None
    if (run_dir / JOB_MARKER).exists():
        try:
            marker = json.loads((run_dir / JOB_MARKER).read_text())
        except (OSError, json.JSONDecodeError):
            marker = None
    checkpoint = "; checkpoint present (the rerun resumes from it)" if (run_dir / "checkpoint").exists() else ""
    if marker is not None and marker_alive(marker, slurm_jobs, host):
        where = f"SLURM job {marker['slurm_job_id']}" if marker.get("slurm_job_id") else f"pid {marker.get('pid')} on {marker.get('host')}"
        return RunStatus(run, "running", log_text, where)
    if marker is not None:
        return RunStatus(run, "failed", log_text or str(run_dir / JOB_MARKER), _last_line(log) + checkpoint)
    return RunStatus(run, "missing", detail=checkpoint.lstrip("; "))


def _last_line(path: Path) -> str:
    try:
        lines = [l.strip() for l in path.read_text(errors="replace").splitlines() if l.strip()]
    except OSError:
        return ""
    return lines[-1][:160] if lines else ""


def sweep_status(cfg: dict, workdir: Path, slurm_jobs: set[str] | None = None) -> list[RunStatus]:
    host = socket.gethostname()
    return [run_status(workdir, run, slurm_jobs, host) for run in run_ids(cfg)]


def format_table(statuses: Iterable[RunStatus]) -> str:
    statuses = list(statuses)
    width = max((len(s.run) for s in statuses), default=3)
    lines = [f"{'run':<{width}}  {'state':<8}  log / detail"]
    for s in statuses:
        extra = "  ".join(x for x in [s.log if s.state in ("failed", "running") else None, s.detail] if x)
        lines.append(f"{s.run:<{width}}  {s.state:<8}  {extra}".rstrip())
    counts = {state: sum(s.state == state for s in statuses) for state in STATES}
    lines.append(", ".join(f"{n} {state}" for state, n in counts.items()) + f" of {len(statuses)} runs")
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--configfile", default=str(DEFAULT_CONFIG))
    parser.add_argument("--config", nargs="*", default=[], metavar="KEY=VALUE",
                        help="the same overrides as `snakemake --config`, e.g. preset=tiny")
    parser.add_argument("--dir", default=".", help="the sweep's working directory (default: .)")
    parser.add_argument("--only", default=",".join(STATES), help="states to list, comma-separated")
    parser.add_argument("--json", action="store_true", help="one JSON object per run")
    args = parser.parse_args(argv)
    try:
        with open(args.configfile) as f:
            user = yaml.safe_load(f) or {}
        cfg = resolve(deep_merge(user, parse_overrides(args.config, "--config")))
    except (ConfigError, OSError) as e:
        print(f"invalid configuration: {e}", file=sys.stderr)
        return 1
    only = {s.strip() for s in args.only.split(",")}
    unknown = only - set(STATES)
    if unknown:
        print(f"--only: unknown state(s) {sorted(unknown)}; choose from {list(STATES)}", file=sys.stderr)
        return 1
    statuses = sweep_status(cfg, Path(args.dir), slurm_active_jobs())
    shown = [s for s in statuses if s.state in only]
    if args.json:
        for s in shown:
            print(json.dumps(asdict(s)))
    else:
        print(format_table(shown))
    return 0


if __name__ == "__main__":
    sys.exit(main())
