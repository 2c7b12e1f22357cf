"""The algorithm and task tables are the one place names come from: the trainer's fields and
CLI, the sweep configuration's allowed values and the CRAX adapter derive from them; presets
hold only what differs from config/base.yaml."""
from __future__ import annotations

import dataclasses
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

import envs
import algos
from algos import registry
from algos.config import ALGOS, HYPER_FIELDS, PRESETS, TrainConfig, make_config
from metrics.thresholds import PAPER_THRESHOLDS
from workflow import config_validation as cv

REPO = Path(__file__).resolve().parent.parent


# ---- algorithms ---------------------------------------------------------------------------

def test_algos_and_their_hooks_come_from_the_table():
    assert ALGOS == tuple(registry.ALGORITHMS)
    assert ALGOS[:4] == registry.PAPER_ALGOS == ("ppo", "ppo_lag", "p3o", "focops")
    for name, algo in registry.ALGORITHMS.items():
        assert callable(algo.loss_fn) if algo.hooks is None else algo.hooks_obj.init is not None, name
        assert algo.update is None or callable(algo.update_fn), name
        assert algo.has_multiplier == (algo.multiplier_init is not None or algo.multiplier is not None)
    assert not registry.get("ppo").has_multiplier and registry.get("ppo").update_fn is None
    with pytest.raises(ValueError, match=f"unknown algo 'trpo'; known: {', '.join(ALGOS)}"):
        registry.get("trpo")


def test_each_algorithm_scalar_is_a_config_field_a_runtime_value_and_a_set_key():
    fields = {f.name: f.default for f in dataclasses.fields(TrainConfig)}
    for algo in registry.ALGORITHMS.values():
        for scalar, declared in algo.scalars.items():
            assert fields[scalar] == declared.default and scalar in HYPER_FIELDS
    assert HYPER_FIELDS[:10] == ("bound", "learning_rate", "discount", "reward_scaling", "entropy_cost", "gae_lambda",
                                 "clip_eps", "tau", "alpha_learning_rate", "algo_index")
    assert len(HYPER_FIELDS) == 10 + sum(len(a.scalars) for a in registry.ALGORITHMS.values())
    assert make_config("cpu", {"algo": "p3o"}, ["kappa_max=7"]).kappa_max == 7.0


def test_each_scalar_is_declared_once_with_its_type_default_and_one_line_of_help():
    for name, algo in registry.ALGORITHMS.items():
        for scalar, declared in algo.scalars.items():
            assert isinstance(declared, registry.Scalar) and declared.type is float, (name, scalar)
            assert type(declared.default) is float and declared.help.strip(), (name, scalar)
            assert "\n" not in declared.help and "|" not in declared.help, (name, scalar)  # one table cell
    # a bare number (a quick entry) is a Scalar without help; a non-number is refused
    quick = registry.Algorithm("Quick", True, lambda: None, scalars={"quick_w": 2})
    assert quick.scalars == {"quick_w": registry.Scalar(2.0, "")}
    with pytest.raises(TypeError, match="a scalar's default must be a number"):
        registry.Scalar(True, "a switch")


def scalars_table(path: Path) -> list[tuple[str, str, float, str]]:
    """(algorithm, scalar, default, meaning) rows of the page's table of algorithm scalars."""
    rows = []
    for line in path.read_text(encoding="utf-8").splitlines():
        cells = [c.strip() for c in line.strip().strip("|").split("|")] if line.startswith("|") else []
        if len(cells) == 4 and cells[0].startswith("`"):
            rows.append((cells[0].strip("`"), cells[1].strip("`"), float(cells[2]), cells[3]))
    return rows


def test_the_docs_table_of_scalars_is_the_registry():
    declared = [(name, scalar, s.default, s.help) for name, algo in registry.ALGORITHMS.items()
                for scalar, s in algo.scalars.items()]
    assert scalars_table(REPO / "docs" / "scalars.md") == declared
    assert "[scalars.md](scalars.md)" in (REPO / "docs" / "algos.md").read_text(encoding="utf-8")


def test_the_trainer_help_lists_every_scalar_per_algorithm_with_type_default_and_help(monkeypatch, capsys):
    from runs.train import parse_args

    monkeypatch.setenv("COLUMNS", "400")  # no wrapping: one line per scalar
    with pytest.raises(SystemExit) as exit_:
        parse_args(["--help"])
    assert exit_.value.code == 0
    text = capsys.readouterr().out
    for name, algo in registry.ALGORITHMS.items():
        heading = f"scalars of {name} ({algo.label}), set with --set NAME=VALUE:"
        assert (heading in text) == bool(algo.scalars), name
        if not algo.scalars:
            continue
        group = text.split(heading, 1)[1].strip("\n").split("\n\n", 1)[0].splitlines()
        assert [line.split()[:3] for line in group] == [[scalar, "float", f"{s.default:g}"]
                                                         for scalar, s in algo.scalars.items()], name
        assert [line.split(None, 3)[3] for line in group] == [s.help for s in algo.scalars.values()], name


