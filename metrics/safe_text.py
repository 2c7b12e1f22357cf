"""Names (task, algo, ...) as given by a user's episode tables, made safe for the formats the
engine writes them into (docs/metrics.md, "Names in CSV and Markdown outputs").

- CSV: a cell starting with =, +, -, @, a tab or a carriage return is a formula to a
  spreadsheet; the usual rule (OWASP's "CSV injection") prefixes it with a single quote. Only
  the name columns: numeric columns (a negative Dnorm) are never touched.
- Markdown: a name is one table cell: what would end the cell or start markup or raw HTML is
  escaped with a backslash, line breaks become spaces.
"""
from __future__ import annotations

import re

import pandas as pd

NAME_COLUMNS = ("task", "algo", "phase", "metric")
_FORMULA_START = ("=", "+", "-", "@", "\t", "\r")
# what can start markup inside a table cell: a bar ends the cell, < starts raw HTML, & an entity;
# _ only at a word's edge (inside a word, as in ppo_lag, it is never emphasis)
_MARKDOWN_SPECIAL = re.compile(r"([\\`*\[\]<>|~&]|(?<![A-Za-z0-9])_|_(?![A-Za-z0-9]))")


def csv_cell(value):
    """A text value a spreadsheet reads as text: a leading formula character gets a single quote."""
    if isinstance(value, str) and value.startswith(_FORMULA_START):
        return "'" + value
    return value


def csv_safe(df: pd.DataFrame, columns=NAME_COLUMNS) -> pd.DataFrame:
    """`df` with its text name columns passed through `csv_cell` (a copy when any changes)."""
    names = [c for c in columns if c in df.columns and not pd.api.types.is_numeric_dtype(df[c])]
    risky = [c for c in names if df[c].map(lambda v: csv_cell(v) is not v).any()]
    if not risky:
        return df
    out = df.copy()
    for c in risky:
        out[c] = out[c].map(csv_cell)
    return out


def markdown_cell(value) -> str:
    """A value as the text of one Markdown table cell: shown as written, never as markup."""
    text = " ".join(str(value).splitlines()) if isinstance(value, str) else str(value)
    return _MARKDOWN_SPECIAL.sub(r"\\\1", text.replace("\0", ""))
