"""How long the sweep's console stays silent about a running training pack (workflow.console
promises a line at least every 30 s, whatever the load).

    python benchmarks/console_gaps.py -- SNAKEMAKE_ARGS...
    e.g. python benchmarks/console_gaps.py -- --workflow-profile cluster_profiles/local --config preset=tiny

Runs `python -m snakemake SNAKEMAKE_ARGS` in the current folder, time-stamps every console line
as it arrives, and prints for each training job (rule train_*) how long it ran, how many lines
named it and the longest gap between them (from its job's start to its end), then the machine's
load average. Run it in a fresh folder (or one whose packs still need training).
"""
from __future__ import annotations

import os
import re
import subprocess
import sys
import time


def gaps(stamped: list[tuple[float, str]]) -> dict[str, tuple[float, int, float]]:
    """{rule: (seconds it ran, lines naming it, longest gap)} of a time-stamped console."""
    said: dict[str, list[float]] = {}
    for t, text in stamped:
        if m := re.match(r"(?:local)?rule (train_\S+):$", text.strip()):
            said[m[1]] = [t]
        elif m := re.match(r"Finished jobid: \d+ \(Rule: (train_\S+)\)", text.strip()):
            said.setdefault(m[1], []).append(t)
        elif m := re.match(r"(train_\S+): ", text):
            said.setdefault(m[1], []).append(t)
    return {rule: (ts[-1] - ts[0], len(ts), max((b - a for a, b in zip(ts, ts[1:])), default=0.0))
            for rule, ts in said.items()}


def main() -> None:
    args = sys.argv[1:]
    if args[:1] == ["--"]:
        args = args[1:]
    start, stamped = time.monotonic(), []
    proc = subprocess.Popen([sys.executable, "-m", "snakemake", *args], stdout=subprocess.PIPE,
                            stderr=subprocess.STDOUT, text=True)
    for line in proc.stdout:
        stamped.append((time.monotonic() - start, line.rstrip("\n")))
    proc.wait()
    print(f"snakemake exited {proc.returncode} after {time.monotonic() - start:.0f} s")
    for rule, (ran, lines, longest) in sorted(gaps(stamped).items()):
        print(f"{rule}: ran {ran:.0f} s, {lines} lines, longest silence {longest:.1f} s")
    print("load average (1, 5, 15 min): " + ", ".join(f"{x:.1f}" for x in os.getloadavg()))


if __name__ == "__main__":
    main()
