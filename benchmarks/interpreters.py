"""The benchmarks' optional comparison interpreters: the Python of a virtualenv that holds a
package this project does not install beside its own (crax-bench; rliable, which needs
pandas < 3). Each is named by an option or, as its default, an environment variable; there is
no machine-specific default path."""
from __future__ import annotations

import os


def comparison_python(option: str, env_var: str, value: str | None, install: str, required: bool) -> str | None:
    """`value` (the option's value, whose default is $env_var) checked to be an executable.

    None when neither is set and the comparison is optional; SystemExit saying what to pass,
    and how to make such a virtualenv, when it is required but unset or names no executable.
    """
    hint = f"to make one: python -m venv VENV && VENV/bin/pip install {install}"
    if not value:
        if required:
            raise SystemExit(f"{option}: no interpreter given; pass {option} PATH or set {env_var} ({hint})")
        return None
    if not (os.path.isfile(value) and os.access(value, os.X_OK)):
        raise SystemExit(f"{option} (or {env_var}) is {value!r}, which is not an executable Python ({hint})")
    return value
