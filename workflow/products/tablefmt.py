"""Render a table of display strings, with bold cells and grouped columns, as Markdown or LaTeX.

Small hand-written renderers (pandas' to_markdown needs tabulate and Styler.to_latex needs
jinja2, neither of which the project depends on) that support exactly what the products
use: a row-label column, column groups (e.g. Training / Final greedy) and bold cells.
"""
from __future__ import annotations

import html
import itertools
from dataclasses import dataclass, field

import pandas as pd

from metrics.safe_text import markdown_cell, visible

from . import outputs


@dataclass
class Table:
    """What a table shows (strings) plus its numbers (`data`, written as CSV)."""
    title: str
    row_header: list[str]            # headers of the row-label columns, e.g. ["Algorithm"]
    rows: list[list[str]]            # row labels, one list per row
    columns: list[tuple[str, str]]   # (group, header); group "" for none
    cells: list[list[str]]           # display strings, rows x columns
    bold: list[list[bool]]           # rows x columns
    data: pd.DataFrame               # unrounded numbers for the CSV
    notes: list[str] = field(default_factory=list)
    numeric: bool = True             # False: text columns, left-aligned

    def __post_init__(self):
        n_rows, n_cols = len(self.rows), len(self.columns)
        if len(self.cells) != n_rows or any(len(r) != n_cols for r in self.cells):
            raise ValueError(f"table {self.title!r}: cells must be {n_rows} x {n_cols}")
        if len(self.bold) != n_rows or any(len(r) != n_cols for r in self.bold):
            raise ValueError(f"table {self.title!r}: bold mask must be {n_rows} x {n_cols}")


def _md_escape(text: str) -> str:
    """A computed cell (numbers, the bold marks around them): a bar would split it."""
    return visible(text).replace("|", "\\|")


def to_markdown(table: Table) -> str:
    headers = list(table.row_header) + [
        f"{group} {header}".strip() for group, header in table.columns
    ]
    lines = [f"**{table.title}**", ""]
    lines.append("| " + " | ".join(markdown_cell(h) for h in headers) + " |")  # names: never markup
    align = "---:" if table.numeric else ":---"
    lines.append("|" + "|".join([":---"] * len(table.row_header) + [align] * len(table.columns)) + "|")
    for labels, cells, bold in zip(table.rows, table.cells, table.bold):
        shown = [f"**{c}**" if b and c else c for c, b in zip(cells, bold)]
        lines.append("| " + " | ".join([markdown_cell(x) for x in labels] + [_md_escape(x) for x in shown]) + " |")
    lines += [""] + [f"{note}" for note in table.notes]
    return "\n".join(lines).rstrip() + "\n"


_TEX_SPECIAL = {"&": r"\&", "%": r"\%", "$": r"\$", "#": r"\#", "_": r"\_", "{": r"\{", "}": r"\}",
                "~": r"\textasciitilde{}", "^": r"\textasciicircum{}", "\\": r"\textbackslash{}"}


def tex_escape(text: str) -> str:
    """Escape LaTeX specials, then typeset the table's few symbols in math mode."""
    out = "".join(_TEX_SPECIAL.get(ch, ch) for ch in text)
    return (out.replace("±", r"$\pm$").replace("Dnorm+", r"$D^{+}_\mathrm{norm}$")
            .replace("Dnorm", r"$D_\mathrm{norm}$").replace("−", "-"))


def column_groups(table: Table) -> list[tuple[str, int]]:
    """Runs of adjacent columns under one group header: [(group, span), ...]."""
    return [(group, len(list(cols))) for group, cols in itertools.groupby(table.columns, key=lambda c: c[0])]


def to_latex(table: Table) -> str:
    n_labels = len(table.row_header)
    spec = "l" * n_labels + ("r" if table.numeric else "l") * len(table.columns)
    lines = [r"% " + table.title, r"\begin{tabular}{" + spec + "}", r"\toprule"]
    groups = column_groups(table)
    if any(g for g, _ in groups):
        cells, rules, col = [""] * n_labels, [], n_labels + 1
        for group, span in groups:
            cells.append(rf"\multicolumn{{{span}}}{{c}}{{{tex_escape(group)}}}" if span > 1 else tex_escape(group))
            if group:
                rules.append(rf"\cmidrule(lr){{{col}-{col + span - 1}}}")
            col += span
        lines.append(" & ".join(cells) + r" \\")
        lines.append(" ".join(rules))
    headers = [tex_escape(h) for h in table.row_header] + [tex_escape(h) for _, h in table.columns]
    lines.append(" & ".join(headers) + r" \\")
    lines.append(r"\midrule")
    for labels, cells, bold in zip(table.rows, table.cells, table.bold):
        shown = [rf"\textbf{{{tex_escape(c)}}}" if b and c else tex_escape(c) for c, b in zip(cells, bold)]
        lines.append(" & ".join([tex_escape(x) for x in labels] + shown) + r" \\")
    lines += [r"\bottomrule", r"\end{tabular}"]
    lines += [r"% " + note for note in table.notes]
    return "\n".join(lines) + "\n"


def to_html(table: Table) -> str:
    """A standalone HTML page (for `snakemake --report`, which shows it in a frame)."""
    def esc(text: str) -> str:
        return html.escape(visible(text))

    groups = column_groups(table)
    if any(group for group, _ in groups):
        head = ["<tr>" + "".join(f"<th rowspan='2'>{esc(h)}</th>" for h in table.row_header)]
        head[0] += "".join(f"<th colspan='{span}'>{esc(group)}</th>" for group, span in groups) + "</tr>"
        head.append("<tr>" + "".join(f"<th>{esc(h)}</th>" for _, h in table.columns) + "</tr>")
    else:  # no column groups: one header row
        head = ["<tr>" + "".join(f"<th>{esc(h)}</th>" for h in table.row_header)
                + "".join(f"<th>{esc(h)}</th>" for _, h in table.columns) + "</tr>"]
    body = []
    for labels, cells, bold in zip(table.rows, table.cells, table.bold):
        shown = [f"<td><b>{esc(c)}</b></td>" if b and c else f"<td>{esc(c)}</td>" for c, b in zip(cells, bold)]
        body.append("<tr>" + "".join(f"<th>{esc(x)}</th>" for x in labels) + "".join(shown) + "</tr>")
    notes = "".join(f"<p>{esc(n)}</p>" for n in table.notes)
    return ("<!DOCTYPE html><html><head><meta charset='utf-8'><title>" + esc(table.title) + "</title><style>"
            "body{font-family:sans-serif;font-size:13px} table{border-collapse:collapse}"
            "td,th{border:1px solid #bbb;padding:2px 6px;text-align:" + ("right" if table.numeric else "left")
            + "} th{background:#f3f3f3}"
            "</style></head><body><h3>" + esc(table.title) + "</h3><table class='"
            + ("numeric" if table.numeric else "text") + "'>" + "".join(head) + "".join(body)
            + "</table>" + notes + "</body></html>\n")


def save_table(table: Table, csv_path, md_path, tex_path, html_path=None) -> None:
    outputs.save_csv(table.data, csv_path)
    outputs.write_text(md_path, to_markdown(table))
    outputs.write_text(tex_path, to_latex(table))
    if html_path is not None:
        outputs.write_text(html_path, to_html(table))
