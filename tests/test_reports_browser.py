"""The two HTML reports of a tiny sweep, opened in a real browser (headless Chromium driven by
Playwright): every figure loads with a non-zero size, every table renders with rows, every
internal link resolves and the console shows no errors.

- results/report.html (workflow/report.py): one page;
- Snakemake's report (`snakemake --report`): a single-page app; the test opens every category
  and subcategory and shows every result, as a reader would click through it.

Needs Debian's chromium (`apt-get install chromium`; .ci/run installs it); skips otherwise.
"""
from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path
from urllib.parse import unquote, urlparse

import pytest

from workflow.products import registry

CHROMIUM = shutil.which("chromium") or ("/usr/bin/chromium" if os.path.exists("/usr/bin/chromium") else None)
REPO = Path(__file__).resolve().parent.parent
# Chromium as root in a container: no sandbox, no GPU, nothing that phones home.
CHROMIUM_ARGS = ["--no-sandbox", "--disable-gpu", "--disable-background-networking", "--disable-component-update",
                 "--disable-sync", "--no-first-run"]

pytestmark = [pytest.mark.slow,
              pytest.mark.skipif(CHROMIUM is None, reason="Debian's chromium is not installed "
                                                          "(apt-get install -y chromium); the browser test needs it")]


@pytest.fixture(scope="module")
def browser_page(tmp_path_factory):
    from playwright.sync_api import sync_playwright

    with sync_playwright() as pw:
        context = pw.chromium.launch_persistent_context(str(tmp_path_factory.mktemp("chromium-profile")),
                                                        executable_path=CHROMIUM, headless=True, args=CHROMIUM_ARGS)
        try:
            yield context
        finally:
            context.close()


def open_page(context, path: Path):
    """Open a file; returns (page, errors): console errors and uncaught exceptions, collected."""
    page = context.new_page()
    errors: list[str] = []
    page.on("console", lambda msg: errors.append(f"console {msg.type}: {msg.text}") if msg.type == "error" else None)
    page.on("pageerror", lambda exc: errors.append(f"page error: {exc}"))
    page.on("requestfailed", lambda req: errors.append(f"failed request: {req.url}"))
    page.goto(path.as_uri())
    page.wait_for_load_state("load")
    return page, errors


IMAGES_JS = """() => Array.from(document.images).map(img => ({
    alt: img.alt, complete: img.complete, natural: img.naturalWidth * img.naturalHeight,
    width: img.getBoundingClientRect().width, height: img.getBoundingClientRect().height}))"""
TABLES_JS = """() => Array.from(document.querySelectorAll('table')).map(t => ({
    rows: t.querySelectorAll('tbody tr, tr').length, width: t.getBoundingClientRect().width,
    height: t.getBoundingClientRect().height}))"""
LINKS_JS = "() => Array.from(document.querySelectorAll('a[href]')).map(a => a.getAttribute('href'))"


def check_images_and_tables(page_or_frame, where: str) -> tuple[int, int]:
    images = page_or_frame.evaluate(IMAGES_JS)
    for img in images:
        assert img["complete"] and img["natural"] > 0, f"{where}: image {img['alt']!r} did not load"
        assert img["width"] > 0 and img["height"] > 0, f"{where}: image {img['alt']!r} has no size"
    tables = page_or_frame.evaluate(TABLES_JS)
    for i, table in enumerate(tables):
        assert table["rows"] > 1 and table["width"] > 0 and table["height"] > 0, f"{where}: table {i} is empty"
    return len(images), len(tables)


def check_internal_links(page, base: Path) -> int:
    """Fragment links must name an element; relative links must name an existing file."""
    checked = 0
    for href in page.evaluate(LINKS_JS):
        parsed = urlparse(href)
        if parsed.scheme in ("http", "https", "mailto"):
            continue
        if href.startswith("#"):
            if href != "#":  # "#" alone is how single-page apps mark buttons
                assert page.evaluate("id => document.getElementById(id) !== null", unquote(href[1:])), href
        else:
            target = (base.parent / unquote(parsed.path)).resolve() if parsed.scheme in ("", "file") else None
            assert target is not None and target.exists(), f"{base.name}: link {href!r} does not resolve"
        checked += 1
    return checked


def test_results_report_renders_every_figure_table_and_link(tiny_sweep, browser_page):
    report = tiny_sweep / "results-tiny" / "report.html"
    page, errors = open_page(browser_page, report)
    n_images, n_tables = check_images_and_tables(page, "report.html")
    n_links = check_internal_links(page, report)
    results = tiny_sweep / "results-tiny"
    pngs = sorted((results / "figures").glob("*.png"))
    csvs = sorted((results / "tables").glob("*.csv"))
    assert n_images == len(pngs) > 0  # every figure of the sweep, embedded once
    # every table product rendered once, Tables 2, A.2 and A.3 as the one headline table
    shown = page.evaluate("() => document.querySelectorAll('section.product table').length")
    assert shown == len(csvs) - 3
    assert page.evaluate("() => document.querySelectorAll('#table2 ~ .table-wrap table.headline').length") == 1
    assert n_tables >= 1 + shown
    # every other format of every product is a download link beside it
    hrefs = set(page.evaluate(LINKS_JS))
    others = [p for ext in ("pdf", "csv", "md", "tex") for p in results.glob(f"*/*.{ext}")
              if p.parent.name in ("figures", "tables")]
    assert others and {str(p.relative_to(results)) for p in others} <= hrefs
    assert n_links >= len(others)
    assert errors == []
    page.close()


