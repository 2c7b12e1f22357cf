"""Submit the sweep's Snakemake controller as a long-running CPU job with submitit, so it
does not die with the login shell.

    python -m workflow.launch --profile cluster_profiles/slurm [--preset paper | --config preset=paper ...]
        [--partition P] [--account A] [--hours 72] [--cpus 4] [--mem-gb 8]
        [--cluster slurm|local|debug] [--dry-run] [-- SNAKEMAKE ARGS...]

It first prints which sweep and results folder the controller will act on (workflow.sweep)
and refuses a folder that holds another sweep's runs. `--config KEY=VALUE ...` goes to the
controller's Snakemake as its `--config`; `--preset NAME` is `--config preset=NAME`.
The controller runs `python -m snakemake --workflow-profile PROFILE` in this directory; the
profile's executor (SLURM for cluster_profiles/slurm) submits one job per run. Its output is
in .snakemake/launcher/<job id>_0_log.out. Progress per run: `python -m workflow.status`.
Launching again after a failure or a time limit submits only the failed and missing runs.
The controller marks the launcher folder as its own (job.json, runs.runlock): a second one
waits for it, then refuses. One that finds the marker of a controller that ended without
finishing (killed at its time limit, lost with its node) removes the Snakemake lock that one
left (`snakemake --unlock`), which would otherwise stop it ("Directory cannot be locked").
"""
from __future__ import annotations

import argparse
import os
import shlex
import subprocess
import sys
from pathlib import Path

LAUNCHER_FOLDER = ".snakemake/launcher"


REPO = Path(__file__).resolve().parent.parent


def snakemake_command(profile: str, preset: str | None, extra: list[str],
                      python: str = sys.executable, config: list[str] = ()) -> list[str]:
    """The controller's command line (this checkout's Snakefile, results in the current folder)."""
    cmd = [python, "-m", "snakemake", "--snakefile", str(REPO / "Snakefile"), "--workflow-profile", profile]
    overrides = ([f"preset={preset}"] if preset else []) + list(config)
    extra = list(extra)
    if overrides and "--config" in extra:  # one --config: Snakemake keeps only the last
        i = extra.index("--config")
        extra = extra[:i + 1] + overrides + extra[i + 1:]
    elif overrides:
        extra = ["--config", *overrides] + extra
    return cmd + extra


def check_config(preset: str | None, extra: list[str]) -> dict:
    """Resolve the configuration the controller's Snakemake will read (config/config.yaml, then
    any `--configfile`, `--config` and the preset), so a bad one is refused before a job is
    submitted; raises config_validation.ConfigError, which names the file (or option) that set
    the offending key."""
    from workflow import config_validation as cv

    files, overrides, option = [], [], None
    for arg in extra:
        if arg.startswith("-"):
            option = arg if arg in ("--configfile", "--configfiles", "--config") else None
        elif option == "--config":
            overrides.append(arg)
        elif option is not None:
            files.append(arg)
    # (source, mapping) layers in Snakemake's order, so an error names the file or option that set the key
    layers = cv.user_layers([cv.DEFAULT_CONFIG, *files], cv.parse_overrides(overrides, "--config"))
    if preset:
        layers.append(("--preset", {"preset": preset}))
    return cv.resolve(cv.merged_user_config(layers), layers=layers)


def take_over(folder: str, cmd: list[str], workdir: str) -> None:
    """Make this process the folder's controller; unlock what a killed predecessor left."""
    from runs import runlock

    previous = runlock.read_marker(folder)
    print(f"controller: {runlock.acquire(folder)}", flush=True)  # RunFolderLocked: a live controller
    locks = Path(workdir) / ".snakemake" / "locks"
    if previous and not previous.get("ended") and locks.is_dir() and any(locks.iterdir()):
        print(f"controller: {runlock.describe(previous)} ended without finishing; removing the "
              "Snakemake lock it left", flush=True)
        subprocess.run(cmd + ["--unlock"], cwd=workdir, check=True)


def run_controller(cmd: list[str], workdir: str, folder: str = LAUNCHER_FOLDER) -> int:
    """Body of the submitted job: run Snakemake to the end; fail the job if it fails."""
    from runs import runlock

    folder = os.path.join(workdir, folder)
    take_over(folder, cmd, workdir)
    # An exception here (submitit's signal before the time limit) kills Snakemake: the
    # marker then stays unended, and the next controller unlocks.
    rc = subprocess.run(cmd, cwd=workdir).returncode
    runlock.release(folder)
    if rc != 0:
        raise RuntimeError(f"snakemake exited with status {rc}: {shlex.join(cmd)}")
    return rc


