"""The product table: every table and figure the sweep makes, in one place.

Everything else is derived from it: the Snakemake rules and `PRODUCT_TARGETS`
(workflow/rules/products.smk defines one rule per entry), the report entries (category,
subcategory and caption `workflow/report/{caption}.rst` of each) and the one script every
product rule runs (workflow/scripts/product.py). A new figure or table is a build function
plus one entry here.

A build function is called as `f(inputs, outputs, settings, wildcards)`:
- `inputs`: name -> path (or list of paths), the entry's `inputs` resolved for the sweep;
- `outputs`: a figure's [pdf, png] paths, or a table's {"csv", "md", "tex", "html"} paths;
- `settings`: the `products` settings the entry names (font size and dpi always), and for
  entries with `run_params` the extra values they ask for;
- `wildcards`: {"task": ...} for per-task products, else {}.
Products read the metrics engine's outputs (docs/metrics.md) and never run it.
"""
from __future__ import annotations

import importlib
from dataclasses import dataclass
from typing import Callable

FIGURE, TABLE = "figure", "table"
FORMATS = {FIGURE: ("pdf", "png"), TABLE: ("csv", "md", "tex", "html")}
REPORT_FORMAT = {FIGURE: "png", TABLE: "html"}  # the file the Snakemake report shows

# Report categories: products that show one phase group, or the phases side by side.
ALL_PHASES = "Training, final with noise, final greedy"
TRAINING = "Training (with exploration noise)"
FINAL = "Final policy: with noise vs greedy"
SETUP = "Set-up: tiers and hyperparameters"


@dataclass(frozen=True)
class SweepFiles:
    """Where the sweep's files are (built by the rule file from common.smk's names).

    aggregate / tiers: the engine's stage-2 / stage-3 files by name; thresholds: the
    configured thresholds as written for the tiers step; runs(name, task=None): a file of
    every run (of one task); figure1_run: the run Figure 1 shows (task, bound, algo, seed,
    bound_label)."""
    aggregate: dict
    tiers: dict
    thresholds: str
    runs: Callable[..., list]
    run_file: Callable[..., str]
    figure1_run: dict


@dataclass(frozen=True)
class Product:
    name: str                # rule name
    kind: str                # FIGURE or TABLE
    stem: str                # file name without extension; "{task}" for per-task products
    build: str               # function name in workflow.products.build, or "module:function"
    inputs: Callable[[SweepFiles, dict], dict]  # (files, wildcards) -> {name: path or paths}
    caption: str             # workflow/report/{caption}.rst
    category: str
    settings: tuple = ()     # `products` settings keys it uses ("a.b" picks one nested value)
    run_params: Callable[[SweepFiles], dict] | None = None  # extra params, e.g. Figure 1's run
    paper: str = ""          # the paper item it reproduces (docs/products.md)

    @property
    def per_task(self) -> bool:
        return "{task}" in self.stem

    def outputs(self, directory: str, **wildcards):
        """The output paths (a list for figures, a dict by format for tables)."""
        stem = self.stem.format(**wildcards) if wildcards else self.stem
        paths = {ext: f"{directory}/{stem}.{ext}" for ext in FORMATS[self.kind]}
        return paths if self.kind == TABLE else list(paths.values())

    def settings_of(self, settings: dict) -> dict:
        out = {k: settings[k] for k in ("font_size", "dpi")} if self.kind == FIGURE else {}
        for key in self.settings:
            head, _, sub = key.partition(".")
            if sub:
                out.setdefault(head, {})[sub] = settings[head][sub]
            else:
                out[head] = settings[head]
        return out

    def function(self) -> Callable:
        module, _, name = self.build.rpartition(":")
        return getattr(importlib.import_module(module or "workflow.products.build"), name)


def _aggregate(*names):
    return lambda files, w: {n: files.aggregate[n] for n in names}


def _figure1_run(files: SweepFiles) -> dict:
    return {"run": {k: files.figure1_run[k] for k in ("task", "bound", "algo", "seed")}}


