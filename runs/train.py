"""The training job: train one run, or a pack of runs of one program, into their run folders.

    python -m runs.train --task goal --bound 25 --algo ppo_lag --seed 0 --out DIR   # one run
    python -m runs.train --spec DIR1/spec.json DIR2/spec.json ...                    # a pack

A run spec (spec.json, written by the workflow: runs.runfolder.write_spec) holds the trainer
preset and the resolved config of the run in its folder; the trainer trains exactly that.
This module is the job around the training loop (runs.pack): the command line, the folder
locks, which folders need training, the signals, the run folders, failure records and exit
statuses. Runs of one static config train together as one program. Training goes in jitted
chunks of updates; every member checkpoints into its own folder between chunks (every
`checkpoint_every_s` seconds, and on SIGTERM / SIGUSR2 or before `--stop-at`, after which the
job exits with status 75), resumes from DIR/checkpoint/ when restarted, then evaluates the
final policy on fresh layouts with exploration noise and greedily and writes its run folder.
A complete folder that holds the same run is left alone; one that holds another run (another
config) is refused, naming the fields; a half-written one is trained again. An error that a
retry would meet again is recorded in DIR/failure.json for workflow.train_job; the exit status
is then 1, after the other members finished. Progress goes to stderr. See docs/algos.md.
"""
from __future__ import annotations

import argparse
import errno
import os
import platform
import shutil
import signal
import sys
import textwrap
import time

from runs import runlock
from algos.config import ALGOS, BUDGET_FIELDS, PRESETS  # no JAX: XLA_FLAGS can still be set in main
from algos.registry import ALGORITHMS
from runs.pack import Member, Progress, member_name, train_pack
from algos.programs import enable_compilation_cache

EXIT_TEMPFAIL = 75  # EX_TEMPFAIL: interrupted, checkpoint written, restart to continue
# I/O errors a retry may not meet again (space freed, quota raised, a storage hiccup)
TRANSIENT_ERRNOS = {errno.ENOSPC, errno.EDQUOT, errno.EIO, errno.EAGAIN, errno.ESTALE}


def is_transient(err: OSError) -> bool:
    """An OSError of TRANSIENT_ERRNOS (pyarrow's I/O errors carry no errno: read their text)."""
    if err.errno is not None:
        return err.errno in TRANSIENT_ERRNOS
    return any(os.strerror(code) in str(err) for code in TRANSIENT_ERRNOS)


class _StopFlag:
    """Set by SIGTERM / SIGUSR2 / SIGINT; the loop asks `reason()` between chunks. A second
    Ctrl-C stops at once (KeyboardInterrupt: no checkpoint of the current chunk)."""

    def __init__(self):
        self.signal = None

    def __call__(self, signum, frame):
        if signum == signal.SIGINT and self.signal == signal.SIGINT:
            raise KeyboardInterrupt
        self.signal = signum

    def reason(self) -> str | None:
        return None if self.signal is None else signal.Signals(self.signal).name


def _to_train(members, say) -> tuple[list, dict]:
    """The members that need training, and failures of folders that hold another run."""
    from runs import runfolder
    from runs import run_layout

    todo, failures = [], {}
    for m in members:
        meta = runfolder.read_run_json(m.out)
        reason = runfolder.incomplete_reason(m.out)
        if reason is None:
            differ = runfolder.config_difference(meta.get("config"), m.config.to_dict())
            if differ:
                failures[m.out] = (f"{m.out} holds a complete run of another config (fields {differ}); "
                                   f"delete the folder to train this run there")
                continue
            say(f"[runs.train] {m.out}: run already complete")
            continue
        stale = os.path.join(m.out, run_layout.RUN_JSON)
        if os.path.exists(stale):  # a half-written folder must not look complete while it is retrained
            say(f"[runs.train] {m.out}: incomplete ({reason}); training it again")
            os.remove(stale)
        todo.append(m)
    return todo, failures