def executor_parameters(args: argparse.Namespace, repo: Path) -> dict:
    """submitit parameters of the controller job (a CPU job: it only waits and runs light rules)."""
    params = {
        "name": "saferl-sweep-controller",
        "timeout_min": int(args.hours * 60),
        "cpus_per_task": args.cpus,
        "mem_gb": args.mem_gb,
        # Jobs unpickle workflow.launch.run_controller: the node must import this checkout.
        # Quoted: a checkout path may hold spaces or other shell characters.
        "slurm_setup": [f"export PYTHONPATH={shlex.quote(str(repo))}${{PYTHONPATH:+:$PYTHONPATH}}"],
    }
    if args.partition:
        params["slurm_partition"] = args.partition
    if args.account:
        params["slurm_account"] = args.account
    return params


def main(argv: list[str] | None = None) -> int:
    argv = list(sys.argv[1:] if argv is None else argv)
    extra: list[str] = []
    if "--" in argv:
        cut = argv.index("--")
        argv, extra = argv[:cut], argv[cut + 1:]
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--profile", required=True, help="Snakemake profile folder, e.g. cluster_profiles/slurm")
    parser.add_argument("--preset", help="config preset (default: the one config/config.yaml names)")
    parser.add_argument("--config", nargs="*", default=[], metavar="KEY=VALUE",
                        help="overrides for the controller's Snakemake (its --config), e.g. preset=paper")
    parser.add_argument("--partition", help="partition for the controller job (a CPU partition)")
    parser.add_argument("--account", help="SLURM account for the controller job")
    parser.add_argument("--hours", type=float, default=72.0, help="time limit of the controller job")
    parser.add_argument("--cpus", type=int, default=4, help="CPUs of the controller job (local rules run there)")
    parser.add_argument("--mem-gb", type=float, default=8.0)
    parser.add_argument("--cluster", choices=["slurm", "local", "debug"], default=None,
                        help="submitit executor (default: slurm when sbatch exists, else local)")
    parser.add_argument("--folder", default=LAUNCHER_FOLDER, help="submitit folder (logs, pickles)")
    parser.add_argument("--dry-run", action="store_true", help="print the controller command and parameters; submit nothing")
    args = parser.parse_args(argv)

    if not (Path(args.profile) / "config.yaml").is_file():
        parser.error(f"--profile {args.profile}: no config.yaml in that folder")
    from metrics.cli import one_line
    from workflow import sweep
    from workflow.config_validation import ConfigError

    cmd = snakemake_command(args.profile, args.preset, extra, config=args.config)
    try:
        cfg = check_config(None, cmd[cmd.index("--workflow-profile") + 2:])
    except ConfigError as err:
        print(f"invalid configuration: {one_line(err)}", file=sys.stderr)
        return 1
    print(sweep.headline(cfg, len(cfg["specs"])), flush=True)
    verdict = sweep.check(cfg)
    if verdict.kind == "other":
        print(one_line(verdict.message), file=sys.stderr)
        return 1
    if verdict.kind == "changed":
        print(one_line(verdict.message), flush=True)
    repo = REPO
    workdir = os.getcwd()
    params = executor_parameters(args, repo)
    if args.dry_run:
        print("controller command:", shlex.join(cmd))
        print("job parameters:", params)
        return 0

    import submitit

    executor = submitit.AutoExecutor(folder=args.folder, cluster=args.cluster)
    cluster = executor.cluster
    if cluster != "slurm":
        params = {k: v for k, v in params.items() if not k.startswith("slurm_")}
    executor.update_parameters(**params)
    job = executor.submit(run_controller, cmd, workdir, args.folder)
    print(f"submitted the sweep controller as {cluster} job {job.job_id}")
    print(f"  command:  {shlex.join(cmd)}")
    print(f"  its log:  {job.paths.stdout} (and {job.paths.stderr})")
    print(f"  progress: python -m workflow.status --preset {sweep.preset_of(cfg)}")
    if cluster == "debug":
        job.result()
    return 0


if __name__ == "__main__":
    sys.exit(main())