def test_cost_critic_follows_the_table():
    for name, algo in registry.ALGORITHMS.items():
        assert make_config("cpu", {"algo": name}).uses_cost_critic == algo.uses_cost_critic


def test_scalar_names_must_be_unique_and_the_multiplier_one_of_them(monkeypatch):
    table = dict(registry.ALGORITHMS)
    table["twin"] = registry.Algorithm("Twin", True, lambda: algos.ppo_lag.ppo_lag_loss, scalars={"kappa_max": 1.0})
    monkeypatch.setattr(registry, "ALGORITHMS", table)
    with pytest.raises(ValueError, match="scalar 'kappa_max' of 'twin' is already another algorithm's"):
        registry.algorithm_scalars()
    table["twin"] = registry.Algorithm("Twin", True, lambda: algos.ppo_lag.ppo_lag_loss, multiplier_init="w", scalars={})
    with pytest.raises(ValueError, match="'twin' multiplier_init 'w' is not one of its scalars"):
        registry.algorithm_scalars()


def test_trainer_cli_choices_are_the_tables():
    from runs.train import parse_args

    base = ["--task", "circle", "--bound", "25", "--seed", "0", "--out", "x"]
    for algo in ALGOS:
        assert parse_args([*base, "--algo", algo]).algo == algo
    for preset in PRESETS:
        assert parse_args([*base, "--algo", "ppo", "--preset", preset]).preset == preset
    with pytest.raises(SystemExit):
        parse_args([*base, "--algo", "trpo"])


# ---- tasks --------------------------------------------------------------------------------

def test_tasks_come_from_the_table():
    # the paper's four first, each with its CRAX twin; a task added to the table may have none
    assert envs.TASKS == tuple(envs.TASK_TABLE) and envs.TASKS[:4] == ("goal", "circle", "push", "button")
    for name, task in envs.TASK_TABLE.items():
        cls = envs.task_class(name)
        assert dataclasses.is_dataclass(cls) and "observation_size" in {f.name for f in dataclasses.fields(cls)}
        assert task.crax_name in (None, f"safe_{name}_point")
    assert all(envs.TASK_TABLE[name].crax_name for name in envs.TASKS[:4])
    with pytest.raises(ValueError, match=f"unknown task 'maze'; known tasks: {', '.join(envs.TASKS)} "
                                         r"\(backend='crax' also has CRAX's safe tasks"):
        envs.make("maze")


def test_the_tables_name_their_code_by_lazy_module_attributes():
    # `lambda: algos.ppo_pid.HOOKS`: the module loads on first use; other names stay errors
    assert registry.get("ppo_pid").hooks_obj is algos.ppo_pid.HOOKS
    assert envs.task_class("push") is envs.push.PushTask
    for package in (algos, envs):
        with pytest.raises(AttributeError, match="has no attribute 'nowhere'"):
            package.nowhere


