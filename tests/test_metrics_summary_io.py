"""Stage 1 on disk: the summary file round-trips and summaries of runs concatenate."""

import numpy as np
import pandas as pd
import pytest

from metrics import EpisodeTableError, read_summaries, summarise, write_summary
from metrics.cli import main

from test_metrics_episodes import episodes, write


def test_summary_file_round_trip_and_concatenation(tmp_path):
    a = write(pd.concat([episodes([1.0, 12.0], seed=0), episodes([3.0], seed=0, phase="final_greedy")]), tmp_path / "a.parquet")
    b = write(episodes([30.0, 2.0, 9.0], seed=1), tmp_path / "b.csv")
    assert main(["summarise", a, "--out", str(tmp_path / "sa.parquet")]) == 0
    assert main(["summarise", b, "--out", str(tmp_path / "sb.parquet")]) == 0
    both = read_summaries([tmp_path / "sb.parquet", tmp_path / "sa.parquet"])
    direct = summarise([a, b])
    for name in ("iterates", "runs", "histograms", "final_episodes"):
        pd.testing.assert_frame_equal(getattr(both, name), getattr(direct, name), check_exact=True)
    assert list(both.runs["seed"]) == [0, 0, 1]


def test_summarise_command_reports_bad_input(tmp_path, capsys):
    bad = write(episodes([1.0, np.nan]), tmp_path / "bad.csv")
    out = tmp_path / "s.parquet"
    assert main(["summarise", bad, "--out", str(out)]) == 2
    assert "bad.csv: column cost has NaN, missing or infinite values (row 1;" in capsys.readouterr().err
    assert not out.exists() and list(tmp_path.iterdir()) == [tmp_path / "bad.csv"]


def test_the_same_run_in_two_summaries_is_an_error(tmp_path):
    path = write(episodes([1.0]), tmp_path / "a.parquet")
    write_summary(summarise(path), tmp_path / "s1.parquet")
    write_summary(summarise(path), tmp_path / "s2.parquet")
    with pytest.raises(EpisodeTableError, match="same run and phase appears in separate inputs"):
        read_summaries([tmp_path / "s1.parquet", tmp_path / "s2.parquet"])


def test_grid_binning_equals_searchsorted_and_grid_points_are_exact():
    from metrics.grid import KAPPA, bin_index

    assert KAPPA[100] == 0.0 and KAPPA[110] == 0.1 and KAPPA[150] == 0.5 and KAPPA[0] == -1.0 and KAPPA[-1] == 20.0
    rng = np.random.default_rng(0)
    x = np.concatenate(
        [rng.uniform(-2, 22, 100_000), KAPPA, np.nextafter(KAPPA, np.inf), np.nextafter(KAPPA, -np.inf), [-1e300, 1e300, -np.inf]]
    )
    np.testing.assert_array_equal(bin_index(x), np.searchsorted(KAPPA, x, side="left"))


def test_files_of_one_run_are_grouped_and_others_kept_apart(tmp_path):
    from metrics.summary import group_files_by_run

    a = write(episodes([1.0], seed=0), tmp_path / "a.parquet")
    b = write(episodes([1.0], seed=1), tmp_path / "b.parquet")
    c = write(episodes([1.0], seed=0, phase="final_greedy"), tmp_path / "c.csv")
    groups = sorted(sorted(g) for g in group_files_by_run([a, b, c]))
    assert groups == [sorted([a, c]), [b]]


def test_summarise_in_two_processes_gives_the_same_summary(tmp_path):
    paths = [write(episodes(np.arange(5.0) * (k + 1), seed=k), tmp_path / f"s{k}.parquet") for k in range(4)]
    one, two = summarise(paths), summarise(paths, jobs=2)
    for name in ("iterates", "runs", "histograms", "final_episodes"):
        pd.testing.assert_frame_equal(getattr(one, name), getattr(two, name), check_exact=True)
