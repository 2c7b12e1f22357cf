"""The figures README.md and docs/ quote that a computation gives in seconds, rewritten in place
rather than typed by hand (tests/test_doc_figures.py fails when one is stale):

    python benchmarks/doc_figures.py           rewrite every stale figure, list what changed
    python benchmarks/doc_figures.py --check   list the stale figures and exit 1 if any
    (--root DIR: another checkout's README.md and docs/)

Two kinds of figure:
- a marked span, `<!--fig:NAME-->VALUE<!--/fig-->` (no spaces inside the markers, so a mark
  adds no words to a page), NAME one of: runs:PRESET and packs:PRESET (the preset's runs and
  pack jobs on a fresh folder), hash:PRESET (its training config hash);
- a sweep's headline as every command prints it (`sweep PRESET in DIR/ (N runs, training config
  HASH)`), wherever it stands, code blocks included: it names its own preset.
Figures that need a long benchmark are not here: the docs name the command that prints them.
"""
from __future__ import annotations

import argparse
import functools
import re
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
if str(REPO) not in sys.path:  # run as a script from anywhere
    sys.path.insert(0, str(REPO))

SPAN = re.compile(r"<!--fig:([\w:.-]+)-->(.*?)<!--/fig-->", re.S)
HEADLINE = re.compile(r"sweep ([\w.-]+) in ([\w./-]+)/ \((\d+) runs, training config ([0-9a-f]{8})\)")


def pages(root: Path = REPO) -> list[Path]:
    return [root / "README.md", *sorted((root / "docs").glob("*.md"))]


@functools.lru_cache(maxsize=None)
def preset_figures(preset: str) -> dict[str, str]:
    """runs, packs and hash of a preset's sweep, as planned on a fresh folder."""
    import tempfile

    from workflow import packs, sweep
    from workflow.config_validation import resolve

    cfg = resolve({"preset": preset})
    with tempfile.TemporaryDirectory() as fresh:
        n_packs = len(packs.plan(cfg, fresh))
    return {"runs": str(len(cfg["specs"])), "packs": str(n_packs), "hash": sweep.training_hash(cfg)}


def figure(name: str) -> str:
    """The value of one marked figure; a ValueError names what is unknown."""
    from workflow.config_validation import available_presets

    kind, _, preset = name.partition(":")
    if kind not in ("runs", "packs", "hash"):
        raise ValueError(f"unknown figure {name!r} (kinds: runs:PRESET, packs:PRESET, hash:PRESET)")
    if preset not in available_presets():
        raise ValueError(f"figure {name!r}: no preset {preset!r} (presets: {', '.join(available_presets())})")
    return preset_figures(preset)[kind]


def refreshed(text: str, where: str = "text") -> tuple[str, list[str]]:
    """(the text with every figure current, one line per figure that changed)."""
    changes = []

    def span(match: re.Match) -> str:
        line = text.count("\n", 0, match.start()) + 1
        try:
            value = figure(match.group(1))
        except ValueError as err:
            raise ValueError(f"{where}:{line}: {err}") from None
        if value != match.group(2):
            changes.append(f"{where}:{line}: {match.group(1)} {match.group(2)!r} -> {value!r}")
        return f"<!--fig:{match.group(1)}-->{value}<!--/fig-->"

    def headline(match: re.Match) -> str:
        preset, folder, runs, digest = match.groups()
        try:
            now = preset_figures(preset)
        except Exception:  # not a preset (a config of the reader's own): left as written
            return match.group(0)
        new = f"sweep {preset} in {folder}/ ({now['runs']} runs, training config {now['hash']})"
        if new != match.group(0):
            line = text.count("\n", 0, match.start()) + 1
            changes.append(f"{where}:{line}: headline of {preset}: ({runs} runs, {digest}) -> "
                           f"({now['runs']} runs, {now['hash']})")
        return new

    return HEADLINE.sub(headline, SPAN.sub(span, text)), changes


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--check", action="store_true", help="list stale figures, rewrite nothing (exit 1 if any)")
    parser.add_argument("--root", type=Path, default=REPO, help="the checkout whose README.md and docs/ to read")
    args = parser.parse_args(argv)
    from metrics.atomic import write_text

    stale = []
    for page in pages(args.root):
        text = page.read_text(encoding="utf-8")
        try:
            new, changes = refreshed(text, str(page.relative_to(args.root)))
        except ValueError as err:
            print(f"error: {err}", file=sys.stderr)
            return 2
        stale += changes
        if changes and not args.check:
            write_text(page, new)
    for line in stale:
        print(line)
    if args.check:
        print(f"{len(stale)} stale figure(s)" + ("; run python benchmarks/doc_figures.py" if stale else ""))
        return 1 if stale else 0
    print(f"{len(stale)} figure(s) rewritten")
    return 0


if __name__ == "__main__":
    sys.exit(main())