PRODUCTS: list[Product] = [
    Product("table1", TABLE, "table1", "table1", lambda f, w: {"thresholds": f.thresholds}, "table1", SETUP,
            paper="Table 1"),
    Product("tableA1", TABLE, "tableA1", "table_a1", lambda f, w: {"runs": f.runs("run.json")}, "tableA1", SETUP,
            paper="Table A.1"),
    Product("table2", TABLE, "table2", "table2",
            lambda f, w: {"iqm": f.aggregate["iqm"], "tiers": f.tiers["tiers"], "runs": f.runs("run.json")}, "table2",
            ALL_PHASES, ("baseline", "decimals", "bold"), paper="Table 2"),
    Product("tableA2", TABLE, "tableA2", "table_a2",
            lambda f, w: {"iqm": f.aggregate["iqm"], "tiers": f.tiers["tiers"], "runs": f.runs("run.json")}, "tableA2", FINAL,
            ("baseline", "decimals", "bold"), paper="Table A.2"),
    Product("tableA3", TABLE, "tableA3", "table_a3",
            lambda f, w: {"iqm": f.aggregate["iqm"], "tiers": f.tiers["tiers"], "runs": f.runs("run.json")}, "tableA3", ALL_PHASES,
            ("baseline", "decimals", "bold"), paper="Table A.3"),
    Product("tableA_task", TABLE, "tableA_task_{task}", "task_table",
            lambda f, w: {"conditions": f.tiers["conditions"]}, "tableA_task", ALL_PHASES, ("decimals",),
            paper="Tables A.4-A.7"),
    Product("figure1", FIGURE, "figure1", "figure1",
            lambda f, w: {"summary": f.run_file("summary.parquet", **{
                k: f.figure1_run["bound_label" if k == "bound" else k] for k in ("task", "bound", "algo", "seed")})},
            "figure1", FINAL, run_params=_figure1_run, paper="Figure 1"),
    Product("figure2", FIGURE, "figure2", "figure2", _aggregate("cdf"), "figure2", ALL_PHASES,
            ("cdf_xmax.figure2",), paper="Figure 2"),
    Product("figureA1", FIGURE, "figureA1", "figure_a1", _aggregate("cdf"), "figureA1", ALL_PHASES,
            ("cdf_xmax.figureA1",), paper="Figure A.1"),
    Product("figureA2_multipliers", FIGURE, "figureA2", "figure_multipliers",
            lambda f, w: {"traces": f.runs("trace.parquet")}, "figureA2", TRAINING, ("multiplier_yscale",),
            paper="Figure A.2"),
    Product("figureA_training_curves", FIGURE, "figureA_curves_{task}", "figure_training_curves",
            lambda f, w: {"summaries": f.runs("summary.parquet", task=w["task"]),
                          "traces": f.runs("trace.parquet", task=w["task"])},
            "figureA_curves", TRAINING, ("smoothing_window",), paper="Figures A.3-A.6"),
    Product("figureA_final_costs", FIGURE, "figureA_final_{task}", "figure_final_costs",
            _aggregate("final_episodes", "condition_stats"), "figureA_final", FINAL, paper="Figures A.7-A.10"),
    Product("figure_tier_sensitivity", FIGURE, "figure_tier_sensitivity", "tier_sensitivity",
            lambda f, w: {"iqm": f.aggregate["iqm"], "tiers": f.tiers["tiers"], "thresholds": f.thresholds},
            "figure_tier_sensitivity", ALL_PHASES, ("sensitivity",)),
]


def by_name(products=None) -> dict[str, Product]:
    products = PRODUCTS if products is None else products
    names = [p.name for p in products]
    duplicates = sorted({n for n in names if names.count(n) > 1})
    if duplicates:
        raise ValueError(f"product table: duplicate name(s) {duplicates}")
    return {p.name: p for p in products}


def targets(directories: dict, tasks, products=None) -> list[str]:
    """Every output file of every product (per-task ones for each task): PRODUCT_TARGETS."""
    out = []
    for p in PRODUCTS if products is None else products:
        for wildcards in ([{"task": t} for t in tasks] if p.per_task else [{}]):
            paths = p.outputs(directories[p.kind], **wildcards)
            out += list(paths.values()) if isinstance(paths, dict) else paths
    return out


def run_from_snakemake(smk) -> None:
    """The body of workflow/scripts/product.py: build the product the rule names."""
    product = by_name()[smk.params.product]
    outputs = dict(smk.output.items()) if product.kind == TABLE else list(smk.output)
    inputs = {name: (list(value) if not isinstance(value, str) else value) for name, value in smk.input.items()}
    extras = {name: value for name, value in smk.params.items() if name not in ("product", "settings")}
    settings = {**smk.params.settings, **extras}
    product.function()(inputs, outputs, settings, dict(smk.wildcards.items()))
