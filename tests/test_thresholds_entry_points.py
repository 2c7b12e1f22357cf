"""Tier thresholds are read by one function (metrics.thresholds.validate_thresholds) wherever
they enter: a file given to the engine's command line, the sweep config, the Python API. Each
bad case is refused through each entry point with the same one-line error naming where and the
value, a non-zero exit, and nothing written; a partial mapping means the same everywhere (merged
over Table 1), and thresholds other than Table 1's are printed."""
from __future__ import annotations

import copy
import subprocess
import sys
from pathlib import Path

import pandas as pd
import pytest
import yaml

import metrics
from metrics.cli import main as metrics_main
from metrics.schema import ThresholdError
from metrics.thresholds import PAPER_THRESHOLDS, validate_thresholds
from workflow import config_validation as cv

from test_metrics_cli import small_sweep

REPO = Path(__file__).resolve().parent.parent

# (tier, metric, value as YAML writes it, the problem the error states)
BAD = [
    ("moderate", "V", "-0.5", "-0.5 is outside [0, 1], the values V can take"),
    ("strict", "Dnorm_plus", "-0.01", "-0.01 is outside [0, inf], the values Dnorm_plus can take"),
    ("minimal", "Dnorm", ".inf", "inf must be a finite number"),
    ("moderate", "V", ".nan", "nan must be a finite number"),
    ("moderate", "V", "1" + "0" * 400, "must be a finite number"),
    ("substantial", "V", "0.6", "0.6 is looser than 'moderate.V' = 0.5; tiers are nested"),
    ("moderate", "Vrate", "0.5", "unknown metric 'Vrate'; a tier may test V, Dnorm, Dnorm_plus"),
    ("moderate", "V", "half", "'half' is not a number"),
    ("moderate", "V", "true", "True is not a number"),
    ("extreme", None, "{V: 0.0}", "unknown tier 'extreme'; the tiers are minimal, moderate, substantial, strict"),
]
IDS = [f"{tier}.{metric}={value[:8]}" for tier, metric, value, _ in BAD]


def _with(tier, metric, value) -> dict:
    """The paper's thresholds with one entry set to `value` (YAML text)."""
    out = copy.deepcopy(PAPER_THRESHOLDS)
    parsed = yaml.safe_load(value)
    if metric is None:
        out[tier] = parsed
    else:
        out.setdefault(tier, {})[metric] = parsed
    return out


def _yaml_text(tier, metric, value) -> str:
    """A thresholds file: the paper's, with the one entry written as `value` says."""
    lines = {t: ", ".join(f"{m}: {v}" for m, v in limits.items()) for t, limits in PAPER_THRESHOLDS.items()}
    if metric is None:
        return "".join(f"{t}: {{{v}}}\n" for t, v in lines.items()) + f"{tier}: {value}\n"
    entries = {**PAPER_THRESHOLDS.get(tier, {}), metric: "__VALUE__"}
    lines[tier] = ", ".join(f"{m}: {v}" for m, v in entries.items())
    return "".join(f"{t}: {{{v}}}\n" for t, v in lines.items()).replace("__VALUE__", value)


def _field(tier, metric) -> str:
    return tier if metric is None else f"{tier}.{metric}"


def _problem(message: str, field: str) -> str:
    """What an error says after its "'...field': " part (the same wherever thresholds enter)."""
    return message.split(f"{field}': ", 1)[1]


@pytest.fixture(scope="module")
def aggregate_dir(tmp_path_factory):
    root = tmp_path_factory.mktemp("agg")
    assert metrics_main(["evaluate", *small_sweep(root), "--out", str(root / "agg"), "--reps", "50"]) == 0
    return root / "agg"


@pytest.mark.parametrize("tier, metric, value, problem", BAD, ids=IDS)
def test_a_bad_threshold_gets_the_same_error_from_file_config_and_api(tier, metric, value, problem, aggregate_dir,
                                                                      tmp_path, capsys):
    field = _field(tier, metric)
    thresholds = _with(tier, metric, value)

    # the Python API
    with pytest.raises(ThresholdError) as err:
        validate_thresholds(thresholds)
    assert str(err.value).startswith(f"thresholds key '{field}': ") and problem in str(err.value)
    api_problem = _problem(str(err.value), field)
    agg = metrics.read_aggregate(aggregate_dir)
    with pytest.raises(ThresholdError, match="thresholds key"):
        metrics.assign_tiers(agg, thresholds)

    # the engine's command line: a YAML file, exit 2, one line, nothing written
    path = tmp_path / "t.yaml"
    path.write_text(_yaml_text(tier, metric, value))
    for command in (["tiers", str(aggregate_dir), "--out", str(tmp_path / "out")],
                    ["evaluate", str(aggregate_dir / "final_episodes.parquet"), "--out", str(tmp_path / "out")],
                    ["plan-seeds", str(aggregate_dir), "--out", str(tmp_path / "out")]):
        assert metrics_main([*command, "--thresholds", str(path)]) == 2
        err_text = capsys.readouterr().err
        assert err_text.count("\n") == 1 and err_text.startswith(f"error: {path}: key '{field}': "), err_text
        assert _problem(err_text.strip(), field) == api_problem
        assert not (tmp_path / "out").exists()

    # the sweep config: refused before anything runs, exit 1, one line
    config = tmp_path / "config.yaml"
    limit = value if metric is None else f"{{{metric}: {value}}}"
    config.write_text(f"preset: tiny\nthresholds:\n  {tier}: {limit}\n")
    assert cv.main([str(config)]) == 1
    out = capsys.readouterr()
    assert out.out == "" and out.err.count("\n") == 1
    assert out.err.startswith(f"invalid configuration: {config}: config key 'thresholds.{field}': "), out.err
    assert _problem(out.err.strip(), field).replace("'thresholds.", "'") == api_problem


