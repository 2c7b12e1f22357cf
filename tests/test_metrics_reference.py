"""Reference results and `compare` (metrics/reference.py): a sweep compared with a reference
made from itself lies inside everywhere with equal tiers; one shifted by a known amount is flagged."""
import json
import os
import re

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
    from workflow.products.catalog import figure_reference as figure_module
    from workflow.products.reference_view import NO_REFERENCE

    drawn, save = [], figure_module.save_figure
    monkeypatch.setattr(figure_module, "save_figure", lambda fig, paths, s: (drawn.append(fig), save(fig, paths, s)))
    assert figure.build(none, [str(tmp_path / "g.pdf"), str(tmp_path / "g.png")], settings.resolve(None), {}) is None
    assert (tmp_path / "g.png").read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    # the figure says there is no reference (and draws no sweep numbers as if compared)
    texts = [t.get_text() for ax in drawn[0].axes for t in ax.texts]
    assert texts == [NO_REFERENCE.replace("; ", ";\n")]

    # the paper preset's: the paper's reference, the sweep's Dnorm+ recomputed by its definition, the grids told apart
    monkeypatch.setattr(reference, "SHIPPED", reference.Path(reference.__file__).parent / "references")
    folder = results / "metrics"
    from metrics.aggregate import META_FILE, OUTPUT_FILES

    stage_2 = {name: str(folder / f) for name, f in dict(OUTPUT_FILES, aggregate=META_FILE).items()}  # as common.smk
    paper = table.inputs(SweepFiles(aggregate=stage_2, tiers=files.tiers, thresholds="", runs=lambda *a: [],
                                    preset="paper"), {})
    assert paper["reference"].endswith("paper.yaml") and paper["run_metrics"] == str(folder / "run_metrics.parquet")
    table.build(paper, out, settings.resolve(None), {})
    notes = open(out["md"]).read()
    assert "the sweep's Dnorm+ and tiers are recomputed by 'saferleval'" in notes
    assert "the task x bound grids differ" in notes


def test_every_shipped_reference_loads_and_names_a_preset_and_the_command_that_made_it():
    from workflow import config_validation as cv

    shipped = sorted(reference.SHIPPED.glob("*.yaml"))
    assert {p.stem for p in shipped} >= {"default", "paper"}
    for path in shipped:
        ref = reference.load_reference(path.stem)
        assert ref["name"] == path.stem
        if "transcribed_from" in ref["made_with"]:  # published values: no command makes them, and it says so
            assert ref["command"].startswith("none: transcribed")
        else:
            assert f"--name {path.stem}" in ref["command"]
        preset = cv.resolve({"preset": path.stem})
        assert set(ref["iqm"]["algo"]) == set(preset["algos"])  # values for every swept algorithm
        assert ref["made_with"]["n_runs"] == len(preset["specs"])


def _copy_results(results, dest, rename=None):
    """The sweep's results folder again, algorithms renamed as `rename` says."""
    import shutil

    shutil.copytree(results / "metrics", dest)
    for name in ("iqm.csv", "tiers.csv"):
        frame = pd.read_csv(dest / name)
        frame["algo"] = frame["algo"].replace(rename or {})
        frame.to_csv(dest / name, index=False)
    return dest


def test_compare_prints_tiers_as_integers_and_what_it_wrote(results, tmp_path, capsys):
    path = _made(results, tmp_path)
    assert f"wrote {path}" in capsys.readouterr().out  # `reference` says so too
    out_csv = tmp_path / "comparison.csv"
    assert main(["compare", str(results / "metrics"), str(path), "--out", str(out_csv)]) == 0
    out = capsys.readouterr().out
    tiers = pd.read_csv(results / "metrics" / "tiers.csv")
    row = tiers.iloc[0]
    # "focops  train  0  1.00  0  True": whole tiers, P(tier) with two decimals
    shown = rf"\n\s*{row['algo']}\s+{row['phase']}\s+{int(row['tier'])}\s+\d\.\d\d\s+{int(row['tier'])}\s+True\n"
    assert re.search(shown, out), out
    assert not re.search(r"\s\d\.00\s+\d\.\d\d\s+\d\.00\s", out)
    assert out.rstrip().endswith(f"wrote {out_csv}")


