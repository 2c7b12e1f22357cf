"""The episode writer's folder: flushes that write only what they add, merges that a crash cannot
turn into duplicates, the trainer's own iterate labels, and the engine reading the folder."""
import glob
import os

import numpy as np
import pandas as pd
import pyarrow as pa
import pyarrow.parquet as pq
import pytest

import metrics
from metrics.cli import main as metrics_main
from metrics.schema import EpisodeTableError
from recorders import RecorderError
from recorders import writer as writer_module
from tests.recorder_envs import RUN, writer


def block(j, n=3):
    """Iterate j of n episodes: return j + i/10, cost i, length i + 1."""
    return [[j + i / 10 for i in range(n)]], [[float(i) for i in range(n)]], [[i + 1 for i in range(n)]]


def train_names(folder):
    return sorted(os.path.basename(f) for f in glob.glob(os.path.join(folder, "train-*.parquet")))


def test_a_flush_writes_the_rows_it_adds_and_merges_keep_the_files_few(tmp_path, monkeypatch):
    written = []
    real = pq.write_table
    monkeypatch.setattr(writer_module.pq, "write_table", lambda table, path, **kw: (written.append(table.num_rows),
                                                                                     real(table, path, **kw)))
    w = writer(tmp_path)
    iterates, max_files = 3000, 0
    for j in range(iterates):
        before = len(written)
        w.append_iterates(*block(j))
        assert written[before] == 3  # the flush itself: this iterate's rows only, however many came before
        max_files = max(max_files, len(train_names(tmp_path)))
    rows = 3 * iterates
    # merges rewrite each row once per size class (8 rows, 64, 512, 4096: < log8(rows) + 1 times)
    assert sum(written) <= 6 * rows, sum(written) / rows
    assert max_files <= 4 * writer_module.MERGE_FANOUT
    frame = metrics.read_episodes(tmp_path)
    assert len(frame) == rows and list(frame.iteration.unique()) == list(range(iterates))
    np.testing.assert_array_equal(frame["return"], [j + i / 10 for j in range(iterates) for i in range(3)])


def test_a_file_is_closed_at_rows_per_file_and_close_merges_the_rest(tmp_path):
    w = writer(tmp_path, rows_per_file=9)
    for j in range(7):
        w.append_iterates(*block(j))
    # iterates 0-2 (9 rows) closed, 3-5 closed, 6 open
    assert train_names(tmp_path) == ["train-000000-000002.parquet", "train-000003-000005.parquet",
                                     "train-000006-000006.parquet"]
    w.append_iterates(*block(7))
    w.close()
    assert train_names(tmp_path) == ["train-000000-000002.parquet", "train-000003-000005.parquet",
                                     "train-000006-000007.parquet"]


def test_a_crash_inside_a_merge_leaves_no_duplicate_for_the_engine_and_resume_cleans_up(tmp_path, monkeypatch):
    w = writer(tmp_path)
    for j in range(writer_module.MERGE_FANOUT - 1):
        w.append_iterates(*block(j))

    def crash(path):
        raise KeyboardInterrupt("killed after the merged file was written")

    monkeypatch.setattr(writer_module.os, "remove", crash)
    with pytest.raises(KeyboardInterrupt):
        w.append_iterates(*block(writer_module.MERGE_FANOUT - 1))  # the 8th part: a merge of parts 0-7
    monkeypatch.undo()
    names = train_names(tmp_path)
    assert "train-000000-000007.parquet" in names and len(names) == writer_module.MERGE_FANOUT + 1
    frame = metrics.read_episodes(tmp_path)  # the folder: covered parts are skipped
    assert len(frame) == 3 * writer_module.MERGE_FANOUT and not frame.duplicated(["iteration", "episode"]).any()
    with pytest.raises(EpisodeTableError, match="duplicate key"):  # every file by hand: loud, not silent
        metrics.read_episodes(sorted(glob.glob(str(tmp_path / "*.parquet"))))
    del w
    resumed = writer(tmp_path, resume=True)
    assert train_names(tmp_path) == ["train-000000-000007.parquet"] and resumed.iterations == 8


