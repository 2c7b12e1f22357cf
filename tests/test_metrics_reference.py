"""Reference results and `compare` (metrics/reference.py): a sweep compared with a reference
made from itself lies inside everywhere with equal tiers; one shifted by a known amount is flagged."""
import json
import os

import pandas as pd
import pytest
import yaml

import metrics
from metrics import reference
from metrics.cli import main
from workflow.products import synthetic


@pytest.fixture(scope="module")
def results(tmp_path_factory):
    root = tmp_path_factory.mktemp("sweep")
    runs = synthetic.write_sweep(root / "runs", *synthetic.synthetic_sweep(seeds=(0, 1, 2)))
    for r in runs:  # what the trainer records
        with open(os.path.join(r["dir"], "run.json"), "w") as fh:
            json.dump({"code_version": "abc123", "code_versions": ["abc123"]}, fh)
    summary = metrics.read_summaries([os.path.join(r["dir"], "summary.parquet") for r in runs])
    out = root / "metrics"
    metrics.write_aggregate(metrics.aggregate(summary, reps=300, seed=0), out)
    metrics.tiers(out)
    return root


def _made(results, tmp_path, name="mine"):
    path = tmp_path / f"{name}.yaml"
    assert main(["reference", str(results / "metrics"), "--out", str(path), "--name", name,
                 "--runs", str(results / "runs"), "--source", "a synthetic sweep"]) == 0
    return path


def test_reference_is_stamped_and_reads_back(results, tmp_path):
    path = _made(results, tmp_path)
    raw = yaml.safe_load(path.read_text())
    assert raw["made_with"]["code_versions"] == ["abc123"] and raw["made_with"]["reps"] == 300
    assert raw["made_with"]["dnorm_plus"] == "paper" and raw["command"] == (
        f"saferl-eval reference {results / 'metrics'} --name mine --out {tmp_path / 'mine.yaml'} "
        f"--source 'a synthetic sweep' --runs {results / 'runs'}")
    ref = reference.load_reference(path)
    iqm = pd.read_csv(results / "metrics" / "iqm.csv")
    assert len(ref["iqm"]) == len(iqm) and len(ref["conditions"]) == len(pd.read_csv(results / "metrics" / "conditions.csv"))
    merged = ref["iqm"].merge(iqm, on=["algo", "phase", "metric"], suffixes=("", "_csv"))
    assert (merged["iqm"] == merged["iqm_csv"]).all()  # exact through YAML


def test_compare_against_itself_is_inside_everywhere_with_equal_tiers(results, tmp_path):
    ref = reference.load_reference(_made(results, tmp_path))
    got, tiers = reference.compare(*reference.read_results(results / "metrics"), ref)
    assert len(got) == 4 * 3 * 5 and (got["status"] == "inside").all()
    assert len(tiers) == 4 * 3 and tiers["equal"].all()
    assert reference.summary_line(got, tiers, "mine") == (
        "60 of 60 reference values of 'mine' lie inside the sweep's 95 % CI; tiers equal for 12 of 12 (algorithm, phase) pairs.")


def test_compare_flags_a_reference_shifted_by_a_known_amount(results, tmp_path):
    raw = yaml.safe_load(_made(results, tmp_path).read_text())
    iqm = pd.read_csv(results / "metrics" / "iqm.csv")
    width = float((iqm["ci_high"] - iqm["ci_low"]).max())
    for row in raw["iqm"]:
        if row["metric"] == "V":
            row["iqm"] += width + 0.01  # beyond every CI
    for row in raw["tiers"]:
        if row["algo"] == "p3o":
            row["tier"] = (row["tier"] + 1) % 5
    shifted = tmp_path / "shifted.yaml"
    shifted.write_text(yaml.safe_dump(raw))
    got, tiers = reference.compare(*reference.read_results(results / "metrics"), reference.load_reference(shifted))
    assert (got.loc[got["metric"] == "V", "status"] == "outside").all()
    assert (got.loc[got["metric"] != "V", "status"] == "inside").all()
    assert sorted(tiers.loc[~tiers["equal"], "algo"].unique()) == ["p3o"]


def test_compare_command_prints_and_writes(results, tmp_path, capsys):
    path = _made(results, tmp_path)
    assert main(["compare", str(results / "metrics"), str(path), "--out", str(tmp_path / "cmp.csv")]) == 0
    out = capsys.readouterr().out
    assert "reference mine: a synthetic sweep" in out and "60 of 60 reference values" in out
    assert len(pd.read_csv(tmp_path / "cmp.csv")) == 60


