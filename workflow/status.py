"""Per-run state of the sweep: done, running, failed (with its log) or missing.

    python -m workflow.status [--preset NAME] [--config KEY=VALUE ...] [--configfile FILE] [--dir DIR]
                              [--json] [--only done,running,failed,stale,missing] [--verify] [--outdated]

It reads the same configuration as the Snakefile (config/config.yaml, the preset and the
overrides; `--preset NAME` is `--config preset=NAME`), prints which sweep and results folder
that is (workflow.sweep: DIR/results/ for the default preset, DIR/results-NAME/ for the others),
and looks at each run's folder under its runs/. A folder that holds another sweep's runs is
named as such, with the fix, and nothing is listed (exit 1). Each run is
- done: the run folder is a complete run of its spec (workflow.packs.pending_reason: every
  file present, of the size, rows and sha256 run.json recorded, and the config the spec
  asks for; `--verify` rehashes every table); trained by older code when any code version
  that trained it (a resume may cross a code change) differs from this checkout's
  (`--outdated` lists their run.json files: delete those to retrain the runs);
- running: the job marker (DIR/.../job.json, the lock workflow.train_job takes) names a
  process that is alive on this host, or a SLURM job still in squeue;
- failed: the job marker names a job that has ended, but the run is not complete (first the
  reason: the error the trainer recorded, or that its job ended early; then what is missing,
  what the rerun will do with the checkpoint, if any: resume from it, fall back to the
  previous generation, or refuse it and what to do; last the log's last line);
- stale: the folder holds a complete run of another config (its fields named): the sweep
  retrains it;
- missing: no job has started in this run folder (or the folder was deleted).
Rerunning the sweep's command submits exactly the failed and missing runs. The last line
counts every run of the sweep by state, whatever `--only` lists; a sweep with no run started
yet is summarised in one line instead of a row per run.
"""
from __future__ import annotations

import json
import os
import shutil
import socket
import subprocess
import sys
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Iterable

from algos import programs
from runs import runfolder
from runs import run_layout
from metrics.cli import OneLineParser, one_line
from runs.run_layout import CHECKPOINT_DIR, JOB_MARKER, RUN_FILES
from runs import runlock
from workflow.config_validation import (DEFAULT_CONFIG, ConfigError, merged_user_config, parse_overrides, resolve,
                                        user_layers)

STATES = ("done", "running", "failed", "stale", "missing")


@dataclass(frozen=True)
class RunStatus:
    run: str
    state: str
    log: str | None = None
    detail: str = ""


def run_keys(cfg: dict, workdir: Path | str = ".") -> list[tuple]:
    """(task, bound, algo, seed) of every run of the grid; in an adaptive sweep, with the
    seeds its rounds have chosen so far (workflow.adaptive.requested_seeds)."""
    from workflow import adaptive

    seeds = adaptive.requested_seeds(cfg, workdir)
    from workflow.config_validation import bounds_of

    return [(t, b, a, s) for t in cfg["tasks"] for b in bounds_of(cfg, t) for a in cfg["algos"] for s in seeds[a]]


def run_ids(cfg: dict) -> list[str]:
    return [run_layout.run_id(*key) for key in run_keys(cfg)]


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


def marker_alive(marker: dict, slurm_jobs: set[str] | None, host: str) -> bool:
    """Whether the job a marker describes still runs (unknown counts as not running)."""
    return bool(runlock.owner_alive(marker, host, slurm_jobs))


def checkpoint_detail(cfg: dict | None, key: tuple, ckpt_dir: Path) -> str:
    """What the rerun will do with a run's checkpoint folder, in words ('' when there is none)."""
    from runs import checkpoint

    if not checkpoint.exists(str(ckpt_dir)):
        return ""
    identity = None
    if cfg is not None:
        from algos.config import config_from_dict

        identity = checkpoint.identity_of(config_from_dict(cfg["specs"][run_layout.run_id(*key)]["config"]))
    return checkpoint.inspect(str(ckpt_dir), identity).detail


def older_code(meta: dict, code: str) -> str:
    """'' when every code version that trained the run is `code`, else which ones were not."""
    versions = meta.get("code_versions") or [meta.get("code_version") or "no version recorded"]
    other = [v for v in versions if v != code]
    return f"trained by older code ({', '.join(other)}; now {code})" if other else ""


def progress_detail(run_dir: Path) -> str:
    """A running run's fraction done and time left, from the progress.json its pack writes
    after each chunk ('' before the first chunk ends)."""
    progress = runfolder.read_json(run_dir / run_layout.PROGRESS)
    if not progress or not isinstance(progress.get("fraction"), (int, float)):
        return ""
    return (f"{100 * progress['fraction']:.0f}% (update {progress.get('update')}/{progress.get('updates')}), "
            f"{runfolder.duration_text(progress.get('eta_s'))} left")


