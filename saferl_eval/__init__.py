"""saferl-eval's one installed name: the evaluation engine and the episode recorders.

    import saferl_eval.metrics            # the engine (docs/metrics.md); CLI: saferl-eval
    import saferl_eval.recorders.gym      # recorders for other frameworks (docs/byo.md)

The code lives in the repository's `metrics/` and `recorders/` folders; an install maps them
under this package (pyproject.toml), so nothing else named `metrics` or `recorders` enters a
user's environment. In a checkout without an install the same names work: the checkout's
root is then this package's path too.
"""
import os as _os

_root = _os.path.dirname(_os.path.dirname(_os.path.abspath(__file__)))
if _os.path.isfile(_os.path.join(_root, "Snakefile")) and _os.path.isdir(_os.path.join(_root, "metrics")):
    __path__.append(_root)  # a checkout: metrics/ and recorders/ sit beside this folder