def test_bad_references_get_one_line_errors(results, tmp_path, capsys):
    bad = tmp_path / "bad.yaml"
    bad.write_text("format: saferl-eval reference\nversion: 1\nname: x\nsource: y\niqm:\n  - {algo: a, phase: training, metric: V, iqm: 0.1}\n")
    assert main(["compare", str(results / "metrics"), str(bad)]) == 2
    assert "bad.yaml: iqm[0].phase 'training' is not one of train, final_explore, final_greedy" in capsys.readouterr().err
    bad.write_text("format: saferl-eval reference\nversion: 1\nname: x\nsource: y\ntiers:\n  - {algo: a, phase: train, tier: high}\n")
    assert main(["compare", str(results / "metrics"), str(bad)]) == 2
    assert "tiers[0].tier must be a number, got 'high'" in capsys.readouterr().err
    assert main(["compare", str(results / "metrics"), "no-such-reference"]) == 2
    assert "no-such-reference: neither a file nor a shipped reference" in capsys.readouterr().err
    assert main(["compare", str(tmp_path), str(_made(results, tmp_path))]) == 2
    assert "needs iqm.csv and tiers.csv" in capsys.readouterr().err


def test_reference_products_flag_what_is_outside_and_say_when_there_is_none(results, tmp_path, monkeypatch):
    from workflow.products import settings
    from workflow.products.registry import SweepFiles, by_name

    raw = yaml.safe_load(_made(results, tmp_path).read_text())
    raw["iqm"] = [dict(r, iqm=r["iqm"] + 5.0) if (r["algo"], r["metric"]) == ("p3o", "R") else r for r in raw["iqm"]]
    raw["notes"] = ["a caveat"]
    (tmp_path / "refs").mkdir()
    (tmp_path / "refs" / "mypreset.yaml").write_text(yaml.safe_dump(raw))
    monkeypatch.setattr(reference, "SHIPPED", tmp_path / "refs")
    files = SweepFiles(aggregate={"iqm": str(results / "metrics" / "iqm.csv")},
                       tiers={"tiers": str(results / "metrics" / "tiers.csv")}, thresholds="", runs=lambda *a: [],
                       preset="mypreset")
    table, figure = by_name()["table_reference"], by_name()["figure_reference"]
    inputs = table.inputs(files, {})
    assert inputs["reference"] == str(tmp_path / "refs" / "mypreset.yaml")
    out = {ext: str(tmp_path / f"t.{ext}") for ext in ("csv", "md", "tex", "html")}
    shown = table.build(inputs, out, settings.resolve(None), {})
    flagged = [(row, col) for row, flags in zip(shown.rows, shown.bold) for col, f in zip(shown.columns, flags) if f]
    assert sorted({r[1] for r, _ in flagged}) == ["P3O"] and {c for _, c in flagged} == {("R", "reference")}
    assert "Note: a caveat" in open(out["md"]).read()
    got = figure.build(inputs, [str(tmp_path / "f.pdf"), str(tmp_path / "f.png")], settings.resolve(None), {})
    assert (got["status"] == "outside").sum() == 3  # P3O's R in each phase

    none = table.inputs(SweepFiles(aggregate=files.aggregate, tiers=files.tiers, thresholds="", runs=lambda *a: [],
                                   preset="tiny"), {})
    assert "reference" not in none
    shown = table.build(none, out, settings.resolve(None), {})
    assert "No reference is shipped for this sweep's preset" in open(out["md"]).read()
    assert pd.read_csv(out["csv"])["reference"].tolist() == ["none"]  # the report renders the CSV
    figure.build(none, [str(tmp_path / "g.pdf"), str(tmp_path / "g.png")], settings.resolve(None), {})
    assert os.path.getsize(tmp_path / "g.png") > 1000


def test_every_shipped_reference_loads_and_names_a_preset_and_the_command_that_made_it():
    from workflow import config_validation as cv

    shipped = sorted(reference.SHIPPED.glob("*.yaml"))
    assert {p.stem for p in shipped} >= {"default"}
    for path in shipped:
        ref = reference.load_reference(path.stem)
        assert ref["name"] == path.stem and f"--name {path.stem}" in ref["command"]
        preset = cv.resolve({"preset": path.stem})
        assert set(ref["iqm"]["algo"]) == set(preset["algos"])  # values for every swept algorithm
        assert ref["made_with"]["n_runs"] == len(preset["specs"])