def run_pack(members, *, env=None, stop_after_chunks: int | None = None, quiet: bool = False,
             stop_at: float | None = None, planned: int = 0, tensorboard: bool = True,
             wandb: dict | None = None) -> int:
    """Train (or resume) every member (runs.pack.Member); returns the exit status: 0, 75 when
    stopped early (checkpoints written), 1 when a member failed (recorded in its failure.json).

    `stop_at` (a time.time() value): checkpoint and exit 75 as soon as another chunk might
    not finish before it (the job's time limit minus a margin, see workflow.train_job).
    `tensorboard`: each run's curves as TensorBoard event files in its folder, live (runs.curves);
    `wandb`: log each finished run to W&B with these runs.wandb_runs.log_run options (None: off).
    """
    say = (lambda text: None) if quiet else (lambda text: print(text, file=sys.stderr, flush=True))
    if wandb is not None:
        from runs.wandb_runs import check_available

        check_available()  # before any lock or training: a missing extra fails at once
    owned, refused = _lock(members, say)
    try:
        return _train_owned(owned, refused, env, say, stop_after_chunks, stop_at, planned, tensorboard, wandb)
    finally:
        for m in owned:
            runlock.release(m.out)


def _lock(members, say) -> tuple[list, list]:
    """(members whose folder lock this process holds, members left out: another live job
    trains their folder). Temporary files of interrupted writes in owned folders are removed."""
    from metrics.atomic import remove_leftovers

    owned, refused = [], []
    for m in members:
        os.makedirs(m.out, exist_ok=True)
        try:
            runlock.acquire(m.out, wait_s=0)
        except runlock.RunFolderLocked as err:
            say(f"runs.train: {err}")
            refused.append(m)
            continue
        owned.append(m)
        remove_leftovers(m.out)
    return owned, refused


def _train_owned(members, refused, env, say, stop_after_chunks, stop_at, planned, tensorboard, wandb) -> int:
    todo, failures = _to_train(members, say)
    why = None
    if todo:
        stop = _StopFlag()  # installed before compiling: a signal then ends the run with 75, not a kill
        previous = {s: signal.signal(s, stop) for s in (signal.SIGTERM, signal.SIGUSR2, signal.SIGINT)
                    if signal.getsignal(s) is not signal.SIG_IGN}  # an ignored Ctrl-C (nohup, &) stays so
        try:
            outcome = train_pack(todo, env=env, stop=stop.reason, say=say, stop_after_chunks=stop_after_chunks,
                                 stop_at=stop_at, planned=planned, tensorboard=tensorboard)
            _write_finished(outcome, len(todo), say, wandb)  # still under the handlers: a signal now is not a kill
        finally:
            for s, handler in previous.items():
                signal.signal(s, handler)
        why = outcome.stopped
        failures |= outcome.failures
    for m in members:
        if m.out in failures:
            record_failure(m.out, failures[m.out])
            say(f"runs.train: {failures[m.out]}")
        elif why is None:
            clear_failure(m.out)
    if failures or refused:
        return 1
    if why is not None:
        say(f"[runs.train] {why}: checkpoints written, exiting {EXIT_TEMPFAIL}")
        return EXIT_TEMPFAIL
    return 0


def _write_finished(outcome, pack_size: int, say, wandb: dict | None = None) -> None:
    """The run folder of every member that finished training and evaluation (and its W&B run)."""
    timing = outcome.timing
    for m, p, final in outcome.finished:
        write_run_folder(m, p, final, timing, pack_size)
        if wandb is not None:
            _log_wandb(m, p, final, wandb, say)
        J = len(p.host.arrays()["update"])
        say(f"[{member_name(m)}] done: {J} iterates, {m.config.num_updates * m.config.steps_per_update:,} "
            f"steps in {p.train_s:.1f} s train (pack of {pack_size}; +{timing['compile_s']:.1f} s compile ({timing['program_source']}), "
            f"{timing['eval_wall_s']:.1f} s eval) -> {m.out}")


