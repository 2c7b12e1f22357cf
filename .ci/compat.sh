#!/usr/bin/env bash
# The recorders installed beside the pins of the frameworks their users have (docs/byo.md,
# "Installing beside a framework"): Safety-Gymnasium 1.0.0 pins gymnasium==0.28.1, OmniSafe 0.5.0 pandas==2.0.3,
# and pandas 2.0.3 does not import under numpy 2.
#
# A fresh venv gets those pins first, as the framework's own install would leave them; then the
# project's base install with the recorder's extra, as a user runs it: no pin of ours first
# (pyproject.toml's own pyarrow range keeps a pyarrow that runs on numpy 1.x). The check below
# fails if the install moved a pin. Then the recorder tests run
# there: tests/test_recorders_compat.py records a Gymnasium 0.28 SyncVectorEnv and checks the
# totals exactly against a per-step ledger; the other recorder tests run as far as Gymnasium
# 0.28 allows (the rest skip), and tests/test_install_name.py checks the installed package's
# one name beside a user's own metrics.py.
set -euo pipefail
cd "$(dirname "$0")/.."

work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
cat > "$work/pins.txt" <<'EOF'
gymnasium==0.28.1
pandas==2.0.3
numpy<2
EOF

python3 -m venv "$work/venv"
pip="$work/venv/bin/pip"
"$pip" install --quiet --requirement "$work/pins.txt"
"$pip" install --quiet ".[gym]" pytest  # a regular install, as a user's
"$work/venv/bin/python" - <<'EOF'
from importlib.metadata import version
got = {name: version(name) for name in ("gymnasium", "pandas", "numpy", "pyarrow")}
print("compat venv:", ", ".join(f"{k} {v}" for k, v in got.items()))
assert got["gymnasium"] == "0.28.1" and got["pandas"] == "2.0.3" and got["numpy"].startswith("1."), got
import pyarrow.parquet, saferl_eval.metrics, saferl_eval.recorders  # pyarrow >= 26 fails here under numpy 1.x
EOF
"$work/venv/bin/python" -m pytest -q -p no:cacheprovider \
    tests/test_recorders_compat.py tests/test_recorders_misuse.py tests/test_recorders.py tests/test_recorders_writer.py \
    tests/test_install_name.py
