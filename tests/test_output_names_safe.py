"""Names from a user's episode tables are written safely for each output format: a CSV name
cell that a spreadsheet would run as a formula gets a leading quote (numbers never do),
needed.md escapes Markdown, the report escapes HTML."""
from __future__ import annotations

import csv

import numpy as np
import pandas as pd
import pytest

from metrics.cli import main
from metrics.safe_text import csv_cell, csv_safe, markdown_cell
from workflow import report

from test_metrics_episodes import episodes, write

FORMULA = '=HYPERLINK("http://x.example","click")'
ALGOS = (FORMULA, "-2+3", "a|b <script>x</script> *c*")


def sweep(tmp_path, algos=ALGOS, tasks=("+task", "@task")):
    rng = np.random.default_rng(1)
    paths = []
    for i, algo in enumerate(algos):
        for j, task in enumerate(tasks):
            for seed in range(2):
                df = pd.concat([episodes(rng.uniform(0, 20, 4), task=task, algo=algo, seed=seed, phase=p, iteration=0)
                                for p in ("train", "final_explore", "final_greedy")])
                paths.append(write(df, tmp_path / f"a{i}_t{j}_{seed}.parquet"))
    return paths


def rows(path):
    with open(path, newline="") as f:
        return list(csv.DictReader(f))


@pytest.mark.parametrize("value, written", [
    ("=1+1", "'=1+1"), ("+cmd", "'+cmd"), ("-x", "'-x"), ("@SUM(A1)", "'@SUM(A1)"), ("\tx", "\\tx"),
    ("\rx", "\\rx"), ("\x1b[2Jx", "\\x1b[2Jx"), ("-\n", "'-\\n"), ("ppo_lag", "ppo_lag"), ("a=b", "a=b"), ("", ""), (-0.5, -0.5),
])
def test_the_csv_rule_prefixes_a_quote_to_a_formula_start_only(value, written):
    assert csv_cell(value) == written


def test_csv_outputs_quote_formula_names_and_leave_numbers(tmp_path):
    assert main(["evaluate", *sweep(tmp_path), "--out", str(tmp_path / "out"), "--reps", "50"]) == 0
    for name in ("iqm.csv", "tiers.csv", "conditions.csv"):
        table = rows(tmp_path / "out" / name)
        assert {r["algo"] for r in table} == {"'" + FORMULA, "'-2+3", ALGOS[2]}, name
        if "task" in table[0]:
            assert {r["task"] for r in table} == {"'+task", "'@task"}
    iqm = rows(tmp_path / "out" / "iqm.csv")
    dnorm = [r["iqm"] for r in iqm if r["metric"] == "Dnorm"]
    assert any(v.startswith("-") for v in dnorm)  # a negative number is written as a number
    # the Parquet tables keep the names as given (they are data, not a spreadsheet)
    assert set(pd.read_parquet(tmp_path / "out" / "run_metrics.parquet")["algo"]) == set(ALGOS)


def test_seed_planning_quotes_csv_names_and_escapes_markdown(tmp_path, capsys):
    assert main(["plan-seeds", *sweep(tmp_path), "--out", str(tmp_path / "plan"), "--k-max", "3",
                 "--reps", "50", "--no-figure"]) == 0
    printed = capsys.readouterr().out
    for name in ("plan.csv", "needed.csv"):
        assert {r["algo"] for r in rows(tmp_path / "plan" / name)} == {"'" + FORMULA, "'-2+3", ALGOS[2]}
    md = (tmp_path / "plan" / "needed.md").read_text()
    assert md == printed
    row = next(line for line in md.splitlines() if line.startswith("| a\\|b"))
    assert row.startswith(r"| a\|b \<script\>x\</script\> \*c\* | ")
    assert row.replace("\\|", "").count("|") == 7  # six cells: the name's bar does not split one
    assert "<script>" not in md


def test_markdown_cells_escape_markup_and_keep_plain_names():
    assert markdown_cell("ppo_lag") == "ppo_lag"
    assert markdown_cell("final_greedy") == "final_greedy"
    assert markdown_cell("_em_ [l](u) `c` ~~s~~ &amp;") == r"\_em\_ \[l\](u) \`c\` \~\~s\~\~ \&amp;"
    assert markdown_cell("two\nlines") == "two lines"