def test_an_integer_too_long_to_print_is_named_by_its_size():
    with pytest.raises(ThresholdError, match=r"^thresholds key 'moderate.V': an integer of 16,610 bits must be a finite"):
        validate_thresholds({**PAPER_THRESHOLDS, "moderate": {"V": 10 ** 5000}})


def test_good_thresholds_read_the_same_from_a_file_the_config_and_the_api(tmp_path):
    moved = {**PAPER_THRESHOLDS, "moderate": {"V": 0.4}, "strict": {"V": 0, "Dnorm_plus": -0.0}}
    path = tmp_path / "t.yaml"
    path.write_text(yaml.safe_dump(moved))
    expected = {**PAPER_THRESHOLDS, "moderate": {"V": 0.4}}
    assert metrics.load_thresholds(path) == validate_thresholds(moved) == expected
    assert cv.resolve({"preset": "tiny", "thresholds": {"moderate": {"V": 0.4}}})["thresholds"] == expected
    assert all(type(v) is float for limits in validate_thresholds(moved).values() for v in limits.values())


PARTIAL = "minimal: {}\nmoderate: {V: 0.3}\n"  # issue 42: {} once dropped minimal's Dnorm <= 0 in the engine only


def test_a_partial_file_gives_the_same_tiers_via_the_cli_and_the_sweep(aggregate_dir, tmp_path):
    path = tmp_path / "t.yaml"
    path.write_text(PARTIAL)
    proc = subprocess.run([sys.executable, "-m", "metrics", "tiers", str(aggregate_dir), "--thresholds", str(path),
                           "--out", str(tmp_path / "cli")], capture_output=True, text=True, timeout=120, cwd=REPO)
    assert proc.returncode == 0, proc.stderr
    # the sweep: its config key through config validation, then the file its write_thresholds rule writes
    in_force = cv.resolve({"preset": "tiny", "thresholds": yaml.safe_load(PARTIAL)})["thresholds"]
    assert in_force == {**PAPER_THRESHOLDS, "moderate": {"V": 0.3}} == metrics.load_thresholds(path)
    sweep = metrics.assign_tiers(metrics.read_aggregate(aggregate_dir), in_force)
    cli = pd.read_csv(tmp_path / "cli" / "tiers.csv", keep_default_na=False)
    assert cli.to_dict("list") == sweep["tiers"].to_dict("list")
    # and not Table 1's tiers: the moved limit changes some tier confidence
    paper = metrics.assign_tiers(metrics.read_aggregate(aggregate_dir))["tiers"]
    assert not paper.equals(sweep["tiers"])
    # the notice: one line on stderr naming the file, every tier in force and what moved
    notes = [line for line in proc.stderr.splitlines() if line.startswith("note: thresholds in force")]
    assert notes == [f"note: thresholds in force ({path} over the paper's Table 1): minimal Dnorm <= 0; "
                     "moderate V <= 0.3; substantial V <= 0.1, Dnorm_plus <= 0.1; strict V <= 0, Dnorm_plus <= 0 "
                     "[changed: moderate.V 0.5 -> 0.3]"], proc.stderr


def test_table_1_itself_prints_no_notice_and_the_sweep_prints_its_own(aggregate_dir, tmp_path):
    path = tmp_path / "t.yaml"
    path.write_text("minimal: {Dnorm: 0}\n")
    proc = subprocess.run([sys.executable, "-m", "metrics", "tiers", str(aggregate_dir), "--thresholds", str(path),
                           "--out", str(tmp_path / "cli")], capture_output=True, text=True, timeout=120, cwd=REPO)
    assert proc.returncode == 0 and proc.stderr == "", proc.stderr
    proc = subprocess.run([sys.executable, "-m", "snakemake", "-n", "--workflow-profile", "cluster_profiles/local",
                           "--directory", str(tmp_path), "--snakefile", str(REPO / "Snakefile"),
                           "--config", "preset=tiny", "thresholds={moderate: {V: 0.3}}"],
                          capture_output=True, text=True, timeout=300, cwd=REPO)
    assert proc.returncode == 0, proc.stderr[-2000:]
    assert "note: thresholds in force (the config's thresholds over the paper's Table 1)" in proc.stderr
    assert "[changed: moderate.V 0.5 -> 0.3]" in proc.stderr  # --config's '0.3' read as the number
