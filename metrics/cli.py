"""Command line of the evaluation engine: `saferl-eval` (the console script), `python -m metrics`
in a clone (docs/metrics.md, docs/comparisons.md). It names itself as it was invoked, and its
--help is plain text: a pip install has neither this docstring's Markdown nor docs/."""

from __future__ import annotations

import argparse
import os
import sys
import warnings

from .aggregate import DEFAULT_REPS, ESTIMATORS
from .dnorm_plus import DEFINITIONS as DNORM_PLUS
from .reference import ReferenceError
from .schema import PHASES, EpisodeTableError, MetricsWarning, ThresholdError
from .seeds import DEFAULT_K_MAX, DEFAULT_TARGET, FIGURE_FILE, MAX_K


def _summarise(args):
    from .summary import summarise, write_summary

    write_summary(summarise(args.episodes, jobs=args.jobs), args.out)


def _aggregate(args):
    from .aggregate import aggregate, write_aggregate
    from .summary import read_summaries

    write_aggregate(aggregate(read_summaries(args.summaries), args.reps, args.seed, args.estimator, args.dnorm_plus),
                    args.out)


def _tiers(args):
    from .tiers import tiers

    tiers(args.dir, args.thresholds, args.out)


def _evaluate(args):
    from .evaluate import evaluate

    evaluate(args.episodes, args.out, args.reps, args.seed, args.thresholds, args.estimator, jobs=args.jobs,
             dnorm_plus=args.dnorm_plus)


def _plan_seeds(args):
    from .seeds import load_runs, needed_markdown, plan_seeds, write_plan
    from .thresholds import load_thresholds

    thresholds = load_thresholds(args.thresholds)  # a bad file fails before any reading
    plan = plan_seeds(load_runs(args.inputs, jobs=args.jobs), k_max=args.k_max, target=args.target,
                      thresholds=thresholds, phases=args.phase, reps=args.reps, seed=args.seed)
    write_plan(plan, args.out, figure=not args.no_figure)
    print(needed_markdown(plan), end="")


def _compare(args):
    from .reference import (compare, load_reference, matching_definition, mismatches, n_comparable, read_sweep,
                            summary_line)

    reference = load_reference(args.reference)
    sweep, done = matching_definition(read_sweep(args.results), reference, args.thresholds)
    metrics, tiers = compare(sweep.iqm, sweep.tiers, reference, sweep.not_comparable)
    problems = mismatches(sweep, reference)
    if n_comparable(metrics, tiers) == 0:  # a table of blanks with exit 0 reads as success
        raise ReferenceError(f"{args.results}: nothing to compare with reference {reference['name']!r} "
                             f"({reference['path']}): no value or tier of it can be compared with the sweep's"
                             + "".join(f"; {p}" for p in problems))
    if args.out:
        from .atomic import write_text

        write_text(args.out, metrics.to_csv(index=False))
    print(f"reference {reference['name']}: {reference['source']}")
    for note in reference.get("notes") or []:
        print(f"note: {note}")
    for line in done + problems:
        print(f"warning: {one_line(line)}", file=sys.stderr)
    print(metrics.to_string(index=False, float_format=lambda x: f"{x:.3f}"))
    shown = tiers.astype({"tier": "Int64", "ref_tier": "Int64"})  # tiers are whole numbers
    print(shown.to_string(index=False, float_format=lambda x: f"{x:.2f}"))
    print(summary_line(metrics, tiers, reference["name"]))
    if args.out:
        print(f"wrote {args.out}")


def _reference(args):
    import shlex

    from .reference import make_reference, write_reference

    words = [args.results, "--name", args.name, "--out", args.out, "--source", args.source]
    command = "saferl-eval reference " + " ".join(shlex.quote(w) for w in words + (["--runs", args.runs] if args.runs else []))
    write_reference(make_reference(args.results, args.name, args.source, command, args.runs), args.out)
    print(f"wrote {args.out}")