def _log_wandb(m: Member, p: Progress, final: dict, options: dict, say) -> None:
    """The finished run's W&B run; a W&B error is said, not raised: the run folder is complete
    and stays so (W&B is a copy of its curves)."""
    from runs.wandb_runs import log_run

    try:
        where = log_run(m, p.host.arrays(), final, **options)
    except Exception as err:  # wandb's own errors have no common base class
        say(f"[{member_name(m)}] warning: W&B logging failed, the run folder is complete: {type(err).__name__}: {err}")
        return
    say(f"[{member_name(m)}] W&B run ({options.get('mode', 'offline')}) -> {where}")


def run(config, out_dir: str, *, env=None, stop_after_chunks: int | None = None, preset: str = "",
        quiet: bool = False, stop_at: float | None = None) -> int:
    """Train (or resume) one run into `out_dir`: a pack of one."""
    return run_pack([Member(config, str(out_dir), preset)], env=env, stop_after_chunks=stop_after_chunks,
                    quiet=quiet, stop_at=stop_at)


def parse_args(argv=None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(prog="python -m runs.train", description=__doc__.split("\n")[0],
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--spec", nargs="+", metavar="SPEC_JSON",
                        help="run specs (DIR/spec.json) of one program: train them as a pack, each into its DIR")
    single = parser.add_argument_group("one run from a trainer preset (instead of --spec)")
    single.add_argument("--task")
    single.add_argument("--bound", type=float, help="safety bound d on the episode cost")
    single.add_argument("--algo", choices=ALGOS)
    single.add_argument("--seed", type=int)
    single.add_argument("--out", help="run folder")
    single.add_argument("--preset", default="cpu", choices=tuple(PRESETS))
    single.add_argument("--backend", default="builtin", choices=("builtin", "crax"))
    single.add_argument("--level", type=int, default=1, help="the task's level (backend crax: 1-3 where CRAX has "
                        "them; the run's task id is TASK@lLEVEL for level >= 2)")
    for field in BUDGET_FIELDS:
        single.add_argument("--" + field.replace("_", "-"), type=float if field == "total_steps" else int)
    single.add_argument("--set", action="append", default=[], metavar="KEY=VALUE",
                        help="override any config field (see docs/algos.md); env.NAME=VALUE sets a task option")
    parser.add_argument("--pack-runs", type=int, default=0, metavar="N",
                        help="runs in the whole pack the specs belong to, finished ones included (a batched "
                             "pack's program holds them all, so a member's results do not depend on how many "
                             "still train); default: the specs given")
    parser.add_argument("--stop-after-chunks", type=int, default=None,
                        help="checkpoint and exit 75 after this many chunks (to rehearse a preemption)")
    parser.add_argument("--stop-at", type=float, default=None, metavar="UNIX_TIME",
                        help="checkpoint and exit 75 before this time (a job's time limit minus a margin)")
    parser.add_argument("--no-tensorboard", action="store_true",
                        help="write no TensorBoard event files (default: each run's curves, live, in its folder)")
    parser.add_argument("--wandb", choices=("offline", "online"), default=None, metavar="MODE",
                        help="log each finished run to W&B: offline (written to DIR/wandb/, upload later with "
                             "`wandb sync`) or online; needs the [wandb] extra")
    parser.add_argument("--wandb-project", default="saferl-eval", help="W&B project (default %(default)s)")
    parser.add_argument("--wandb-group", default=None, help="W&B group (default: the runs' task and algorithm)")
    parser.add_argument("--wandb-entity", default=None, help="W&B entity (default: W&B's own default)")
    parser.add_argument("--threads", type=int, default=None,
                        help="1: XLA runs single-threaded (for one job per core in a sweep); default: all cores")
    parser.add_argument("--cache-dir", default=None, help="persistent compilation cache "
                        "(default $JAX_COMPILATION_CACHE_DIR or ~/.cache/saferl-eval/jax)")
    for name, algorithm in ALGORITHMS.items():
        if algorithm.scalars:
            parser.add_argument_group(f"scalars of {name} ({algorithm.label}), set with --set NAME=VALUE",
                                      scalars_help(algorithm.scalars))
    args = parser.parse_args(argv)
    if args.spec is None:
        missing = [f"--{k}" for k in ("task", "bound", "algo", "seed", "out") if getattr(args, k) is None]
        if missing:
            parser.error(f"give --spec, or {', '.join(missing)} for one run")
    return args


def scalars_help(scalars: dict) -> str:
    """An algorithm's scalars for --help, one per line: name, type, default, help (algos.registry)."""
    width = max(len(name) for name in scalars)
    columns = max(shutil.get_terminal_size().columns - 4, 60)  # argparse indents a group's text by 2
    lines = []
    for name, s in scalars.items():
        head = f"{name:<{width}}  {s.type.__name__}  {s.default:<6g}  "
        lines.append(textwrap.fill(s.help or "(no help given)", columns, initial_indent=head,
                                   subsequent_indent=" " * len(head)))
    return "\n".join(lines)


def config_from_args(args: argparse.Namespace):
    from algos.config import make_config

    overrides = dict(task=args.task, level=args.level, bound=args.bound, algo=args.algo, seed=args.seed,
                     backend=args.backend)
    overrides.update({k: None if getattr(args, k) is None else int(getattr(args, k)) for k in BUDGET_FIELDS})
    return make_config(args.preset, overrides, args.set)


SINGLE_THREAD_XLA_FLAGS = "--xla_cpu_multi_thread_eigen=false intra_op_parallelism_threads=1"


def write_run_folder(m: Member, p: Progress, final: dict, timing: dict, pack_size: int) -> None:
    """episodes.parquet and trace.parquet, then run.json (which records their row counts); the
    checkpoint is removed once the folder is complete."""
    import jax
    import numpy as np

    from runs import runfolder
    from algos.registry import get as get_algorithm
    from algos.trace_schema import trace_columns
    from metrics import episode_table

    from runs import run_layout
    config = m.config
    algorithm = get_algorithm(config.algo)
    arrays = p.host.arrays()
    J = len(arrays["update"])
    meta_run = (run_layout.task_id(config.task, config.level), config.bound, config.algo, config.seed)
    blocks = [episode_table.episode_rows(*meta_run, "train", np.arange(J), arrays["ret"], arrays["cost"],
                                         arrays["length"])]
    for phase, r in final.items():
        blocks.append(episode_table.episode_rows(*meta_run, phase, [max(J - 1, 0)], r["ret"][None],
                                                 r["cost"][None], r["length"][None]))
    trace = trace_columns(arrays, config.rollout_steps, config.num_envs,
                          algorithm.has_multiplier, algorithm.state_columns)
    episodes = episode_table.episodes_table(blocks)
    trace = runfolder.trace_table(trace, algorithm.state_columns)
    files = {}
    for name, table in ((run_layout.EPISODES, episodes), (run_layout.TRACE, trace)):
        runfolder.write_parquet(os.path.join(m.out, name), table)
        files[name] = runfolder.file_record(os.path.join(m.out, name), table.num_rows)
    env_steps = config.num_updates * config.steps_per_update
    device = jax.devices()[0]
    runfolder.write_json(os.path.join(m.out, run_layout.RUN_JSON), {
        "config": config.to_dict(), "preset": m.preset, "complete": True,
        "files": files, "code_version": p.code_versions[-1], "code_versions": p.code_versions,
        "env_steps": env_steps, "iterates": J, "updates": config.num_updates,
        # the pack's wall times: its members trained together, so a run's share is 1 / pack_size
        "pack_size": pack_size, "train_wall_s": p.train_s, **timing, "restarts": p.restarts,
        "steps_per_s": env_steps / p.train_s if p.train_s > 0 else None,
        "final": {phase: {"mean_return": float(np.mean(r["ret"])), "mean_cost": float(np.mean(r["cost"]))}
                  for phase, r in final.items()},
        "device": {"platform": device.platform, "kind": device.device_kind, "count": jax.device_count(),
                   "host": platform.node(), "cpus": os.cpu_count()},
        "versions": _versions(),
    })
    shutil.rmtree(os.path.join(m.out, run_layout.CHECKPOINT_DIR), ignore_errors=True)
    if os.path.exists(os.path.join(m.out, run_layout.PROGRESS)):
        os.remove(os.path.join(m.out, run_layout.PROGRESS))


def _versions() -> dict:
    from importlib import metadata

    out = {"python": platform.python_version()}
    for package in ("jax", "jaxlib", "optax", "numpy", "saferl-eval"):
        try:
            out[package] = metadata.version(package)
        except metadata.PackageNotFoundError:
            out[package] = None
    return out


def record_failure(out_dir: str, message: str) -> None:
    """failure.json: the last attempt failed for a reason a retry would meet again (an error,
    not a signal or a time limit); workflow.train_job reads it before a retry."""
    from runs import runfolder
    from runs import run_layout

    runfolder.write_json(os.path.join(out_dir, run_layout.FAILURE_RECORD),
                         {"error": message, "time": time.time(), "host": platform.node(), "pid": os.getpid()})


def clear_failure(out_dir: str) -> None:
    from runs.run_layout import FAILURE_RECORD

    path = os.path.join(out_dir, FAILURE_RECORD)
    if os.path.exists(path):
        os.remove(path)


def members_from_args(args: argparse.Namespace) -> list:
    """The runs to train: from their spec files, or the one run the options describe.
    Raises ValueError naming the file or option."""
    from runs import runfolder

    if args.spec is None:
        if os.path.exists(args.out) and not os.path.isdir(args.out):
            raise ValueError(f"--out {args.out} is a file, not a folder")
        return [Member(config_from_args(args), args.out, args.preset)]
    members = []
    for path in args.spec:
        preset, config = runfolder.read_spec(path)
        members.append(Member(config, os.path.dirname(os.path.abspath(path)), preset))
    return members


def wandb_options(args: argparse.Namespace, members) -> dict | None:
    """runs.wandb_runs.log_run's options from the command line, or None when W&B is off."""
    if args.wandb is None:
        return None
    first = members[0].config
    return {"mode": args.wandb, "project": args.wandb_project, "entity": args.wandb_entity,
            "group": args.wandb_group or f"{first.task}-{first.algo}"}


def main(argv=None) -> int:
    from runs.checkpoint import CheckpointError
    from runs.wandb_runs import WandbUnavailable

    args = parse_args(argv)
    if args.threads == 1:  # must happen before JAX starts its CPU backend
        os.environ["XLA_FLAGS"] = (os.environ.get("XLA_FLAGS", "") + " " + SINGLE_THREAD_XLA_FLAGS).strip()
    try:
        members = members_from_args(args)
    except ValueError as err:
        print(f"runs.train: {err}", file=sys.stderr)
        if args.spec is None and not os.path.isfile(args.out):
            os.makedirs(args.out, exist_ok=True)
            record_failure(args.out, f"invalid arguments: {err}")
        return 2
    enable_compilation_cache(args.cache_dir)
    try:
        return run_pack(members, stop_after_chunks=args.stop_after_chunks, stop_at=args.stop_at,
                        planned=args.pack_runs, tensorboard=not args.no_tensorboard, wandb=wandb_options(args, members))
    except (CheckpointError, WandbUnavailable) as err:  # the message says what to do; no traceback needed
        print(f"runs.train: {err}", file=sys.stderr)
        for m in members:
            record_failure(m.out, str(err))
        return 1
    except KeyboardInterrupt:  # a second Ctrl-C, or one before training began: no traceback wall
        print("runs.train: stopped by Ctrl-C; the folders keep their last checkpoint, run the same command "
              "again to resume", file=sys.stderr)
        return 130
    except MemoryError:
        raise  # a retry with more memory may pass: not recorded
    except OSError as err:
        if not is_transient(err):
            for m in members:
                record_failure(m.out, f"{type(err).__name__}: {err}")
            raise
        # disk full, quota, an I/O error: the next attempt may find space; not recorded as final
        print(f"runs.train: {err} (a transient I/O error: not recorded as a failure; a retry resumes "
              f"from the last checkpoint)", file=sys.stderr)
        return EXIT_TEMPFAIL
    except Exception as err:
        for m in members:
            record_failure(m.out, f"{type(err).__name__}: {err}")
        raise


if __name__ == "__main__":
    sys.exit(main())