def test_trainer_step_labels_iterates_and_the_engine_ignores_the_column(tmp_path):
    w = writer(tmp_path)
    w.append_iterates(*block(0))  # before any label: empty
    w.trainer_step = 2048
    w.append_iterates(*block(1))
    w.append_iterates(*block(2), trainer_step=4096)
    with pytest.raises(RecorderError, match="trainer_step must be an integer >= 0"):
        w.trainer_step = -1
    w.trainer_step = 8192
    w.write_final({"return": [1.0], "cost": [0.0], "length": [2]}, {"return": [1.0], "cost": [0.0], "length": [2]})
    frame = pd.concat([pd.read_parquet(f) for f in w.files()], ignore_index=True)
    steps = frame.groupby(["phase", "iteration"])["trainer_step"].first()
    assert np.isnan(steps["train", 0]) and steps["train", 1] == 2048 and steps["train", 2] == 4096
    assert steps["final_explore", 2] == 8192 and steps["final_greedy", 2] == 8192
    assert pq.read_schema(w.files()[0]).field("trainer_step").type == pa.int64()
    assert metrics_main(["evaluate", str(tmp_path), "--out", str(tmp_path / "out"), "--reps", "20"]) == 0


def test_the_writer_columns_are_the_trainers_plus_the_label():
    from metrics.episode_table import EPISODE_SCHEMA as TRAINER_SCHEMA

    assert writer_module.EPISODE_SCHEMA.names == [*TRAINER_SCHEMA.names, "trainer_step"]
    for field in TRAINER_SCHEMA:
        assert writer_module.EPISODE_SCHEMA.field(field.name).type == field.type


def _two_seeds(root):
    for seed in (0, 1):
        w = writer_module.EpisodeWriter(root / f"seed{seed}", **{**RUN, "seed": seed})
        for j in range(3):
            w.append_iterates(*block(j))
        w.write_final({"return": [1.0, 2.0], "cost": [0.0, 3.0], "length": [2, 2]},
                      {"return": [1.0, 2.0], "cost": [0.0, 1.0], "length": [2, 2]})


def test_metrics_evaluate_takes_a_recorder_folder_or_a_folder_of_them(tmp_path, capsys):
    _two_seeds(tmp_path / "runs")
    assert metrics_main(["evaluate", str(tmp_path / "runs" / "seed0"), "--out", str(tmp_path / "one"),
                         "--reps", "20"]) == 0
    assert set(pd.read_parquet(tmp_path / "one" / "run_metrics.parquet").seed) == {0}
    assert metrics_main(["evaluate", str(tmp_path / "runs"), "--out", str(tmp_path / "all"), "--reps", "20"]) == 0
    runs = pd.read_parquet(tmp_path / "all" / "run_metrics.parquet")
    assert set(runs.seed) == {0, 1} and len(runs) == 6
    (tmp_path / "empty").mkdir()
    assert metrics_main(["evaluate", str(tmp_path / "empty"), "--out", str(tmp_path / "x")]) == 2
    assert "a folder with no episode files of a recorder" in capsys.readouterr().err


def test_resume_continues_a_folder_of_the_first_writer_format(tmp_path):
    old = pa.table({"task": ["line"] * 2, "bound": [1.5] * 2, "algo": ["scripted"] * 2, "seed": [3, 3],
                    "phase": ["train"] * 2, "iteration": [0, 1], "episode": [0, 0], "return": [1.0, 2.0],
                    "cost": [0.0, 1.0], "length": [1, 1]})
    pq.write_table(old, tmp_path / "train-00000.parquet")
    with pytest.raises(RecorderError, match=r"field seed \(3 there, 4 here\) differ"):
        writer_module.EpisodeWriter(tmp_path, **{**RUN, "seed": 4}, resume=True)
    w = writer(tmp_path, resume=True)
    assert w.iterations == 2
    w.append_iterates([[3.0]], [[0.0]], [[1]])
    w.close()
    assert list(metrics.read_episodes(tmp_path)["return"]) == [1.0, 2.0, 3.0]