VIEWPORT = {"width": 1400, "height": 900}
LAYOUT_JS = """() => ({
    pageWidth: document.documentElement.scrollWidth, pageHeight: document.documentElement.scrollHeight,
    clipped: Array.from(document.querySelectorAll('.table-wrap')).filter(w => w.scrollWidth > w.clientWidth + 1)
        .map(w => w.previousElementSibling ? w.previousElementSibling.textContent.slice(0, 60) : '?'),
    table2Bottom: document.querySelector('table.headline').getBoundingClientRect().bottom + window.scrollY,
    figure2Top: document.querySelector('img[alt="figure2.png"]').getBoundingClientRect().top + window.scrollY,
    text: document.body.innerText,
    figures: Array.from(document.images).map(img => ({alt: img.alt, shown: img.getBoundingClientRect().width,
        print: parseFloat(img.style.width)})),
})"""


def test_results_report_reads_top_to_bottom_at_1400_px(tiny_sweep, browser_page):
    """Nothing wider than the page, Table 2 and Figure 2 within the first two screens, no NaN,
    the algorithms by their labels, every figure at (nearly) its print size."""
    report = tiny_sweep / "results-tiny" / "report.html"
    page = browser_page.new_page()
    page.set_viewport_size(VIEWPORT)
    page.goto(report.as_uri())
    page.wait_for_load_state("load")
    got = page.evaluate(LAYOUT_JS)
    print(f"report.html at 1400 px: {got['pageHeight']} px tall")
    assert got["pageWidth"] <= VIEWPORT["width"]
    assert got["clipped"] == []  # no table needs scrolling inside its box either
    assert got["table2Bottom"] <= 2 * VIEWPORT["height"]
    assert got["figure2Top"] <= 2 * VIEWPORT["height"]
    assert "NaN" not in got["text"] and "nan" not in got["text"].split()
    assert "ppo_lag" not in got["text"] and "PPO-Lag" in got["text"]  # labels, not raw names
    # shown at >= 90 % of print size (96 px per inch of figure): a 9 pt label reads as >= 8 pt
    small = [f["alt"] for f in got["figures"] if not (f["print"] > 0 and f["shown"] >= 0.9 * f["print"])]
    assert small == []
    page.close()


@pytest.fixture(scope="module")
def snakemake_report(tiny_sweep, tmp_path_factory) -> Path:
    out = tmp_path_factory.mktemp("snakemake_report") / "snakemake-report.html"
    proc = subprocess.run([sys.executable, "-m", "snakemake", "--snakefile", str(REPO / "Snakefile"),
                           "--configfile", "tiny.yaml", "--report", str(out)], cwd=tiny_sweep,
                          capture_output=True, text=True)
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    return out


def _click(page, locator) -> None:
    locator.click(no_wait_after=True, timeout=10_000)
    page.wait_for_timeout(200)


def _show_results(page, errors, where: str, seen: dict) -> None:
    """Show every result of the list on screen and check what the report displays for it."""
    rows = page.locator("nav tbody tr")
    for i in range(rows.count()):
        name = rows.nth(i).locator("td").first.inner_text().strip()
        _click(page, rows.nth(i).locator("a[iconname=eye]"))
        page.wait_for_load_state("load")
        if name.endswith(".png"):
            images = [img for img in page.evaluate(IMAGES_JS) if img["natural"] > 0 and img["width"] > 0]
            assert images, f"{where}: {name} shows no loaded image"
        else:  # HTML tables are shown in a frame
            frames = [f for f in page.frames if f != page.main_frame]
            assert frames, f"{where}: {name} shows no frame"
            n_tables = sum(check_images_and_tables(f, f"{where}: {name}")[1] for f in frames)
            assert n_tables >= 1, f"{where}: {name} renders no table"
        seen[name] = where


def test_snakemake_report_shows_every_product(snakemake_report, tiny_sweep, browser_page):
    page, errors = open_page(browser_page, snakemake_report)
    page.wait_for_load_state("networkidle")
    categories = sorted({p.category for p in registry.products()})
    seen: dict[str, str] = {}
    for category in categories:
        page.goto(snakemake_report.as_uri())
        _click(page, page.get_by_text(category, exact=True))
        if page.locator("nav tbody tr").count():  # no subcategories: the results list is shown
            _show_results(page, errors, category, seen)
            continue
        subcategories = page.locator("nav ul li a span").all_inner_texts()
        assert subcategories, f"category {category!r} shows neither results nor subcategories"
        for sub in subcategories:
            page.goto(snakemake_report.as_uri())
            _click(page, page.get_by_text(category, exact=True))
            _click(page, page.locator("nav ul li a span", has_text=sub).first)
            _show_results(page, errors, f"{category} / {sub}", seen)
    shown = {registry.REPORT_FORMAT[p.kind] for p in registry.products()}
    expected = sorted(str(path.relative_to(tiny_sweep)) for ext in shown
                      for path in (tiny_sweep / "results-tiny").glob(f"*/*.{ext}") if path.parent.name in ("figures", "tables"))
    assert sorted(seen) == expected
    assert errors == []
    page.close()
