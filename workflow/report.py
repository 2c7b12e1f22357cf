"""The sweep's report: one self-contained HTML page (results/report.html), read top to bottom.

First the sweep in one line, the paper's findings checked on it (one verdict each), Table 2
as the paper lays it out (workflow/report_table2.py) and Figures 1 and 2 beside their
captions; then every other table and figure once, grouped as Snakemake's report groups them,
each rendered with its other formats as download links (workflow/report_products.py); last
the numbers behind the findings, the engine's files and the configuration. Built by the
`report` rule; usable alone:

    python -m workflow.report OUT.html --iqm IQM.csv --tiers TIERS.csv --conditions C.csv [PRODUCT ...]
"""
from __future__ import annotations

import argparse
import html
import os
from typing import Iterable, Mapping

import yaml

from metrics.atomic import write_text
from metrics.safe_text import read_csv
from workflow import report_findings, report_products, report_table2
from workflow.products import registry

# The page fits 1,400 px without scrolling sideways: a 1,240 px column, tables that wrap or
# scroll inside their own box, configuration text that wraps.
STYLE = """
body { font-family: sans-serif; max-width: 1240px; margin: 1.5em auto; padding: 0 16px; color: #222;
       line-height: 1.4; }
h1 { margin-bottom: 0.2em; } h2 { margin-top: 1.8em; border-bottom: 1px solid #ddd; }
h3 { margin: 1.6em 0 0.4em; font-size: 1.05em; }
nav { font-size: 0.9em; color: #555; } nav a { margin-right: 0.8em; }
table { border-collapse: collapse; font-size: 13px; margin: 0.4em 0 0.8em; }
td, th { border: 1px solid #ccc; padding: 3px 7px; text-align: right; vertical-align: top; }
th { background: #f3f3f3; } thead th { text-align: center; }
tbody th { text-align: left; white-space: nowrap; }
table.headline td { min-width: 4.5em; } table.headline th.phase { background: #e8e8e8; }
.ci { display: block; font-size: 11px; color: #666; white-space: nowrap; }
td.tier { text-align: left; white-space: nowrap; } td.tier .ci { color: inherit; opacity: 0.85; }
.swatch { display: inline-block; padding: 0 6px; border-radius: 3px; font-size: 12px; }
.verdict { display: inline-block; min-width: 6em; text-align: center; border-radius: 3px; font-size: 0.85em;
           font-weight: bold; padding: 0 4px; margin-right: 0.3em; }
.verdict.yes { background: #d9f0d3; } .verdict.no { background: #fddbc7; } .verdict.mixed { background: #f0f0f0; }
ol.findings li { margin-bottom: 0.4em; }
figure { display: flex; flex-wrap: wrap; gap: 0 24px; align-items: flex-start; margin: 0.5em 0 1em; }
figure img { max-width: 100%; height: auto; flex: none; }
figcaption { flex: 1 1 300px; font-size: 0.9em; }
.caption { font-size: 0.9em; max-width: 60em; } .caption p, figcaption p { margin: 0.3em 0; }
.table-wrap { max-width: 100%; overflow-x: auto; } .table-wrap p { font-size: 0.85em; color: #444; margin: 0.2em 0; }
table.text td { text-align: left; }
.downloads { font-size: 0.85em; color: #555; } .downloads a { margin: 0 0.2em; }
pre { background: #f7f7f7; padding: 0.6em; white-space: pre-wrap; word-break: break-word; font-size: 12px; }
"""
HEADLINE = ("table2", "tableA2", "tableA3")  # the Table 2 section renders these three in one table
FIGURES = ("figure1", "figure2")             # shown right after it
PAPER_NAMES = {"table2": "Table 2", "tableA2": "Table A.2", "tableA3": "Table A.3"}


def _plural(n: int, word: str) -> str:
    return f"{n} {word}{'' if n == 1 else 's'}"


def sweep_line(config: Mapping) -> str:
    from workflow.products.style import algo_label, task_label

    tasks, bounds, algos, seeds = (list(config[k]) for k in ("tasks", "bounds", "algos", "seeds"))
    per_task = config.get("task_bounds") or {t: bounds for t in tasks}  # a preset may give bounds per task
    n_runs = sum(len(per_task[t]) for t in tasks) * len(algos) * len(seeds)
    esc = html.escape
    return (f"<p class='sweep'>preset <b>{esc(str(config.get('preset')))}</b>, {esc(str(config['backend']))} "
            f"backend: {_plural(len(tasks), 'task')} ({esc(', '.join(task_label(t) for t in tasks))}) x "
            f"{_plural(len(bounds), 'bound')} ({esc(', '.join(f'{b:g}' for b in bounds))}) x "
            f"{_plural(len(algos), 'algorithm')} ({esc(', '.join(algo_label(a) for a in algos))}) x "
            f"{_plural(len(seeds), 'seed')} = {_plural(n_runs, 'run')}</p>")


