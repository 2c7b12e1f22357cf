"""The figures README.md and docs/ quote from a quick computation (runs, pack jobs and training
config hash of each preset; sweep headlines) are current: benchmarks/doc_figures.py rewrites
them, and this test fails, naming each stale one, when a change to a preset leaves them behind."""
from __future__ import annotations

import shutil
import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO / "benchmarks"))
import doc_figures  # noqa: E402


def test_every_figure_in_the_docs_is_current():
    proc = subprocess.run([sys.executable, str(REPO / "benchmarks" / "doc_figures.py"), "--check"],
                          capture_output=True, text=True, timeout=600)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert proc.stdout.strip() == "0 stale figure(s)"


def test_the_docs_mark_the_preset_figures_they_quote():
    marked = {m.group(1) for page in doc_figures.pages() for m in doc_figures.SPAN.finditer(page.read_text())}
    assert {"runs:default", "packs:default", "runs:paper", "packs:paper", "runs:zoo"} <= marked


def test_stale_spans_and_headlines_are_rewritten_and_named(tmp_path):
    tiny = doc_figures.preset_figures("tiny")
    assert tiny["runs"] == "8" and tiny["packs"] == "2" and len(tiny["hash"]) == 8
    text = ("Tiny trains <!--fig:runs:tiny-->7<!--/fig--> runs in <!--fig:packs:tiny-->2<!--/fig--> jobs.\n"
            "```\nsweep tiny in results-tiny/ (8 runs, training config 00000000)\n"
            "sweep mine in results-mine/ (3 runs, training config 12345678)\n```\n")
    new, changes = doc_figures.refreshed(text, "page.md")
    assert new == (f"Tiny trains <!--fig:runs:tiny-->8<!--/fig--> runs in <!--fig:packs:tiny-->2<!--/fig--> jobs.\n"
                   f"```\nsweep tiny in results-tiny/ (8 runs, training config {tiny['hash']})\n"
                   "sweep mine in results-mine/ (3 runs, training config 12345678)\n```\n")  # not a preset: kept
    assert changes == ["page.md:1: runs:tiny '7' -> '8'",
                       f"page.md:3: headline of tiny: (8 runs, 00000000) -> (8 runs, {tiny['hash']})"]
    assert doc_figures.refreshed(new) == (new, [])


@pytest.mark.parametrize("name, message", [("speed:tiny", "unknown figure 'speed:tiny'"),
                                           ("runs:nosuch", "figure 'runs:nosuch': no preset 'nosuch'")])
def test_an_unknown_figure_is_refused_naming_page_and_line(name, message):
    with pytest.raises(ValueError, match=f"^page.md:2: {message}"):
        doc_figures.refreshed(f"one\ntwo <!--fig:{name}-->1<!--/fig-->\n", "page.md")


def test_the_script_rewrites_a_checkout_and_check_then_passes(tmp_path):
    (tmp_path / "docs").mkdir()
    (tmp_path / "README.md").write_text("The zoo trains <!--fig:runs:zoo-->190<!--/fig--> runs.\n")
    shutil.copy(REPO / "docs" / "faults.md", tmp_path / "docs" / "faults.md")
    script = [sys.executable, str(REPO / "benchmarks" / "doc_figures.py"), "--root", str(tmp_path)]
    check = subprocess.run(script + ["--check"], capture_output=True, text=True, timeout=600)
    assert check.returncode == 1 and "README.md:1: runs:zoo '190' -> '192'" in check.stdout
    assert (tmp_path / "README.md").read_text().startswith("The zoo trains <!--fig:runs:zoo-->190")  # untouched
    fix = subprocess.run(script, capture_output=True, text=True, timeout=600)
    assert fix.returncode == 0 and fix.stdout.endswith("1 figure(s) rewritten\n")
    assert (tmp_path / "README.md").read_text() == "The zoo trains <!--fig:runs:zoo-->192<!--/fig--> runs.\n"
    assert subprocess.run(script + ["--check"], capture_output=True, timeout=600).returncode == 0