def _from_saferleval(args):
    from .atomic import atomic_path
    from .saferleval_csv import read_saferleval

    episodes, notes = read_saferleval(args.files)
    for note in notes:
        print(f"warning: {note}", file=sys.stderr)
    with atomic_path(args.out) as tmp:
        if args.out.endswith(".parquet"):
            episodes.to_parquet(tmp, index=False)
        else:
            episodes.to_csv(tmp, index=False)


def _bootstrap_options(p):
    p.add_argument("--reps", type=int, default=DEFAULT_REPS, help=f"bootstrap replicates B (default {DEFAULT_REPS})")
    p.add_argument("--seed", type=int, default=0, help="bootstrap seed (default 0)")
    p.add_argument(
        "--estimator",
        choices=ESTIMATORS,
        default="stratified",
        help="stratified: IQM over (task, bound) of seed means (the paper's estimator); pooled: rliable's IQM over all runs",
    )
    p.add_argument("--dnorm-plus", choices=DNORM_PLUS, default="paper",
                   help="paper: Dnorm+ averaged as eq. 5 and 6 say (default); saferleval: as the paper's suite computes "
                        "it (training: violating iterates only; final conditions: violating seeds only)")


class OneLineParser(argparse.ArgumentParser):
    """argparse, but a usage error is one line on stderr (exit 2), not the usage text first."""

    def error(self, message):
        self.exit(2, f"{self.prog}: error: {one_line(message)} (see --help)\n")


def one_line(text) -> str:
    """A message on one line, whatever a name or path in it holds (a newline, a NUL)."""
    return str(text).replace("\r", "\\r").replace("\n", "\\n").replace("\0", "\\0")


DESCRIPTION = """\
Safety metrics for safe-RL episode logs, as "Evaluation Metrics for Safe RL" (Spoor, Plaat,
Moerland, 2026) asks: violation rate V, normalised cost deviation Dnorm and violation magnitude
Dnorm+, their IQM across tasks and bounds with stratified-bootstrap confidence intervals, safety
tiers and cost CDFs, for training, the final policy with exploration noise and the final greedy
policy. Input: episode tables (Parquet or CSV, one row per episode: task, bound, algo, seed,
phase, iteration, episode, return, cost), recorder folders or the trainer's run folders. Start
with 'evaluate'; 'PROG COMMAND --help' describes each command."""


def invoked_name(argv0: str | None = None) -> str:
    """How the user started this command: 'python -m PACKAGE' when run as a module (argv[0] is
    then the package's __main__.py), else the script's own name (saferl-eval)."""
    argv0 = sys.argv[0] if argv0 is None else argv0
    name = os.path.basename(argv0 or "")
    if name in ("", "-c", "__main__.py"):
        return f"python -m {__package__}"
    return name