def run_status(workdir: Path, run: str, slurm_jobs: set[str] | None, host: str, cfg: dict | None = None,
               key: tuple | None = None, code: str | None = None, verify: bool = False) -> RunStatus:
    from workflow.packs import pending_reason
    from workflow.sweep import runs_root

    run_dir = workdir / (runs_root(cfg) if cfg is not None else run_layout.RUNS_ROOT) / run
    marker = runlock.read_marker(run_dir)
    log = _log_of(workdir, marker)  # its pack's log
    log_text = str(log) if log is not None and log.exists() else None
    spec = cfg["specs"][run] if cfg is not None else None
    reason = (pending_reason(run_dir, spec, verify) if spec is not None
              else runfolder.incomplete_reason(run_dir, verify))
    if reason is None:
        meta = runfolder.read_run_json(run_dir) or {}
        return RunStatus(run, "done", log_text, older_code(meta, code) if code is not None else "")
    checkpoint = checkpoint_detail(cfg, key, run_dir / CHECKPOINT_DIR) if key is not None else ""
    if marker is not None and marker_alive(marker, slurm_jobs, host):
        detail = "; ".join(x for x in [progress_detail(run_dir), runlock.describe(marker)] if x)
        return RunStatus(run, "running", log_text, detail)
    if spec is not None and reason.startswith("trained with another config"):  # complete, of another config
        return RunStatus(run, "stale", log_text, f"{reason}; the sweep retrains it")
    incomplete = f"incomplete: {reason}" if any((run_dir / f).exists() for f in RUN_FILES) else ""
    if marker is not None:
        detail = "; ".join(x for x in [failure_reason(run_dir, marker), incomplete, checkpoint,
                                       _labelled_last_line(log)] if x)
        return RunStatus(run, "failed", log_text or str(run_dir / JOB_MARKER), detail)
    return RunStatus(run, "missing", detail="; ".join(x for x in [incomplete, checkpoint] if x))


def failure_reason(run_dir: Path, marker: dict) -> str:
    """Why a failed run stopped, stated first: the error its trainer recorded, else that its job
    ended before the run was complete (killed, out of time or memory: the log may say more)."""
    failure = runfolder.read_json(run_dir / run_layout.FAILURE_RECORD)
    if isinstance(failure, dict) and failure.get("error"):
        return f"error: {failure['error']}"
    return f"its job ({runlock.describe(marker)}) ended before the run was complete"


def _labelled_last_line(log: Path | None) -> str:
    last = _last_line(log) if log is not None else ""
    return f"the log's last line: {last}" if last else ""


def _log_of(workdir: Path, marker: dict | None) -> Path | None:
    """The log a job marker names, when it is a path inside the sweep's folder."""
    name = marker.get("log") if marker else None
    if not isinstance(name, str) or not name or "\0" in name:
        return None
    path = workdir / name
    try:
        return path if path.resolve().is_relative_to(Path(workdir).resolve()) else None
    except (OSError, RuntimeError):  # a symlink loop
        return None


def _checked(workdir: Path, run: str, *args, **kwargs) -> RunStatus:
    """run_status, or for a run folder that something else left unreadable (a hand-edited
    marker, a folder where a file belongs) a `missing` run saying what could not be read."""
    try:
        return run_status(workdir, run, *args, **kwargs)
    except (OSError, ValueError, TypeError, KeyError, AttributeError, OverflowError, RuntimeError) as err:
        return RunStatus(run, "missing", detail=f"run folder unreadable ({type(err).__name__}: {err})")


def _last_line(path: Path) -> str:
    try:
        lines = [l.strip() for l in path.read_text(errors="replace").splitlines() if l.strip()]
    except OSError:
        return ""
    return lines[-1][:160] if lines else ""


def sweep_status(cfg: dict, workdir: Path, slurm_jobs: set[str] | None = None, verify: bool = False
                 ) -> list[RunStatus]:
    host, code = socket.gethostname(), programs.code_version()
    return [_checked(workdir, run_layout.run_id(*key), slurm_jobs, host, cfg, key, code, verify)
            for key in run_keys(cfg, workdir)]


def outdated(statuses: Iterable[RunStatus]) -> list[RunStatus]:
    """Done runs trained by code other than this checkout's."""
    return [s for s in statuses if s.state == "done" and s.detail.startswith("trained by older code")]


