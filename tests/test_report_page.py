"""The pieces of results/report.html on hand-made inputs (no sweep): Table 2's cells, the
findings' wording, how product files are grouped and shown. The page as a whole is checked
in a browser by tests/test_reports_browser.py."""
from __future__ import annotations

import re

import numpy as np
import pandas as pd

from metrics.findings import Findings
from workflow import report_findings, report_products, report_table2
from workflow.products import registry


def _iqm(rows):
    return pd.DataFrame(rows, columns=["algo", "phase", "metric", "iqm", "ci_low", "ci_high"])


def _tiers(rows):
    return pd.DataFrame(rows, columns=["algo", "phase", "tier", "p_tier0", "p_tier1", "p_tier2", "p_tier3", "p_tier4"])


def _cells(table_html: str) -> list[list[str]]:
    rows = re.findall(r"<tr><th>(.*?)</th>(.*?)</tr>", table_html.split("<tbody>")[1])
    def text(cell: str) -> str:
        return " ".join(re.sub(r"<[^>]+>", " ", cell).split())

    return [[label] + [text(c) for c in re.findall(r"<td[^>]*>(.*?)</td>", cells)] for label, cells in rows]


def test_table2_cells_hold_iqm_ci_and_tier_and_leave_missing_values_empty():
    iqm = _iqm([("ppo", "train", "V", 0.5, 0.4, 0.6), ("ppo", "train", "Dnorm", -0.004, -0.1, 0.2),
                ("ppo", "train", "Dnorm_plus", np.nan, np.nan, np.nan),
                ("ppo_lag", "train", "V", 0.25, 0.2, 0.3), ("ppo_lag", "train", "Dnorm", -0.3, -0.4, -0.2),
                ("ppo_lag", "train", "Dnorm_plus", 0.0, 0.0, 0.0)])
    tiers = _tiers([("ppo", "train", 2, 0, 0, 0.8, 0.2, 0), ("ppo_lag", "train", 4, 0, 0, 0, 0.1, 0.9)])
    table = report_table2.headline_table(iqm, tiers, baseline="ppo")
    assert "NaN" not in table and "nan" not in table
    assert _cells(table) == [
        # Dnorm -0.004 shows as 0.00 (never -0.00); a NaN IQM is an empty cell
        ["PPO", "0.50 [0.40, 0.60]", "0.00 [-0.10, 0.20]", "", "2 Moderate P = 0.80"],
        ["PPO-Lag", "0.25 [0.20, 0.30]", "-0.30 [-0.40, -0.20]", "0.00 [0.00, 0.00]", "4 Strict P = 0.90"],
    ]
    # the tier cell is on its tier's colour; the baseline is never bold, the best other value is
    assert "background:#3f007d" in table and "<b>0.25</b>" in table and "<b>0.50</b>" not in table


def test_table2_has_a_column_group_per_phase_and_empty_cells_for_a_phase_an_algorithm_lacks():
    iqm = _iqm([(a, p, m, 0.1, 0.0, 0.2) for a in ("ppo", "focops") for p in ("train", "final_greedy")
                for m in ("V", "Dnorm", "Dnorm_plus") if not (a == "focops" and p == "final_greedy")])
    tiers = _tiers([(a, p, 1, 0, 1, 0, 0, 0) for a in ("ppo", "focops") for p in ("train", "final_greedy")
                    if not (a == "focops" and p == "final_greedy")])
    table = report_table2.headline_table(iqm, tiers)
    assert re.findall(r"class='phase'>([^<]+)<", table) == ["Training (with noise)", "Final, greedy"]
    ppo, focops = _cells(table)
    assert ppo[0] == "PPO" and focops[0] == "FOCOPS"
    assert focops[5:] == ["", "", "", ""] and all(ppo[1:])


def test_findings_verdicts_use_labels_and_say_which_hold():
    found = Findings(
        tiers=pd.DataFrame([{"algo": "ppo_lag", "train_tier": 2, "greedy_tier": 1, "p_train": 1.0, "p_greedy": 0.6,
                             "p_holds": 0.3, "holds": False}]),
        noise=pd.DataFrame([{"algo": "ppo_lag", "metric": "V", "n_conditions": 4, "n_at_most": 4, "n_tied": 0,
                             "share": 1.0, "ci_low": 0.75, "ci_high": 1.0, "verdict": "holds"},
                            {"algo": "p3o", "metric": "V", "n_conditions": 4, "n_at_most": 2, "n_tied": 0,
                             "share": 0.5, "ci_low": 0.25, "ci_high": 0.75, "verdict": "undecided"}]),
        gaps=pd.DataFrame(columns=["algo", "task", "metric", "gap"]),
        thresholds=pd.DataFrame([{"algo": "focops", "phase": "final_greedy", "threshold": "moderate.V",
                                  "configured": 0.5, "moved_to": 0.45, "iqm": 0.48, "tier": 2, "moved_tier": 1}]),
        margin=0.05)
    page = report_findings.verdict_list(found) + report_findings.evidence(found)
    items = re.findall(r"<li>(.*?)</li>", page)
    assert len(items) == 3
    assert "verdict no'>fails" in items[0] and "PPO-Lag 2 Moderate → 1 Minimal" in items[0]
    assert "verdict mixed'>mixed" in items[1] and "PPO-Lag holds" in items[1] and "P3O undecided" in items[1]
    assert "verdict yes'>holds" in items[2] and "FOCOPS final, greedy (moderate.V)" in items[2]
    assert not re.search(r"\b(ppo_lag|p3o|focops)\b", page)
    assert "NaN" not in page and "<p>none</p>" in page  # the empty gaps table says so


def test_product_files_group_into_one_item_per_product_and_task(tmp_path):
    paths = [f"results/tables/tableA_task_{t}.{ext}" for t in ("goal", "push_hard") for ext in ("csv", "md", "html")]
    paths += ["results/figures/figure2.pdf", "results/figures/figure2.png", "results/tables/extra.csv"]
    items = report_products.collect(paths)
    got = [(i.product.name if i.product else None, i.wildcards, sorted(i.files)) for i in items]
    assert got == [("tableA_task", {"task": "goal"}, ["csv", "html", "md"]),
                   ("tableA_task", {"task": "push_hard"}, ["csv", "html", "md"]),
                   ("figure2", {}, ["pdf", "png"]), (None, {}, ["csv"])]


def test_a_figure_shows_at_its_print_size_and_its_caption_is_rendered(tmp_path):
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig = plt.figure(figsize=(5.0, 2.0))
    png = tmp_path / "figure2.png"
    fig.savefig(png, dpi=150)
    plt.close(fig)
    assert report_products.png_print_width(png) == 480  # 5 in at 96 px per inch, whatever the dpi
    pdf = tmp_path / "figure2.pdf"
    pdf.write_bytes(b"%PDF-")
    item = report_products.Item(registry.by_name()["figure2"], {}, {"pdf": str(pdf), "png": str(png)})
    from workflow.products import settings

    shown = report_products.item_html(item, str(tmp_path), settings.resolve({"cdf_xmax": {"figure2": 3}}))
    assert "style='width:480px'" in shown and "href='figure2.pdf'" in shown and "href='figure2.png'" not in shown
    assert ">Figure 2: how far episode costs fall above or below the bound</h3>" in shown
    assert "the x axis cut at 3" in shown and "{{" not in shown and "**" not in shown