def build_parser(prog: str | None = None) -> argparse.ArgumentParser:
    prog = prog or invoked_name()
    parser = OneLineParser(prog=prog, description=DESCRIPTION.replace("PROG", prog),
                           formatter_class=argparse.RawDescriptionHelpFormatter)
    sub = parser.add_subparsers(dest="command", required=True)

    p = sub.add_parser("summarise", help="stage 1: validate episode files and write one per-run summary file")
    p.add_argument("episodes", nargs="+", help="episode tables (.parquet, .csv)")
    p.add_argument("--out", required=True, help="summary file to write (Parquet)")
    p.add_argument("--jobs", type=int, default=1, help="processes reading episode files (default 1)")
    p.set_defaults(func=_summarise)

    p = sub.add_parser("aggregate", help="stage 2: IQMs, bootstrap, CDFs, per-condition statistics")
    p.add_argument("summaries", nargs="+", help="summary files written by the summarise command")
    p.add_argument("--out", required=True, help="folder to write into")
    _bootstrap_options(p)
    p.set_defaults(func=_aggregate)

    p = sub.add_parser("tiers", help="stage 3: tiers.csv and conditions.csv from stage 2's folder")
    p.add_argument("dir", help="folder written by the aggregate command")
    p.add_argument("--thresholds", default=None, help="YAML/JSON tier thresholds (default: the paper's Table 1)")
    p.add_argument("--out", default=None, help="folder to write into (default: DIR)")
    p.set_defaults(func=_tiers)

    p = sub.add_parser("evaluate", help="all three stages: episode files -> every output in one folder")
    p.add_argument("episodes", nargs="+", help="episode tables (.parquet, .csv)")
    p.add_argument("--out", required=True, help="folder to write into")
    p.add_argument("--thresholds", default=None, help="YAML/JSON tier thresholds (default: the paper's Table 1)")
    p.add_argument("--jobs", type=int, default=1, help="processes reading episode files (default 1)")
    _bootstrap_options(p)
    p.set_defaults(func=_evaluate)

    p = sub.add_parser("plan-seeds", help="seed planning: P(tier) and CI widths against seeds per stratum K; seeds needed")
    p.add_argument("inputs", nargs="+", help="episode tables (.parquet, .csv), summary files or stage-2 folders")
    p.add_argument("--out", required=True, help="folder to write into")
    p.add_argument("--k-max", type=int, default=DEFAULT_K_MAX, help=f"plan K = 2 .. K_MAX seeds per (task, bound) (default {DEFAULT_K_MAX})")
    p.add_argument("--target", type=float, default=DEFAULT_TARGET,
                   help=f"P(tier) to reach: seeds needed per algorithm and phase (default {DEFAULT_TARGET})")
    p.add_argument("--phase", action="append", choices=PHASES, default=None, help="plan this phase only (repeatable; default all)")
    p.add_argument("--thresholds", default=None, help="YAML/JSON tier thresholds (default: the paper's Table 1)")
    p.add_argument("--reps", type=int, default=DEFAULT_REPS, help=f"bootstrap replicates B (default {DEFAULT_REPS})")
    p.add_argument("--seed", type=int, default=0, help="bootstrap seed (default 0; the same as stage 2's gives its P(tier))")
    p.add_argument("--jobs", type=int, default=1, help="processes reading episode files (default 1)")
    p.add_argument("--no-figure", action="store_true", help=f"write the tables only, not {FIGURE_FILE}")
    p.set_defaults(func=_plan_seeds)

    p = sub.add_parser("compare", help="a sweep's IQMs, CIs and tiers beside a reference's (is my result normal?)")
    p.add_argument("results", help="folder with the sweep's iqm.csv and tiers.csv (written by evaluate, or a sweep's metrics/ folder)")
    p.add_argument("reference", help="a reference file, or the name of a shipped one (e.g. default)")
    p.add_argument("--out", default=None, help="also write the per-metric comparison as CSV")
    p.add_argument("--thresholds", default=None,
                   help="YAML/JSON tier thresholds for tiers recomputed under the reference's Dnorm+ definition "
                        "(default: RESULTS/thresholds.yaml if present, else the paper's Table 1)")
    p.set_defaults(func=_compare)

    p = sub.add_parser("reference", help="a reference file from a finished sweep's results (stamped with its code versions)")
    p.add_argument("results", help="folder with iqm.csv, tiers.csv, conditions.csv and aggregate.json")
    p.add_argument("--out", required=True, help="reference file to write (YAML)")
    p.add_argument("--name", required=True, help="the reference's name (a preset's name for a shipped one)")
    p.add_argument("--source", default="a sweep of saferl-eval", help="where the numbers come from")
    p.add_argument("--runs", default=None, help="folder of the run folders, whose run.json files give the code versions")
    p.set_defaults(func=_reference)

    p = sub.add_parser("from-saferleval", help="the paper's suite's per-seed summary CSVs as an episode table")
    p.add_argument("files", nargs="+", help="SafeRLEval *_summary.csv files, or folders of them")
    p.add_argument("--out", required=True, help="episode table to write (.parquet or .csv)")
    p.set_defaults(func=_from_saferleval)
    return parser


