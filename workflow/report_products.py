"""The report's tables and figures: each product once, rendered, beside its caption, with its
other formats as download links.

A product's files (figures: PDF, PNG; tables: CSV, Markdown, LaTeX, HTML) are grouped back
into one item through the product table (workflow/products/registry.py); its caption is the
module's, rendered as Snakemake's report renders it (Jinja, then reStructuredText). A figure
is shown at its print size (a 9 pt label reads as 9 pt) unless the column is narrower; a
table is the body of its HTML file. A file no product names is shown alone under its name.
"""
from __future__ import annotations

import base64
import html
import os
import re
import struct
from dataclasses import dataclass, field
from pathlib import Path

from metrics.safe_text import read_csv
from workflow.products import registry

DOWNLOAD_NAMES = {"csv": "CSV", "md": "Markdown", "tex": "LaTeX", "pdf": "PDF", "png": "PNG", "html": "HTML"}
SHOWN = {registry.FIGURE: "png", registry.TABLE: "html"}  # the format rendered; the others are links
CSS_PX_PER_INCH = 96


@dataclass
class Item:
    """One product instance (per-task products: one per task) and its files by format."""
    product: registry.Product | None
    wildcards: dict
    files: dict = field(default_factory=dict)

    @property
    def key(self) -> str:
        stem = Path(next(iter(self.files.values()))).stem
        return re.sub(r"[^A-Za-z0-9_-]", "-", stem)


def _stem_pattern(product: registry.Product) -> re.Pattern:
    parts = [re.escape(part) for part in product.file_stem.split("{task}")]
    return re.compile("(?P<task>.+)".join(parts) + r"\Z")


def collect(paths, table=None) -> list[Item]:
    """Group product files into items, in the order their first file is given."""
    table = registry.products() if table is None else table
    patterns = [(p, _stem_pattern(p)) for p in table]
    items: dict[tuple, Item] = {}
    for path in map(str, paths):
        stem, ext = Path(path).stem, Path(path).suffix.lstrip(".").lower()
        found = next(((p, m.groupdict()) for p, pat in patterns if (m := pat.match(stem))
                      and ext in registry.FORMATS[p.kind]), (None, {}))
        product, wildcards = found
        key = (product.name, tuple(sorted(wildcards.items()))) if product else ("", path)
        items.setdefault(key, Item(product, wildcards)).files[ext] = path
    return list(items.values())


_LEAD = re.compile(r"<p><strong>(.+?)</strong>\s*[,:;.\u2014-]?\s*", re.S)


def caption_html(product: registry.Product, settings: dict, wildcards: dict) -> tuple[str, str]:
    """(title, body) of a product's caption as HTML: its leading bold phrase, which becomes
    the heading, and the rest, rendered as Snakemake's report renders it."""
    import jinja2
    from docutils.core import publish_parts
    from docutils.writers import html5_polyglot

    text = jinja2.Template(product.caption).render(
        snakemake={"params": {"settings": product.settings_of(settings)}, "wildcards": wildcards})
    body = publish_parts(text.strip(), writer=html5_polyglot.Writer(),
                         settings_overrides={"report_level": 5, "halt_level": 5, "doctitle_xform": False,
                                             "input_encoding": "unicode"})["body"]
    match = _LEAD.match(body.strip())
    if not match:
        return "", body
    rest = body.strip()[match.end():]
    title = re.sub(r"<[^>]+>", "", match.group(1)).strip().rstrip(".")
    return html.unescape(title), "<p>" + rest[:1].upper() + rest[1:]


def png_print_width(path: str | os.PathLike) -> int | None:
    """The CSS width (px) at which a PNG shows at its print size: its width in pixels over the
    dots per inch its pHYs chunk records (matplotlib writes the dpi there); None without one."""
    data = Path(path).read_bytes()
    width = struct.unpack(">I", data[16:20])[0]
    pos = 8
    while pos + 8 <= len(data):
        length, kind = struct.unpack(">I4s", data[pos:pos + 8])
        if kind == b"pHYs":
            per_metre, _, unit = struct.unpack(">IIB", data[pos + 8:pos + 17])
            return round(width * CSS_PX_PER_INCH / (per_metre * 0.0254)) if unit == 1 and per_metre else None
        if kind == b"IDAT":
            return None
        pos += 12 + length
    return None


def figure_img(path: str) -> str:
    data = base64.b64encode(Path(path).read_bytes()).decode("ascii")
    width = png_print_width(path)
    size = f" style='width:{width}px'" if width else ""
    return f"<img alt='{html.escape(Path(path).name)}'{size} src='data:image/png;base64,{data}'>"


_BODY = re.compile(r"<body[^>]*>(.*)</body>", re.S | re.I)
_TITLE = re.compile(r"\A\s*<h3>.*?</h3>", re.S)


def table_body(path: str) -> str:
    """The table (and its notes) of a product's HTML file, without its page and title."""
    text = Path(path).read_text(encoding="utf-8")
    match = _BODY.search(text)
    return _TITLE.sub("", match.group(1) if match else text)


def csv_table(path: str) -> str:
    """A CSV no product renders, as a plain table; a missing value is an empty cell."""
    df = read_csv(path)
    return df.to_html(index=False, na_rep="", border=0, float_format=lambda x: f"{x:.4g}")


def links(files: dict, report_dir: str, skip: str | None = None) -> str:
    """Links to a product's files, relative to the report, named by format."""
    return " · ".join(f"<a href='{html.escape(os.path.relpath(path, report_dir))}'>{DOWNLOAD_NAMES.get(ext, ext)}</a>"
                      for ext, path in files.items() if ext != skip)


def downloads(files: dict, report_dir: str, skip: str | None) -> str:
    shown = links(files, report_dir, skip)
    return f"<p class='downloads'>Download: {shown}</p>" if shown else ""


def item_html(item: Item, report_dir: str, settings: dict, heading: str = "h3") -> str:
    """One product: heading, the rendered file, its caption, its other formats as links."""
    product = item.product
    if product is None:
        return _loose_file_html(item, report_dir, heading)
    title, caption = caption_html(product, settings, item.wildcards)
    shown = SHOWN[product.kind]
    head = f"<{heading} id='{item.key}'>{html.escape(title or product.name)}</{heading}>"
    links = downloads(item.files, report_dir, skip=shown)
    if product.kind == registry.FIGURE:
        img = figure_img(item.files[shown]) if shown in item.files else ""
        return (f"<section class='product'>{head}<figure>{img}<figcaption>{caption}{links}</figcaption>"
                f"</figure></section>")
    body = table_body(item.files[shown]) if shown in item.files else (
        csv_table(item.files["csv"]) if "csv" in item.files else "")
    return f"<section class='product'>{head}<div class='caption'>{caption}</div>" \
           f"<div class='table-wrap'>{body}</div>{links}</section>"


def _loose_file_html(item: Item, report_dir: str, heading: str) -> str:
    """A file the product table does not name: rendered by its suffix where it can be."""
    ext, path = next(iter(item.files.items()))
    rel = html.escape(os.path.relpath(path, report_dir))
    head = f"<{heading} id='{item.key}'>{html.escape(Path(path).name)}</{heading}>"
    if ext == "png":
        body = f"<figure>{figure_img(path)}</figure>"
    elif ext == "csv":
        body = f"<div class='table-wrap'>{csv_table(path)}</div>"
    else:
        body = ""
    return f"<section class='product'>{head}{body}<p class='downloads'>Download: <a href='{rel}'>{rel}</a></p></section>"
