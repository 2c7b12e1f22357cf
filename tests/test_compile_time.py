"""benchmarks/compile_time.py measuring an XLA compiler option against XLA's defaults on a tiny
chunk (circle, simple contacts, 4 envs, 2 updates): compile and run seconds of both, their
ratios and the bitwise comparison of the outputs; and a malformed --xla-option's error."""
import re
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))

from benchmarks import compile_time  # noqa: E402

NUMBER = r"(\d+\.\d+)"


@pytest.mark.slow
def test_an_xla_option_is_compared_with_the_defaults(capsys):
    assert compile_time.main(["--task", "circle", "--contact-model", "simple", "--num-envs", "4",
                              "--chunk-updates", "2", "--xla-option", "xla_backend_optimization_level=1"]) == 0
    out = capsys.readouterr().out
    assert re.search(r"^chunk options: xla_backend_optimization_level=1 \(chunk_updates=2, num_envs=4,", out, re.M), out
    for name in ("defaults", "options"):
        m = re.search(rf"^{name}\s+compile\s+{NUMBER} s\s+run\s+{NUMBER} s per chunk$", out, re.M)
        assert m and float(m.group(1)) > 0 and float(m.group(2)) > 0, out
    m = re.search(rf"^options/defaults: compile {NUMBER}\s+run {NUMBER}$", out, re.M)
    assert m and float(m.group(1)) > 0 and float(m.group(2)) > 0, out
    assert re.search(r"^results: (bitwise equal|differ \(\d+ of \d+ arrays\))$", out, re.M), out
    assert "rollout" not in out, out


def test_option_values_parse_as_numbers_or_booleans_else_strings():
    assert compile_time.option("a=1") == ("a", 1)
    assert compile_time.option("a=0.5") == ("a", 0.5)
    assert compile_time.option("a=True") == ("a", True)
    assert compile_time.option("a=false") == ("a", False)
    assert compile_time.option("a=x=y") == ("a", "x=y")


def test_a_malformed_xla_option_is_a_one_line_usage_error(capsys):
    with pytest.raises(SystemExit) as exit_:
        compile_time.main(["--xla-option", "foo"])
    assert exit_.value.code == 2
    errors = [line for line in capsys.readouterr().err.splitlines() if "error:" in line]
    assert len(errors) == 1 and "--xla-option" in errors[0] and "'foo'" in errors[0], errors
