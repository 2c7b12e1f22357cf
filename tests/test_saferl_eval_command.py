"""`saferl-eval` as a user meets it: it names itself as it was invoked (the console script, or
`python -m metrics` in a clone), its --help is plain text that a pip install can follow, and
`evaluate` takes the trainer's run folders as they are."""
from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pandas as pd
import pytest

from fake_runs import complete_run
from metrics import cli
from metrics import episodes as episode_files
from runs import run_layout

REPO = Path(__file__).resolve().parent.parent
SCRIPT = Path(sys.executable).parent / "saferl-eval"


def command(*args: str, cwd=REPO) -> subprocess.CompletedProcess:
    return subprocess.run(list(args), cwd=cwd, capture_output=True, text=True, timeout=300)


def test_the_console_script_names_itself_in_usage_and_errors(tmp_path):
    proc = command(str(SCRIPT), "evaluate", cwd=tmp_path)
    assert proc.returncode == 2
    assert proc.stderr == ("saferl-eval evaluate: error: the following arguments are required: episodes, --out "
                           "(see --help)\n")
    proc = command(str(SCRIPT), "--help", cwd=tmp_path)
    assert proc.returncode == 0 and proc.stdout.startswith("usage: saferl-eval [-h]")
    assert "'saferl-eval COMMAND --help' describes each command" in proc.stdout


def test_python_dash_m_metrics_names_itself_so():
    proc = command(sys.executable, "-m", "metrics", "tiers")
    assert proc.returncode == 2 and proc.stderr.startswith("python -m metrics tiers: error: ")


@pytest.mark.parametrize("argv0, name", [("/venv/bin/saferl-eval", "saferl-eval"),
                                         ("/repo/metrics/__main__.py", "python -m metrics"),
                                         ("saferl-eval-3.11", "saferl-eval-3.11")])
def test_invoked_name(argv0, name):
    assert cli.invoked_name(argv0) == name


def help_pages(prog: str) -> dict[str, str]:
    """The --help text of the command and of each of its subcommands."""
    parser = cli.build_parser(prog)
    (sub,) = [a for a in parser._actions if a.__class__.__name__ == "_SubParsersAction"]
    return {prog: parser.format_help(), **{name: p.format_help() for name, p in sub.choices.items()}}


def test_help_is_plain_text_without_markup_or_paths_an_install_lacks():
    pages = help_pages("saferl-eval")
    assert set(pages) == {"saferl-eval", "summarise", "aggregate", "tiers", "evaluate", "plan-seeds", "compare",
                          "reference", "from-saferleval"}
    for name, text in pages.items():
        for markup in ("`", ":func:", "docs/", "metrics/references", ".md"):
            assert markup not in text, f"{name} --help shows {markup!r}:\n{text}"
    assert "violation rate V" in pages["saferl-eval"] and "python -m" not in pages["saferl-eval"]


def test_evaluate_takes_a_trainers_run_folder_and_a_folder_of_them(tmp_path):
    assert episode_files.TRAINER_EPISODES == run_layout.EPISODES
    runs = tmp_path / "runs"
    for seed, cost in [(0, 10.0), (1, 30.0)]:
        complete_run(runs / "circle" / "d25" / "ppo" / f"seed{seed}", seed=seed, cost=cost)
    assert cli.main(["evaluate", str(runs / "circle" / "d25" / "ppo" / "seed1"), "--out", str(tmp_path / "one"),
                     "--reps", "20"]) == 0
    one = pd.read_parquet(tmp_path / "one" / "run_metrics.parquet")
    assert sorted(set(one["seed"])) == [1]
    assert cli.main(["evaluate", str(runs), "--out", str(tmp_path / "all"), "--reps", "20"]) == 0
    both = pd.read_parquet(tmp_path / "all" / "run_metrics.parquet")
    assert sorted(set(both["seed"])) == [0, 1] and set(both["algo"]) == {"ppo"}
    # every episode's cost is 10 (within the bound 25: V 0) or 30 (over it: V 1)
    train = both[both["phase"] == "train"].set_index("seed")
    assert train.loc[0, "V"] == 0.0 and train.loc[1, "V"] == 1.0


def test_a_folder_with_no_episode_files_is_refused_naming_both_kinds(tmp_path, capsys):
    (tmp_path / "empty").mkdir()
    assert cli.main(["evaluate", str(tmp_path / "empty"), "--out", str(tmp_path / "out")]) == 2
    err = capsys.readouterr().err
    assert err.startswith(f"error: {tmp_path / 'empty'}: a folder with no episode files")
    assert "trainer's run folder (episodes.parquet)" in err
