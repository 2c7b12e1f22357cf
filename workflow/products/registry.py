"""The product table: every table and figure the sweep makes, found in one package.

Each product is one module of `workflow/products/catalog/` that defines `PRODUCT = Product(...)`:
what it reads from the sweep (`inputs`), how it is built (`build`), its report caption and
category, and the settings it reads (its own, with defaults, and shared ones by name). The
module's name is the product's name and Snakemake rule. Everything else is derived from the
table: the rules and `PRODUCT_TARGETS` (workflow/rules/products.smk), the report entries and
their caption files (`write_captions`), the `products` settings' defaults (settings.py) and
the one script every product rule runs (workflow/scripts/product.py).

A build function is called as `build(inputs, outputs, settings, wildcards)`:
- `inputs`: name -> path (or list of paths), the module's `inputs(files, wildcards)` resolved;
- `outputs`: a figure's [pdf, png] paths, or a table's {"csv", "md", "tex", "html"} paths;
- `settings`: the resolved settings the product declares (font size and dpi for figures);
- `wildcards`: {"task": ...} for per-task products, else {}.
Products read the metrics engine's outputs (docs/metrics.md) and never run it.
"""
from __future__ import annotations

import dataclasses
import functools
import importlib
import os
import pkgutil
from dataclasses import dataclass, field
from typing import Callable

FIGURE, TABLE = "figure", "table"
FORMATS = {FIGURE: ("pdf", "png"), TABLE: ("csv", "md", "tex", "html")}
REPORT_FORMAT = {FIGURE: "png", TABLE: "html"}  # the file the Snakemake report shows
FIGURE_SETTINGS = ("font_size", "dpi")  # every figure reads these
CATALOG = "workflow.products.catalog"

# Report categories: products that show one phase group, or the phases side by side.
ALL_PHASES = "Training, final with noise, final greedy"
TRAINING = "Training (with exploration noise)"
FINAL = "Final policy: with noise vs greedy"
SETUP = "Set-up: tiers and hyperparameters"
CATEGORIES = (SETUP, ALL_PHASES, TRAINING, FINAL)


@dataclass(frozen=True)
class SweepFiles:
    """Where the sweep's files are (built by the rule file from common.smk's names).

    aggregate / tiers: the engine's stage-2 / stage-3 files by name; thresholds: the
    configured thresholds as written for the tiers step; runs(name, task=None): a file of
    every run (of one task); preset: the sweep's preset name."""
    aggregate: dict
    tiers: dict
    thresholds: str
    runs: Callable[..., list]
    preset: str = ""


@dataclass(frozen=True, kw_only=True)
class Product:
    """One table or figure. `name` is filled in from the module's name when the table is read."""
    kind: str                # FIGURE or TABLE
    category: str            # one of CATEGORIES
    caption: str             # reStructuredText; Jinja sees `snakemake.params` and `snakemake.wildcards`
    inputs: Callable[[SweepFiles, dict], dict]  # (files, wildcards) -> {name: path or paths}
    build: Callable          # build(inputs, outputs, settings, wildcards)
    stem: str = ""           # file name without extension, "{task}" in it for per-task products; default: name
    settings: dict = field(default_factory=dict)  # its own `products` settings with defaults (nested allowed)
    shared: tuple = ()       # shared settings it reads (settings.SHARED: baseline, bold, decimals)
    check: Callable[[dict], None] | None = None  # raises ValueError naming a bad value of its own settings
    paper: str = ""          # the paper item it reproduces (docs/products.md)
    name: str = ""

    @property
    def file_stem(self) -> str:
        return self.stem or self.name

    @property
    def per_task(self) -> bool:
        return "{task}" in self.file_stem

    def outputs(self, directory: str, **wildcards):
        """The output paths (a list for figures, a dict by format for tables)."""
        stem = self.file_stem.format(**wildcards) if wildcards else self.file_stem
        paths = {ext: f"{directory}/{stem}.{ext}" for ext in FORMATS[self.kind]}
        return paths if self.kind == TABLE else list(paths.values())

    def settings_of(self, resolved: dict) -> dict:
        """The resolved values of the settings it reads, nested as declared one level deep
        (it declares {"cdf_xmax": {"figure2": 2.0}}: it gets cdf_xmax's figure2 alone)."""
        out = {k: resolved[k] for k in FIGURE_SETTINGS} if self.kind == FIGURE else {}
        out.update({k: resolved[k] for k in self.shared})
        for key, default in self.settings.items():
            out[key] = {sub: resolved[key][sub] for sub in default} if isinstance(default, dict) else resolved[key]
        return out