def test_the_tables_and_the_configuration_import_no_jax():
    code = ("import sys, envs, algos.registry, algos.config, workflow.config_validation as cv; "
            "cv.resolve({}); print(sorted(m for m in ('jax', 'optax') if m in sys.modules))")
    proc = subprocess.run([sys.executable, "-c", code], cwd=REPO, capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.strip() == "[]"


# ---- the sweep configuration --------------------------------------------------------------

def test_schema_file_lists_no_names_and_validation_fills_them_from_the_tables():
    raw = yaml.safe_load((REPO / "workflow" / "schemas" / "config.schema.yaml").read_text())
    assert "enum" not in raw["properties"]["tasks"]["items"]
    assert "enum" not in raw["properties"]["algos"]["items"]
    assert "enum" not in raw["properties"]["train"]["properties"]["preset"]
    filled = cv.schema()["properties"]
    assert "enum" not in filled["tasks"]["items"]  # CRAX's names come from its registry: cv.check_tasks
    with pytest.raises(cv.ConfigError, match=f"'maze' is not a built-in task; built-in tasks: {', '.join(envs.TASKS)}"):
        cv.resolve({"tasks": ["maze"]})
    assert filled["algos"]["items"]["enum"] == list(ALGOS)
    assert filled["train"]["properties"]["preset"]["enum"] == list(PRESETS)
    with pytest.raises(cv.ConfigError, match=r"'algos\[0\]': 'trpo' is not one of \['ppo', 'ppo_lag', 'p3o', 'focops', "):
        cv.resolve({"algos": ["trpo"]})


def test_presets_hold_only_what_differs_from_what_they_extend():
    base = yaml.safe_load((REPO / "config" / "base.yaml").read_text())
    for path in (REPO / "config" / "presets").glob("*.yaml"):
        preset = yaml.safe_load(path.read_text()) or {}
        parent = cv.load_preset(preset["extends"]) if "extends" in preset else base
        assert "thresholds" not in preset, f"{path.name} restates the thresholds"
        for key, value in preset.items():
            if isinstance(value, dict) and isinstance(parent.get(key), dict):
                for sub, v in value.items():
                    assert parent[key].get(sub) != v, f"{path.name}: {key}.{sub} equals what it extends"
            else:
                assert parent.get(key) != value, f"{path.name}: {key} equals what it extends"
    assert "thresholds" not in base  # metrics/thresholds.py holds them
    assert cv.resolve({"preset": "default"}) == cv.validate({**base, "thresholds": PAPER_THRESHOLDS,
                                                            "bounds": [3.75, 6.25, 12.5], "preset": "default"})


def test_paper_builtin_is_paper_on_the_builtin_backend_with_mjx_contacts():
    paper, builtin = cv.resolve({"preset": "paper"}), cv.resolve({"preset": "paper-builtin"})
    assert (paper["backend"], builtin["backend"]) == ("crax", "builtin")
    train = {**paper["train"], "set": {"env.contact_model": "mjx"}}
    paper_specs, builtin_specs = paper.pop("specs"), builtin.pop("specs")
    assert {**paper, "backend": "builtin", "preset": "paper-builtin", "train": train} == builtin
    for run, spec in paper_specs.items():
        config = {**spec["config"], "backend": "builtin", "env_kwargs": {"contact_model": "mjx"}}
        assert builtin_specs[run] == {**spec, "config": config}


def test_the_sweeps_paper_budget_is_the_trainers_paper_preset_stated_once():
    train = cv.resolve({"preset": "paper"})["train"]
    trainer = make_config(train["preset"])
    for key in ("total_steps", "num_envs", "episode_length", "eval_episodes"):
        assert train[key] == getattr(trainer, key), key
        assert yaml.safe_load((REPO / "config" / "presets" / "paper.yaml").read_text())["train"][key] == "from_trainer"
    assert (train["total_steps"], train["num_envs"]) == (500_000_000, 2048)


def test_from_trainer_takes_the_trainer_presets_value_and_only_for_the_budget():
    cfg = cv.resolve({"preset": "tiny", "train": {"eval_episodes": "from_trainer", "episode_length": "from_trainer"}})
    assert (cfg["train"]["eval_episodes"], cfg["train"]["episode_length"], cfg["train"]["num_envs"]) == (100, 500, 4)
    with pytest.raises(cv.ConfigError, match="'train.threads': from_trainer is allowed only for total_steps"):
        cv.resolve({"preset": "tiny", "train": {"threads": "from_trainer"}})
    with pytest.raises(cv.ConfigError, match=r"'train.preset': 'gpu' is not one of \['cpu', 'paper'\]"):
        cv.resolve({"preset": "paper", "train": {"preset": "gpu"}})


def _presets(tmp_path, files: dict) -> Path:
    folder = tmp_path / "presets"
    folder.mkdir()
    for name, text in files.items():
        (folder / f"{name}.yaml").write_text(text)
    return folder


def test_extends_chains_are_followed_and_errors_name_the_file(tmp_path):
    base = REPO / "config" / "base.yaml"
    folder = _presets(tmp_path, {"a": "seeds: 3\n", "b": "extends: a\nbounds: [7]\n", "c": "# nothing differs\n",
                                 "loop1": "extends: loop2\n", "loop2": "extends: loop1\n", "lost": "extends: nowhere\n",
                                 "list": "- 1\n"})
    cfg = cv.resolve({"preset": "b"}, folder, base)
    assert (cfg["seeds"], cfg["bounds"], cfg["tasks"]) == ([0, 1, 2], [7], ["goal", "circle", "push", "button"])
    assert cv.resolve({"preset": "c"}, folder, base)["seeds"] == [0, 1]
    with pytest.raises(cv.ConfigError, match="'extends' goes round in a circle: loop1 -> loop2 -> loop1"):
        cv.resolve({"preset": "loop1"}, folder, base)
    with pytest.raises(cv.ConfigError, match="'extends' in 'lost.yaml': 'nowhere' is not one of"):
        cv.resolve({"preset": "lost"}, folder, base)
    with pytest.raises(cv.ConfigError, match="list.yaml: expected a mapping of config keys"):
        cv.resolve({"preset": "list"}, folder, base)