def test_csv_safe_leaves_a_clean_frame_untouched():
    df = pd.DataFrame({"algo": ["ppo", "cpo"], "iqm": [-1.0, 2.0]})
    assert csv_safe(df) is df


def test_the_report_escapes_html_in_names(tmp_path):
    names = ["<script>alert(1)</script>", "<img src=x onerror=alert(2)>"]
    tiers, iqm = tmp_path / "tiers.csv", tmp_path / "iqm.csv"
    pd.DataFrame({"algo": names, "phase": ["train", "train"], "tier": [0, 1], "p_tier0": [1.0, 0.0],
                  "p_tier1": [0.0, 1.0], "p_tier2": 0.0, "p_tier3": 0.0, "p_tier4": 0.0}).to_csv(tiers, index=False)
    pd.DataFrame({"algo": names, "phase": "train", "metric": "V", "iqm": [0.5, 0.2], "ci_low": [0.4, 0.1],
                  "ci_high": [0.6, 0.3]}).to_csv(iqm, index=False)
    config = {"preset": "<b>p</b>", "backend": "builtin", "tasks": ["t"], "bounds": [1], "algos": ["a"], "seeds": [0]}
    page = report.render(config, str(iqm), str(tiers), str(tiers), [], str(tmp_path))
    assert "<script>" not in page and "<img" not in page and "<b>p</b>" not in page
    assert "&lt;script&gt;alert(1)&lt;/script&gt;" in page and "&lt;img src=x onerror=alert(2)&gt;" in page


HOSTILE = ("a,b", 'say "hi"', "red\x1b[31m\x07", "two\nlines", "<b>bold</b>|x")
SHOWN = ("a,b", 'say "hi"', "red\\x1b[31m\\x07", "two\\nlines", "<b>bold</b>|x")  # as a CSV reader gets them


def test_control_characters_commas_quotes_and_html_in_names_are_written_visibly(tmp_path):
    """A name with a terminal escape, a bell, a line break, a comma, quotes or HTML: the CSV
    outputs hold one row per name, no control byte, and read back as the visible name."""
    assert main(["evaluate", *sweep(tmp_path, algos=HOSTILE, tasks=("t\x00x",)), "--out", str(tmp_path / "out"),
                 "--reps", "50"]) == 0
    for name in ("iqm.csv", "tiers.csv", "conditions.csv"):
        raw = (tmp_path / "out" / name).read_bytes()
        assert not any(b < 0x20 and b != 0x0A or b == 0x7F for b in raw), name  # only the rows' own line ends
        table = rows(tmp_path / "out" / name)
        assert {r["algo"] for r in table} == set(SHOWN), name
        assert raw.count(b"\n") == len(table) + 1  # a name's line break does not split its row
        if "task" in table[0]:
            assert {r["task"] for r in table} == {"t\\x00x"}


def test_product_tables_escape_names_in_markdown_html_and_csv(tmp_path):
    from workflow.products import tablefmt

    table = tablefmt.Table(title="T", row_header=["Algorithm"], rows=[[n] for n in HOSTILE],
                           columns=[("", "t\x1bx <i>")], cells=[["0.5"]] * len(HOSTILE), bold=[[False]] * len(HOSTILE),
                           data=pd.DataFrame({"algo": list(HOSTILE), "iqm": [0.5] * len(HOSTILE)}))
    md = tablefmt.to_markdown(table)
    assert "\x1b" not in md and "\x07" not in md and "<b>" not in md and "<i>" not in md
    body = [line for line in md.splitlines() if line.startswith("| ") and "0.5" in line]
    assert len(body) == len(HOSTILE)  # the line break stays inside its row
    assert all(line.replace("\\|", "").count("|") == 3 for line in body)  # two cells each: no bar splits one
    assert r"| red\\x1b\[31m\\x07 | 0.5 |" in md
    page = tablefmt.to_html(table)
    assert "\x1b" not in page and "<b>bold" not in page and "&lt;b&gt;bold&lt;/b&gt;|x" in page
    assert "red\\x1b[31m\\x07" in page and "t\\x1bx &lt;i&gt;" in page
    tablefmt.save_table(table, tmp_path / "t.csv", tmp_path / "t.md", tmp_path / "t.tex")
    assert [r["algo"] for r in rows(tmp_path / "t.csv")] == list(SHOWN)
