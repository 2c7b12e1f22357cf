"""The sweep's report: one self-contained HTML page (results/report.html).

It shows the resolved configuration, the safety tiers, the IQM table and every product
(table or figure) the workflow made: PNG figures are embedded, CSV tables rendered,
text tables (.md, .tex, .txt) shown verbatim, anything else (PDF) linked relative to the
report. Built by the `report` rule; usable alone:

    python -m workflow.report OUT.html --iqm IQM.csv --tiers TIERS.csv --conditions C.csv [PRODUCT ...]
"""
from __future__ import annotations

import argparse
import base64
import html
import os
from pathlib import Path
from typing import Iterable, Mapping

import yaml

from metrics.atomic import write_text
from metrics.safe_text import read_csv

STYLE = """
body { font-family: sans-serif; max-width: 1100px; margin: 2em auto; color: #222; }
table { border-collapse: collapse; font-size: 0.85em; margin: 0.5em 0 1.5em; }
td, th { border: 1px solid #ccc; padding: 2px 6px; text-align: right; }
th { background: #f3f3f3; } pre { background: #f7f7f7; padding: 0.6em; overflow-x: auto; }
img { max-width: 100%; } h3 { margin-top: 2em; font-family: monospace; }
"""
MAX_TABLE_ROWS = 200


def _csv_html(path: str | os.PathLike) -> str:
    df = read_csv(path)  # names as text: an algorithm named NA stays one
    note = ""
    if len(df) > MAX_TABLE_ROWS:
        note = f"<p>first {MAX_TABLE_ROWS} of {len(df)} rows; the full table is {html.escape(str(path))}</p>"
        df = df.head(MAX_TABLE_ROWS)
    return df.to_html(index=False, float_format=lambda x: f"{x:.4g}", border=0) + note


def product_html(path: str | os.PathLike, report_dir: str | os.PathLike) -> str:
    """HTML for one product file, chosen by its suffix."""
    path = Path(path)
    suffix = path.suffix.lower()
    if suffix == ".png":
        data = base64.b64encode(path.read_bytes()).decode("ascii")
        return f'<img alt="{html.escape(path.name)}" src="data:image/png;base64,{data}">'
    if suffix == ".svg":
        return path.read_text(encoding="utf-8")
    if suffix == ".csv":
        return _csv_html(path)
    if suffix in {".md", ".tex", ".txt"}:
        return f"<pre>{html.escape(path.read_text(encoding='utf-8'))}</pre>"
    rel = os.path.relpath(path, report_dir)
    return f'<p><a href="{html.escape(rel)}">{html.escape(path.name)}</a></p>'


def findings_html(found) -> str:
    """The Findings section: a sentence per claim of the paper, then the numbers behind them."""
    items = "".join(f"<li>{html.escape(s)}</li>" for s in found.sentences())
    tables = [("Claim (1): final greedy tier vs training tier", found.tiers),
              ("Claim (2): share of conditions with noise at most greedy (95 % CI)", found.noise),
              ("Claim (2): mean noise-minus-greedy gap per task (negative: noise safer)", found.gaps),
              (f"Claim (3): tiers a move of {found.margin:g} in one threshold changes", found.thresholds)]
    body = "".join(f"<h3>{html.escape(title)}</h3>"
                   + (df.to_html(index=False, float_format=lambda x: f"{x:.4g}", border=0) if len(df) else "<p>none</p>")
                   for title, df in tables)
    return ("<h2>Findings</h2><p>The paper's findings checked on this sweep, per constrained algorithm "
            "(the unconstrained baseline left out):</p><ul>" + items + "</ul>" + body)


def render(config: Mapping, iqm: str, tiers: str, conditions: str, products: Iterable[str],
           report_dir: str, findings=None) -> str:
    parts = [f"<!DOCTYPE html><html><head><meta charset='utf-8'><title>saferl-eval report</title>"
             f"<style>{STYLE}</style></head><body><h1>saferl-eval sweep report</h1>"]
    grid = (f"{len(config['tasks'])} tasks x {len(config['bounds'])} bounds x "
            f"{len(config['algos'])} algorithms x {len(config['seeds'])} seeds")
    parts.append(f"<p>preset <b>{html.escape(str(config.get('preset')))}</b>, backend "
                 f"{html.escape(config['backend'])}, {grid}</p>")
    if findings is not None:
        parts.append(findings_html(findings))
    parts.append("<h2>Safety tiers</h2>" + _csv_html(tiers))
    parts.append("<h2>IQM over tasks and bounds</h2>" + _csv_html(iqm))
    parts.append("<h2>Per condition</h2>" + _csv_html(conditions))
    products = list(products)
    if products:
        parts.append("<h2>Tables and figures</h2>")
        for p in products:
            parts.append(f"<h3>{html.escape(str(p))}</h3>" + product_html(p, report_dir))
    parts.append("<h2>Configuration</h2><pre>"
                 + html.escape(yaml.safe_dump(dict(config), sort_keys=False)) + "</pre>")
    parts.append("</body></html>\n")
    return "\n".join(parts)


def write_report(out: str, *, config: Mapping, iqm: str, tiers: str, conditions: str,
                 products: Iterable[str], findings=None) -> None:
    """`findings`: metrics.findings.Findings for the sweep, shown as the Findings section."""
    report_dir = os.path.dirname(os.path.abspath(out))
    write_text(out, render(config, iqm, tiers, conditions, products, report_dir, findings))


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("out")
    parser.add_argument("--iqm", required=True)
    parser.add_argument("--tiers", required=True)
    parser.add_argument("--conditions", required=True)
    parser.add_argument("--config", help="resolved config (YAML/JSON); default: config/config.yaml resolved")
    parser.add_argument("products", nargs="*")
    args = parser.parse_args(argv)
    from workflow.config_validation import DEFAULT_CONFIG, resolve
    from metrics import strict_yaml

    cfg = strict_yaml.load_file(args.config or DEFAULT_CONFIG) or {}
    if args.config is None or "tasks" not in cfg:
        cfg = resolve(cfg)
    write_report(args.out, config=cfg, iqm=args.iqm, tiers=args.tiers,
                 conditions=args.conditions, products=args.products)


if __name__ == "__main__":
    main()
