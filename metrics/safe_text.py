"""Names (task, algo, ...) as given by a user's episode tables, made safe for the formats the
engine writes them into (docs/metrics.md, "Names in CSV and Markdown outputs"), and read back
from CSV exactly as written (`read_csv`).

- CSV: a cell starting with =, +, -, @, a tab or a carriage return is a formula to a
  spreadsheet; the usual rule (OWASP's "CSV injection") prefixes it with a single quote. Only
  the name columns: numeric columns (a negative Dnorm) are never touched.
- Markdown: a name is one table cell: what would end the cell or start markup or raw HTML is
  escaped with a backslash, line breaks become spaces.
- Every format: a control character (an escape sequence that recolours or clears a terminal
  showing the file, a NUL, a line break inside a CSV cell) is written as its visible escape,
  \x1b, \n (`visible`); HTML escapes its specials as well (html.escape).
"""
from __future__ import annotations

import re

import pandas as pd

NAME_COLUMNS = ("task", "algo", "phase", "metric")
# Text columns of the CSV files the project reads: the names above, the estimator, a file
# name, and SafeRLEval's task column. Never a number, so never a missing value either.
TEXT_COLUMNS = NAME_COLUMNS + ("estimator", "source", "env")
# pandas' default missing-value markers (pandas._libs.parsers.STR_NA_VALUES), for the other columns
_NA_MARKERS = ["", "#N/A", "#N/A N/A", "#NA", "-1.#IND", "-1.#QNAN", "-NaN", "-nan", "1.#IND", "1.#QNAN",
               "<NA>", "N/A", "NA", "NULL", "NaN", "None", "n/a", "nan", "null"]
_FORMULA_START = ("=", "+", "-", "@", "\t", "\r")
# what can start markup inside a table cell: a bar ends the cell, < starts raw HTML, & an entity;
# _ only at a word's edge (inside a word, as in ppo_lag, it is never emphasis)
_MARKDOWN_SPECIAL = re.compile(r"([\\`*\[\]<>|~&]|(?<![A-Za-z0-9])_|_(?![A-Za-z0-9]))")


_CONTROL = re.compile(r"[\x00-\x1f\x7f-\x9f]")


def visible(text: str) -> str:
    """`text` with each control character (C0, DEL, C1) written as its escape, \\x1b or \\n."""
    return _CONTROL.sub(lambda m: repr(m.group())[1:-1], text)


def csv_cell(value):
    """A text value a spreadsheet reads as text and a terminal shows as written: control
    characters as escapes (`visible`), a leading formula character gets a single quote."""
    if not isinstance(value, str):
        return value
    value = visible(value)
    if value.startswith(_FORMULA_START):
        return "'" + value
    return value


def csv_safe(df: pd.DataFrame, columns=NAME_COLUMNS) -> pd.DataFrame:
    """`df` with its text name columns passed through `csv_cell` (a copy when any changes)."""
    names = [c for c in columns if c in df.columns and not pd.api.types.is_numeric_dtype(df[c])]
    risky = [c for c in names if df[c].map(lambda v: csv_cell(v) != v).any()]
    if not risky:
        return df
    out = df.copy()
    for c in risky:
        out[c] = out[c].map(csv_cell)
    return out


def read_csv(path, text_columns=TEXT_COLUMNS) -> pd.DataFrame:
    """pd.read_csv, but the text columns are read as text, kept exactly: by default pandas reads
    an algorithm named NA, None, null, nan or N/A (or an empty cell) as missing, and the rows
    of that algorithm then drop out of every group-by without a word. Numeric columns keep
    pandas' missing-value markers (an empty CI bound is NaN)."""
    header = pd.read_csv(path, nrows=0).columns
    text = [c for c in header if c in text_columns]
    return pd.read_csv(path, dtype=dict.fromkeys(text, str), keep_default_na=False,
                       na_values={c: _NA_MARKERS for c in header if c not in text})


def markdown_cell(value) -> str:
    """A value as the text of one Markdown table cell: shown as written, never as markup."""
    text = " ".join(str(value).splitlines()) if isinstance(value, str) else str(value)
    return _MARKDOWN_SPECIAL.sub(r"\\\1", visible(text))