def _check_out(args) -> str | None:
    """Why --out cannot be written, or None: a folder for every stage but summarise (a file)."""
    out = getattr(args, "out", None)
    if out is None or not os.path.exists(out):
        return None
    if args.command in ("summarise", "compare", "reference", "from-saferleval") and os.path.isdir(out):
        return f"--out {out} is a folder; give the file to write"
    if args.command not in ("summarise", "compare", "reference", "from-saferleval") and not os.path.isdir(out):
        return f"--out {out} is a file, not a folder"
    return None


def _check_plan(args) -> str | None:
    """Why plan-seeds' settings cannot be planned with, or None."""
    if args.command != "plan-seeds":
        return None
    if args.k_max < 2:
        return f"--k-max must be >= 2 (got {args.k_max}): one seed per stratum has no spread to plan with"
    if args.k_max > MAX_K:
        return f"--k-max must be <= {MAX_K} (got {args.k_max})"
    if not 0 < args.target <= 1:
        return f"--target must be a probability in (0, 1] (got {args.target:g})"
    return None


def _print_thresholds(path) -> None:
    """The thresholds in force on stderr when the file moves any of Table 1's (a bad file fails here)."""
    from .thresholds import load_thresholds, thresholds_notice

    notice = thresholds_notice(load_thresholds(path), path)
    if notice:
        print(one_line(notice), file=sys.stderr)


def _interrupted(signum, frame):
    raise KeyboardInterrupt(signum)


def main(argv=None) -> int:
    import signal
    import threading

    main_thread = threading.current_thread() is threading.main_thread()
    previous = signal.signal(signal.SIGTERM, _interrupted) if main_thread else None  # cleans up as Ctrl-C does
    try:
        return _main(argv)
    except KeyboardInterrupt as err:  # every output is written atomically: none was left half-done
        signum = err.args[0] if err.args and isinstance(err.args[0], int) else signal.SIGINT
        print(f"error: stopped by {signal.Signals(signum).name}; no output was left half-written, "
              f"run the same command again", file=sys.stderr)
        return 128 + signum
    finally:
        if main_thread:
            signal.signal(signal.SIGTERM, previous)


def _main(argv=None) -> int:
    args = build_parser().parse_args(argv)  # errors and usage name the command as invoked
    if getattr(args, "reps", 1) < 1 or getattr(args, "seed", 0) < 0:
        print("error: --reps must be >= 1 and --seed >= 0", file=sys.stderr)
        return 2
    problem = _check_out(args) or _check_plan(args)
    if problem:
        print(f"error: {one_line(problem)}", file=sys.stderr)
        return 2
    with warnings.catch_warnings():
        warnings.simplefilter("always", MetricsWarning)
        # catch_warnings restores showwarning afterwards
        warnings.showwarning = lambda message, *a, **k: print(f"warning: {one_line(message)}", file=sys.stderr)
        try:
            if args.command in ("tiers", "evaluate", "plan-seeds") and args.thresholds is not None:
                _print_thresholds(args.thresholds)
            args.func(args)
        except (EpisodeTableError, ThresholdError, ReferenceError) as err:
            print(f"error: {one_line(err)}", file=sys.stderr)
            return 2
        except (MemoryError, ValueError) as err:
            if not isinstance(err, MemoryError) and "dimension" not in str(err):
                raise
            reps = getattr(args, "reps", None)
            print(f"error: out of memory ({str(err).splitlines()[0]})"
                  + (f"; --reps {reps} is too many bootstrap replicates for this machine, use fewer"
                     if reps is not None else ""), file=sys.stderr)
            return 2
        except OSError as err:
            print(f"error: {one_line(err)}", file=sys.stderr)
            return 2
    return 0
