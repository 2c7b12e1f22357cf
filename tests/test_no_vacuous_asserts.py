"""No test in tests/ holds an assertion that cannot fail. An AST scan for the shapes that pass
whatever the code under test does (kept to shapes found without false positives):

- `assert X or True` (an `or` with a true constant among its operands);
- `assert True`, `assert 1`, `assert "text"`: a true constant;
- `assert (cond, "message")`: a non-empty tuple, list, set, dict or f-string is always true;
- `assert X == X`, `assert X is X`, `assert X <= X`: an expression compared with itself;
- `assert len(X) >= 0`: a length that cannot be negative;
- a `try` whose body asserts and whose handler catches AssertionError (or Exception,
  BaseException, everything) and only passes: the failure is swallowed;
- a test whose only asserts check that a file exists or is non-empty (`.exists()`,
  `os.path.exists/isfile/isdir`, `size > 0`) and that checks nothing else (no other assert, no
  `pytest.raises`, no `*.assert_*`/`assert_*` call, no helper it calls from this file that
  asserts): its name promises a result, it checks only that something was written.

Run alone: `python tests/test_no_vacuous_asserts.py [FILES]` prints what it finds."""
from __future__ import annotations

import ast
import sys
from pathlib import Path

import pytest

TESTS = Path(__file__).resolve().parent
SWALLOWING = {"AssertionError", "Exception", "BaseException"}
EXISTENCE_CALLS = {"exists", "isfile", "isdir", "is_file", "is_dir"}


def _truthy_constant(node: ast.AST) -> bool:
    return isinstance(node, ast.Constant) and bool(node.value) and node.value is not Ellipsis


def _always_true(test: ast.AST) -> str | None:
    """Why the assert's expression is true whatever the code does, or None."""
    if _truthy_constant(test):
        return f"asserts the constant {ast.unparse(test)}"
    if isinstance(test, ast.BoolOp) and isinstance(test.op, ast.Or) and any(map(_truthy_constant, test.values)):
        return "asserts `... or <true constant>`"
    if isinstance(test, (ast.Tuple, ast.List, ast.Set, ast.Dict)) and (
            test.keys if isinstance(test, ast.Dict) else test.elts):
        return "asserts a non-empty literal (a tuple is always true: `assert (x, msg)`)"
    if isinstance(test, ast.JoinedStr) and any(isinstance(v, ast.Constant) and v.value for v in test.values):
        return "asserts a non-empty f-string"
    if isinstance(test, ast.Lambda):
        return "asserts a lambda"
    if isinstance(test, ast.Compare) and len(test.ops) == 1:
        left, op, right = test.left, test.ops[0], test.comparators[0]
        if isinstance(op, (ast.Eq, ast.Is, ast.LtE, ast.GtE)) and ast.dump(left) == ast.dump(right):
            return f"compares {ast.unparse(left)} with itself"
        if (isinstance(op, ast.GtE) and isinstance(left, ast.Call) and isinstance(left.func, ast.Name)
                and left.func.id == "len" and isinstance(right, ast.Constant) and right.value == 0):
            return "asserts len(...) >= 0"
    return None


def _swallows(handler: ast.ExceptHandler) -> bool:
    if not all(isinstance(s, ast.Pass) or (isinstance(s, ast.Expr) and isinstance(s.value, ast.Constant))
               for s in handler.body):
        return False
    if handler.type is None:
        return True
    names = handler.type.elts if isinstance(handler.type, ast.Tuple) else [handler.type]
    return any(isinstance(n, ast.Name) and n.id in SWALLOWING for n in names)


def _existence_only(test: ast.AST) -> bool:
    """Whether an assert checks only that files exist or are non-empty (and/all/not of those)."""
    if isinstance(test, ast.BoolOp) and isinstance(test.op, ast.And):
        return all(_existence_only(v) for v in test.values)
    if isinstance(test, ast.Call):
        func = test.func
        if isinstance(func, ast.Name) and func.id == "all" and test.args:
            arg = test.args[0]
            return isinstance(arg, ast.GeneratorExp) and _existence_only(arg.elt)
        return isinstance(func, ast.Attribute) and func.attr in EXISTENCE_CALLS
    if isinstance(test, ast.Compare) and len(test.ops) == 1 and isinstance(test.ops[0], (ast.Gt, ast.NotEq)):
        right = test.comparators[0]
        if not (isinstance(right, ast.Constant) and isinstance(right.value, (int, float)) and right.value <= 1000):
            return False
        left = test.left
        size = (isinstance(left, ast.Attribute) and left.attr == "st_size") or (
            isinstance(left, ast.Call) and isinstance(left.func, ast.Attribute) and left.func.attr == "getsize")
        return size
    return False


def _checking_call(node: ast.Call, asserting_helpers: set[str]) -> bool:
    """A call that checks something: pytest.raises/warns, np/pd testing, assert_*, a local helper that asserts."""
    func = node.func
    name = func.attr if isinstance(func, ast.Attribute) else func.id if isinstance(func, ast.Name) else ""
    return (name in ("raises", "warns", "fail", "approx") or name.startswith(("assert", "check", "expect"))
            or name in asserting_helpers)