def table2_section(iqm: str, tiers: str, settings: Mapping, items, report_dir: str) -> str:
    from workflow.products.style import algo_label

    table = report_table2.headline_table(read_csv(iqm), read_csv(tiers), baseline=settings["baseline"],
                                         decimals=settings["decimals"])
    files = "; ".join(f"{PAPER_NAMES[item.product.name]} ({report_products.links(item.files, report_dir)})"
                      for item in items)
    files = f"<p class='downloads'>As files, with R and C: {files}</p>" if files else ""
    baseline = html.escape(algo_label(settings["baseline"]))
    return ("<h2 id='table2'>Table 2: how safe each algorithm is, in training and deployed</h2>"
            "<div class='table-wrap'>" + table + "</div>"
            "<p class='caption'>Each value is an interquartile mean (IQM) over the (task, bound) conditions of "
            "the per-condition mean over seeds, with its 95 % stratified-bootstrap interval below. <i>V</i>: "
            "share of episodes whose cost exceeds the bound d; <i>Dnorm</i> = (C − d) / d, above 0 unsafe on "
            "average; <i>Dnorm+</i>: mean (c − d) / d over the violating episodes only. Tier on its colour: "
            + report_table2.tier_legend() + "; P = share of bootstrap replicates in that tier. Bold: the best "
            f"value per column, {baseline} (the unconstrained baseline) left out. Training averages every logged "
            "iterate (noise on); final: the last policy with noise and greedy (noise off, as deployed).</p>"
            + files)


def render(config: Mapping, iqm: str, tiers: str, conditions: str, products: Iterable[str],
           report_dir: str, findings=None, settings: Mapping | None = None) -> str:
    from workflow.products import settings as product_settings

    settings = dict(settings) if settings is not None else product_settings.resolve(config.get("products"))
    items = report_products.collect(products)
    named = {item.product.name: item for item in items if item.product is not None}
    rest = [item for item in items if item.product is None or item.product.name not in HEADLINE + FIGURES]
    categories = [(c, [i for i in rest if i.product is not None and i.product.category == c])
                  for c in registry.CATEGORIES]
    categories = [(c, group) for c, group in categories if group]
    loose = [item for item in rest if item.product is None]

    nav = [("findings", "Findings"), ("table2", "Table 2"), ("figures", "Figures 1 and 2")]
    nav += [(f"cat{i}", c) for i, (c, _) in enumerate(categories)]
    nav += [("files", "Files and configuration")]
    parts = ["<!DOCTYPE html><html><head><meta charset='utf-8'><title>saferl-eval report</title>"
             f"<meta name='viewport' content='width=device-width'><style>{STYLE}</style></head><body>",
             "<h1>saferl-eval sweep report</h1>", sweep_line(config),
             "<nav>" + "".join(f"<a href='#{k}'>{html.escape(v)}</a>" for k, v in nav) + "</nav>"]
    parts.append("<h2 id='findings'>Findings</h2>")
    if findings is not None:
        parts.append("<p>The paper's findings checked on this sweep, per constrained algorithm (the unconstrained "
                     "baseline left out; <a href='#evidence'>the numbers behind them</a>):</p>"
                     + report_findings.verdict_list(findings))
    else:
        parts.append("<p>Not checked: the report was built without the findings.</p>")
    parts.append(table2_section(iqm, tiers, settings, [named[n] for n in HEADLINE if n in named], report_dir))
    parts.append("<h2 id='figures'>Figures 1 and 2</h2>")
    parts += [report_products.item_html(named[n], report_dir, settings) for n in FIGURES if n in named]
    if not any(n in named for n in FIGURES):
        parts.append("<p>Not built in this sweep.</p>")
    for i, (category, group) in enumerate(categories):
        parts.append(f"<h2 id='cat{i}'>{html.escape(category)}</h2>")
        parts += [report_products.item_html(item, report_dir, settings) for item in group]
    if loose:
        parts.append("<h2>Other files</h2>")
        parts += [report_products.item_html(item, report_dir, settings) for item in loose]
    parts.append("<h2 id='files'>Files and configuration</h2>")
    if findings is not None:
        parts.append("<h3 id='evidence'>The numbers behind the findings</h3>" + report_findings.evidence(findings))
    engine = [("IQMs and CIs", iqm), ("tiers and P(tier)", tiers), ("per condition", conditions)]
    parts.append("<p class='downloads'>The metrics engine's files: " + " · ".join(
        f"<a href='{html.escape(os.path.relpath(path, report_dir))}'>{html.escape(os.path.basename(path))}</a> "
        f"({what})" for what, path in engine) + "</p>")
    # folded: the resolved configuration runs to hundreds of lines
    parts.append("<details><summary>The resolved configuration</summary><pre>"
                 + html.escape(yaml.safe_dump(dict(config), sort_keys=False)) + "</pre></details>")
    parts.append("</body></html>\n")
    return "\n".join(parts)


def write_report(out: str, *, config: Mapping, iqm: str, tiers: str, conditions: str,
                 products: Iterable[str], findings=None, settings: Mapping | None = None) -> None:
    """`findings`: metrics.findings.Findings for the sweep; `settings`: the resolved `products`
    settings (default: resolved from the config), which the captions and Table 2 read."""
    report_dir = os.path.dirname(os.path.abspath(out))
    write_text(out, render(config, iqm, tiers, conditions, products, report_dir, findings, settings))


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