def test_compare_names_the_closest_algorithm_names_and_fails_when_nothing_overlaps(results, tmp_path, capsys):
    ref = _made(results, tmp_path)
    capsys.readouterr()
    renamed = _copy_results(results, tmp_path / "renamed", {"ppo": "PPO", "ppo_lag": "PPOLag", "p3o": "P3O",
                                                            "focops": "FOCOPS"})
    assert main(["compare", str(renamed), str(ref), "--out", str(tmp_path / "c.csv")]) == 2
    got = capsys.readouterr()
    assert got.out == "" and not (tmp_path / "c.csv").exists()
    assert got.err.count("\n") == 1 and got.err.startswith(
        f"error: {renamed}: nothing to compare with reference 'mine' ({ref}): no value or tier of it can be "
        "compared with the sweep's; algorithm names differ: only in reference 'mine': ")
    assert "ppo_lag (closest in the sweep: PPOLag" in got.err and "focops (closest in the sweep: FOCOPS)" in got.err
    assert "only in the sweep: FOCOPS (closest in the reference: focops)" in got.err

    # one name differs: compared, with a warning naming it
    one = _copy_results(results, tmp_path / "one", {"ppo_lag": "PPO-Lagrangian"})
    assert main(["compare", str(one), str(ref)]) == 0
    got = capsys.readouterr()
    assert ("warning: algorithm names differ: only in reference 'mine': ppo_lag (closest in the sweep: "
            "PPO-Lagrangian); only in the sweep: PPO-Lagrangian (closest in the reference: ppo_lag)") in got.err
    assert "45 of 45 reference values of 'mine' lie inside the sweep's 95 % CI; 15 are not in the sweep" in got.out


def test_compare_says_when_the_task_bound_grids_differ(results, tmp_path, capsys):
    # the synthetic sweep (goal, circle x 15, 25) against the default preset's reference
    assert main(["compare", str(results / "metrics"), "default"]) == 0
    err = capsys.readouterr().err
    assert ("warning: the task x bound grids differ, so the IQMs average different conditions: the sweep has "
            "tasks circle, goal and bounds 15, 25; reference 'default' has tasks button, circle, goal, push and "
            "bounds 3.75, 6.25, 12.5") in err
    assert main(["compare", str(results / "metrics"), str(_made(results, tmp_path))]) == 0
    assert "grids differ" not in capsys.readouterr().err


def test_compare_readme_example_against_default_is_an_error_naming_the_names(tmp_path, capsys):
    out = tmp_path / "example-out"
    assert main(["evaluate", "docs/examples/episodes_other_framework.csv", "--out", str(out), "--reps", "50"]) == 0
    capsys.readouterr()
    assert main(["compare", str(out), "default"]) == 2
    err = capsys.readouterr().err
    assert err.startswith(f"error: {out}: nothing to compare with reference 'default'") and err.count("\n") == 1
    assert "ppo_lag (closest in the sweep: PPOLag)" in err and "only in the sweep: CPO (closest in the reference: " in err
    assert "the sweep has tasks SafetyCarButton1, SafetyPointGoal1 and bounds 25, 50" in err