def totals_line(statuses: list[RunStatus]) -> str:
    """How many runs of the whole sweep are in each state ('stale' only when there are any)."""
    counts = {state: sum(s.state == state for s in statuses) for state in STATES}
    return (", ".join(f"{n} {state}" for state, n in counts.items() if n or state != "stale")
            + f" of {len(statuses)} runs")


def not_started(statuses: list[RunStatus]) -> bool:
    """No run of the sweep has a job, a file or a checkpoint yet (every one missing, nothing to say)."""
    return bool(statuses) and all(s.state == "missing" and not s.detail for s in statuses)


def format_table(statuses: Iterable[RunStatus], only: Iterable[str] = STATES) -> str:
    """One row per run in the states `only` names (the reason first, then the log), and the
    totals of every run of the sweep; a sweep not started yet is one line, not a row per run."""
    statuses, only = list(statuses), set(only)
    if not_started(statuses):
        return (f"not started: all {len(statuses)} runs missing (no job has run in this sweep's folder); "
                "the sweep's command starts them\n" + totals_line(statuses))
    shown = [s for s in statuses if s.state in only]
    width = max((len(s.run) for s in shown), default=3)
    lines = [f"{'run':<{width}}  {'state':<8}  detail / log"]
    for s in shown:
        extra = "  ".join(x for x in [s.detail, s.log if s.state in ("failed", "running") else None] if x)
        lines.append(f"{s.run:<{width}}  {s.state:<8}  {extra}".rstrip())
    lines.append(totals_line(statuses))
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    parser = OneLineParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--configfile", default=str(DEFAULT_CONFIG))
    parser.add_argument("--preset", help="the sweep's preset (the same as --config preset=NAME)")
    parser.add_argument("--config", nargs="*", default=[], metavar="KEY=VALUE",
                        help="the same overrides as `snakemake --config`, e.g. preset=tiny")
    parser.add_argument("--dir", default=".", help="the sweep's working directory (default: .)")
    parser.add_argument("--only", default=",".join(STATES), help="states to list, comma-separated")
    parser.add_argument("--json", action="store_true", help="one JSON object per run")
    parser.add_argument("--verify", action="store_true",
                        help="hash every table of every done run (planning rehashes only files that changed)")
    parser.add_argument("--outdated", action="store_true",
                        help="print only the run.json paths of runs trained by other code (delete them to retrain)")
    args = parser.parse_args(argv)
    try:
        overrides = ([f"preset={args.preset}"] if args.preset else []) + list(args.config)
        layers = user_layers([args.configfile], parse_overrides(overrides, "--config"))  # errors name the file
        cfg = resolve(merged_user_config(layers), layers=layers)
    except ConfigError as e:
        print(f"invalid configuration: {one_line(e)}", file=sys.stderr)
        return 1
    if not Path(args.dir).is_dir():
        print(one_line(f"--dir {args.dir}: {'not a folder' if os.path.exists(args.dir) else 'no such folder'} "
                       "(the sweep's working directory)"), file=sys.stderr)
        return 1
    only = {s.strip() for s in args.only.split(",")}
    unknown = only - set(STATES)
    if unknown:
        print(f"--only: unknown state(s) {sorted(unknown)}; choose from {list(STATES)}", file=sys.stderr)
        return 1
    from workflow import sweep

    say = (lambda line: print(line, file=sys.stderr)) if args.json or args.outdated else print
    say(sweep.headline(cfg, len(run_keys(cfg, args.dir))))
    verdict = sweep.check(cfg, args.dir)
    if (clock := sweep.clock_notice(cfg, args.dir)):
        say(clock)
    from workflow import packs

    if (blocked := packs.not_folders(cfg, args.dir)):
        say(packs.not_folders_message(blocked))
    if verdict.kind == "other":
        print(one_line(verdict.message), file=sys.stderr)
        return 1
    if verdict.kind == "changed":
        say(one_line(verdict.message))
    elif verdict.kind == "new" and sweep.other_sweeps(cfg, args.dir):
        say(f"{sweep.results_dir(cfg)}/ has no runs yet; other sweeps here: {', '.join(sweep.other_sweeps(cfg, args.dir))}"
            " (--preset NAME lists one)")
    statuses = sweep_status(cfg, Path(args.dir), slurm_active_jobs(), args.verify)
    if args.outdated:
        for s in outdated(statuses):
            print(Path(args.dir) / sweep.runs_root(cfg) / s.run / run_layout.RUN_JSON)
        return 0
    if args.json:
        for s in statuses:
            if s.state in only:
                print(json.dumps(asdict(s)))
    else:
        print(format_table(statuses, only))
    return 0


if __name__ == "__main__":
    sys.exit(main())