def _checked(product: Product, module) -> Product:
    where = f"{module.__file__}: PRODUCT"
    if product.name and product.name != module.__name__.rpartition(".")[2]:
        raise ValueError(f"{where}: name {product.name!r} differs from the module's; leave it out")
    product = dataclasses.replace(product, name=module.__name__.rpartition(".")[2])
    if product.kind not in FORMATS:
        raise ValueError(f"{where}: kind {product.kind!r} is not one of {sorted(FORMATS)}")
    if product.category not in CATEGORIES:
        raise ValueError(f"{where}: category {product.category!r} is not one of {list(CATEGORIES)}")
    if not product.caption.strip():
        raise ValueError(f"{where}: caption is empty")
    if not (callable(product.inputs) and callable(product.build)):
        raise ValueError(f"{where}: inputs and build must be functions")
    if product.file_stem.replace("{task}", "").count("{"):
        raise ValueError(f"{where}: stem {product.file_stem!r} may hold no wildcard but {{task}}")
    return product


def discover(package: str = CATALOG) -> list[Product]:
    """Every product module of `package` (names starting with "_" are helpers), tables first,
    then figures, each by name."""
    pkg = importlib.import_module(package)
    products = []
    for info in pkgutil.iter_modules(pkg.__path__):
        if info.name.startswith("_"):
            continue
        module = importlib.import_module(f"{package}.{info.name}")
        if not isinstance(getattr(module, "PRODUCT", None), Product):
            raise ValueError(f"{module.__file__}: a product module defines PRODUCT = Product(...)")
        products.append(_checked(module.PRODUCT, module))
    return sorted(products, key=lambda p: (p.kind != TABLE, p.name))


@functools.cache
def products() -> tuple[Product, ...]:
    """The product table (read once per process)."""
    return tuple(discover())


def by_name(table=None) -> dict[str, Product]:
    table = products() if table is None else table
    names = [p.name for p in table]
    duplicates = sorted({n for n in names if names.count(n) > 1})
    if duplicates:
        raise ValueError(f"product table: duplicate name(s) {duplicates}")
    return {p.name: p for p in table}


def targets(directories: dict, tasks, table=None) -> list[str]:
    """Every output file of every product (per-task ones for each task): PRODUCT_TARGETS."""
    out = []
    for p in products() if table is None else table:
        for wildcards in ([{"task": t} for t in tasks] if p.per_task else [{}]):
            paths = p.outputs(directories[p.kind], **wildcards)
            out += list(paths.values()) if isinstance(paths, dict) else paths
    return out


def write_captions(directory: str, table=None) -> dict[str, str]:
    """Each product's caption as `directory/{name}.rst` (the file Snakemake's report reads;
    the Snakefile's onstart writes them into the sweep's folder), rewritten only where it
    changed; returns name -> path."""
    from metrics.atomic import write_text

    os.makedirs(directory, exist_ok=True)
    paths = {}
    for p in products() if table is None else table:
        paths[p.name] = os.path.join(directory, f"{p.name}.rst")
        text = p.caption.strip() + "\n"
        if not (os.path.isfile(paths[p.name]) and open(paths[p.name], encoding="utf-8").read() == text):
            write_text(paths[p.name], text)
    return paths


def run_from_snakemake(smk) -> None:
    """The body of workflow/scripts/product.py: build the product the rule names."""
    product = by_name()[smk.params.product]
    outputs = dict(smk.output.items()) if product.kind == TABLE else list(smk.output)
    inputs = {name: (list(value) if not isinstance(value, str) else value) for name, value in smk.input.items()}
    product.build(inputs, outputs, dict(smk.params.settings), dict(smk.wildcards.items()))


def main() -> None:
    """Print the product table as Markdown: `python -m workflow.products.registry`."""
    print("| rule | paper item | files | report category | settings |\n|---|---|---|---|---|")
    for p in products():
        own = list(p.shared) + [f"{k}.{sub}" if sub else k  # one level deep, as settings_of picks them
                                for k, v in p.settings.items() for sub in (v if isinstance(v, dict) else [""])]
        own = ", ".join(own) or "-"
        print(f"| `{p.name}` | {p.paper or '-'} | `{p.kind}s/{p.file_stem}.{{{','.join(FORMATS[p.kind])}}}` "
              f"| {p.category} | {own} |")


if __name__ == "__main__":
    from workflow.products import registry  # the module the catalog imports, not this __main__ copy

    registry.main()