def test_compare_recomputes_dnorm_plus_by_the_references_definition(results, tmp_path, capsys):
    summary = metrics.read_summaries(sorted(str(p) for p in (results / "runs").rglob("summary.parquet")))
    suite = tmp_path / "suite"
    metrics.write_aggregate(metrics.aggregate(summary, reps=300, seed=0, dnorm_plus="saferleval"), suite)
    metrics.tiers(suite)
    keys = ["algo", "phase", "metric"]
    ours = pd.read_csv(results / "metrics" / "iqm.csv").set_index(keys)
    theirs = pd.read_csv(suite / "iqm.csv").set_index(keys)
    plus = theirs.index.get_level_values("metric") == "Dnorm_plus"
    assert (ours.loc[plus, "iqm"] != theirs.loc[plus, "iqm"]).any()  # the definitions differ on this sweep

    # the eq. 5/6 sweep against a reference by the suite's definition: recomputed, the same as the suite's
    made = tmp_path / "suite.yaml"
    assert main(["reference", str(suite), "--out", str(made), "--name", "suite"]) == 0
    ref = reference.load_reference(made)
    assert ref["made_with"]["dnorm_plus"] == "saferleval"
    sweep, done = reference.matching_definition(reference.read_sweep(results / "metrics"), ref)
    assert done == [f"the sweep's Dnorm+ follows 'paper', the reference's 'saferleval': the sweep's Dnorm+ and tiers "
                    f"are recomputed by 'saferleval' from its run_metrics.parquet and iterates.parquet "
                    f"(thresholds: the paper's Table 1)"]
    got = sweep.iqm.set_index(keys).loc[theirs.index]
    assert (got[["iqm", "ci_low", "ci_high"]] == theirs[["iqm", "ci_low", "ci_high"]]).all().all()  # bit for bit
    assert sweep.tiers.equals(pd.read_csv(suite / "tiers.csv"))
    capsys.readouterr()
    assert main(["compare", str(results / "metrics"), str(made)]) == 0
    got = capsys.readouterr()
    assert "60 of 60 reference values of 'suite' lie inside" in got.out and "recomputed by 'saferleval'" in got.err

    # and back: the suite's folder against an eq. 5/6 reference gives the eq. 5/6 values
    back, _ = reference.matching_definition(reference.read_sweep(suite), reference.load_reference(_made(results, tmp_path)))
    again = back.iqm.set_index(keys).loc[ours.index]
    assert ((again["iqm"] - ours["iqm"]).abs() < 1e-12).all()

    # without the stage-2 files to recompute from, Dnorm+ is not compared, and that is said
    bare = tmp_path / "bare"
    bare.mkdir()
    for name in ("iqm.csv", "tiers.csv", "aggregate.json"):
        (bare / name).write_bytes((results / "metrics" / name).read_bytes())
    assert main(["compare", str(bare), str(made)]) == 0
    got = capsys.readouterr()
    assert ("the sweep's Dnorm+ follows 'paper', the reference's 'saferleval', and "
            f"{bare} lacks run_metrics.parquet, iterates.parquet, final_episodes.parquet to recompute it") in got.err
    assert "12 are not comparable" in got.out


def test_hand_typed_references_are_checked(results, tmp_path, capsys):
    head = "format: saferl-eval reference\nversion: 1\nname: x\nsource: y\n"
    cases = {
        "tiers:\n  - {algo: a, phase: train, tier: 2.5}\n": "bad.yaml: tiers[0].tier must be one of 0..4, got 2.5",
        "iqm:\n  - {algo: a, phase: train, metric: V, iqm: 0.1, ci_low: 0.0}\n":
            "bad.yaml: iqm[0] gives only one of ci_low, ci_high",
        "iqm:\n  - {algo: a, phase: train, metric: V, iqm: 0.1, ci_low: 0.2, ci_high: 0.1}\n":
            "bad.yaml: iqm[0].ci_low 0.2 exceeds ci_high 0.1",
        "iqm:\n  - {algo: a, phase: train, metric: V, iqm: 0.1}\n  - {algo: a, phase: train, metric: V, iqm: 0.2}\n":
            "bad.yaml: iqm[1] repeats an earlier entry's algo, phase, metric ('a', 'train', 'V')",
        "made_with: {dnorm_plus: suite}\ntiers:\n  - {algo: a, phase: train, tier: 2}\n":
            "bad.yaml: made_with.dnorm_plus is 'suite', not one of paper, saferleval",
        "grid: {tasks: [goal], bounds: [0]}\ntiers:\n  - {algo: a, phase: train, tier: 2}\n":
            "bad.yaml: grid.bounds must be a list of positive numbers, got [0]",
        "conditions:\n  - {task: goal, bound: 15, algo: a, phase: train, V_mean: high}\ntiers:\n  - {algo: a, phase: train, tier: 2}\n":
            "bad.yaml: conditions[0].V_mean must be a number, got 'high'",
    }
    bad = tmp_path / "bad.yaml"
    for body, message in cases.items():
        bad.write_text(head + body)
        assert main(["compare", str(results / "metrics"), str(bad)]) == 2
        assert message in capsys.readouterr().err, body
