"""Command line: ``python -m metrics {summarise,aggregate,tiers,evaluate} ...`` (docs/metrics.md)."""

from __future__ import annotations

import argparse
import sys
import warnings

from .schema import EpisodeTableError, MetricsWarning, ThresholdError


def _summarise(args):
    from .summary import summarise, write_summary

    write_summary(summarise(args.episodes), args.out)


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="python -m metrics", description=__doc__)
    sub = parser.add_subparsers(dest="command", required=True)

    p = sub.add_parser("summarise", help="stage 1: validate episode files and write one per-run summary file")
    p.add_argument("episodes", nargs="+", help="episode tables (.parquet, .csv)")
    p.add_argument("--out", required=True, help="summary file to write (Parquet)")
    p.set_defaults(func=_summarise)
    return parser


def main(argv=None) -> int:
    args = build_parser().parse_args(argv)
    with warnings.catch_warnings():
        warnings.simplefilter("always", MetricsWarning)
        warnings.formatwarning = lambda message, category, *a, **k: f"warning: {message}\n"
        try:
            args.func(args)
        except (EpisodeTableError, ThresholdError) as err:
            print(f"error: {err}", file=sys.stderr)
            return 2
    return 0
