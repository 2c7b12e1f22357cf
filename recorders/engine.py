"""The metrics engine, imported under the name this package was imported beside.

Installed, the recorders are `saferl_eval.recorders` and the engine `saferl_eval.metrics`
(one uniquely named import: a user's own `metrics.py` cannot shadow it); in a checkout both
are also top-level packages (`recorders`, `metrics`). The recorders import the engine only
through `module`, so either way they use the engine they were installed with.
"""
from __future__ import annotations

import importlib

# "saferl_eval" for saferl_eval.recorders.engine, "" for recorders.engine
_ROOT = __name__.rsplit(".", 2)[0] if __name__.count(".") >= 2 else ""


def module(name: str):
    """The engine's module `name` (e.g. "schema")."""
    return importlib.import_module(f"{_ROOT}.metrics.{name}" if _ROOT else f"metrics.{name}")


_atomic, _schema = module("atomic"), module("schema")
atomic_path, write_text = _atomic.atomic_path, _atomic.write_text
FINAL_PHASES, PHASES = _schema.FINAL_PHASES, _schema.PHASES