def scan(source: str, filename: str = "<source>") -> list[str]:
    """`file:line: why` for every vacuous assertion in `source`."""
    tree = ast.parse(source, filename)
    found = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Assert):
            why = _always_true(node.test)
            if why:
                found.append(f"{filename}:{node.lineno}: {why}")
        elif isinstance(node, ast.Try):
            asserts = any(isinstance(n, ast.Assert) for s in node.body for n in ast.walk(s))
            for handler in node.handlers:
                if asserts and _swallows(handler):
                    found.append(f"{filename}:{handler.lineno}: a failed assert in the try is swallowed "
                                 f"by `except {ast.unparse(handler.type) if handler.type else ''}: pass`")
    functions = [n for n in ast.walk(tree) if isinstance(n, (ast.FunctionDef, ast.AsyncFunctionDef))]
    asserting = {f.name for f in functions if any(isinstance(n, ast.Assert) for n in ast.walk(f))}
    for f in functions:
        if not f.name.startswith("test"):
            continue
        asserts = [n for n in ast.walk(f) if isinstance(n, ast.Assert)]
        if not asserts or not all(_existence_only(a.test) for a in asserts):
            continue
        if any(isinstance(n, ast.Call) and _checking_call(n, asserting - {f.name}) for n in ast.walk(f)):
            continue
        found.append(f"{filename}:{f.lineno}: {f.name} asserts only that files exist or are non-empty")
    return found


def scan_files(paths) -> list[str]:
    return [hit for p in paths for hit in scan(Path(p).read_text(), str(Path(p).relative_to(TESTS.parent)
                                                                            if Path(p).is_absolute() else p))]


def test_no_test_in_tests_asserts_something_that_cannot_fail():
    hits = scan_files(sorted(TESTS.glob("*.py")))
    assert hits == [], "\n".join(hits)


# ---- the scanner catches each shape and passes real checks ------------------------------------

VACUOUS = {
    "or True": "def test_a(x):\n    assert x is not None or True\n",
    "or 1": "def test_a(x):\n    assert x == 3 or 1\n",
    "assert True": "def test_a():\n    assert True\n",
    "a string": "def test_a():\n    assert 'it works'\n",
    "a tuple": "def test_a(x):\n    assert (x == 3, 'x is 3')\n",
    "an f-string": "def test_a(x):\n    assert f'{x} is 3'\n",
    "a literal equal to itself": "def test_a():\n    assert 3 == 3\n",
    "a name equal to itself": "def test_a(frame):\n    assert frame.cost == frame.cost\n",
    "a call is itself": "def test_a(f):\n    assert f(1) is f(1)\n",
    "len >= 0": "def test_a(rows):\n    assert len(rows) >= 0\n",
    "swallowed AssertionError": "def test_a(x):\n    try:\n        assert x == 3\n    except AssertionError:\n        pass\n",
    "swallowed everything": "def test_a(x):\n    try:\n        assert x == 3\n    except:\n        pass\n",
    "swallowed Exception in a tuple": ("def test_a(x):\n    try:\n        assert x == 3\n"
                                       "    except (ValueError, Exception):\n        pass\n"),
    "exists() only": "def test_writes_the_table(tmp_path):\n    build(tmp_path)\n    assert (tmp_path / 't.csv').exists()\n",
    "os.path.exists only": ("import os\ndef test_writes(out):\n    build(out)\n"
                            "    assert os.path.exists(out) and os.path.isfile(out)\n"),
    "size > 0 only": "def test_draws(out):\n    draw(out)\n    assert out.stat().st_size > 0\n",
    "getsize only, in all()": ("import os\ndef test_draws(outs):\n    draw(outs)\n"
                               "    assert all(os.path.getsize(p) > 1000 for p in outs)\n"),
}

SOUND = {
    "a real comparison": "def test_a(x):\n    assert x == 3\n",
    "assert False marks the unreachable": "def test_a():\n    if g():\n        assert False, 'unreachable'\n",
    "or with a non-constant": "def test_a(x, y):\n    assert x == 3 or y == 4\n",
    "an expected error is caught and checked": ("def test_a(x):\n    try:\n        f(x)\n"
                                                "    except ValueError as e:\n        assert 'x' in str(e)\n"),
    "a non-assert error is skipped": ("def test_a():\n    try:\n        import jax\n"
                                      "    except ImportError:\n        pass\n    assert jax\n"),
    "exists() beside a content check": ("def test_writes(tmp_path):\n    build(tmp_path)\n"
                                        "    assert (tmp_path / 't.csv').exists()\n"
                                        "    assert read(tmp_path / 't.csv') == [1, 2]\n"),
    "exists() beside pytest.raises": ("import pytest\ndef test_refuses(tmp_path):\n"
                                      "    with pytest.raises(ValueError):\n        build(tmp_path)\n"
                                      "    assert not (tmp_path / 't.csv').exists()\n"),
    "exists() beside a helper that asserts": ("def check(p):\n    assert p.read_text() == 'x'\n"
                                              "def test_writes(p):\n    build(p)\n    assert p.exists()\n    check(p)\n"),
    "exists() beside pandas' testing": ("def test_same(a, b):\n    assert a.exists()\n"
                                        "    pd.testing.assert_frame_equal(read(a), read(b))\n"),
    "a size compared with another": "def test_a(a, b):\n    assert a.stat().st_size > b.stat().st_size\n",
    "a helper (not a test) that only checks existence": "def wait(p):\n    assert p.exists()\n",
}


@pytest.mark.parametrize("shape", list(VACUOUS))
def test_the_scan_finds_each_vacuous_shape(shape):
    hits = scan(VACUOUS[shape], "t.py")
    assert len(hits) == 1 and hits[0].startswith("t.py:"), (shape, hits)


@pytest.mark.parametrize("shape", list(SOUND))
def test_the_scan_passes_assertions_that_can_fail(shape):
    assert scan(SOUND[shape], "t.py") == []


def test_the_scan_names_the_line():
    assert scan("import os\n\n\ndef test_a(x):\n    y = x\n    assert y or True\n", "tests/t.py") == [
        "tests/t.py:6: asserts `... or <true constant>`"]


if __name__ == "__main__":
    hits = scan_files(sys.argv[1:] or sorted(TESTS.glob("*.py")))
    print("\n".join(hits) or "no vacuous assertions")
    sys.exit(1 if hits else 0)
