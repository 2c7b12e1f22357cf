"""Adaptive seeds: a sweep that adds seeds to an algorithm only while its tier is not sure.

Config (`adaptive`, see docs/workflow.md): `seeds: K0` seeds first, then rounds of `step`
more seeds up to `max_seeds` per condition. Before round r (r >= 1), the decision of round r
(<results folder>/seeds/round<r>.json, a Snakemake checkpoint) reads the summaries of every run so
far and gives round r's seeds to each algorithm whose P(tier) (the share of bootstrap
replicates in its point tier, as in tiers.csv) is below `target` in some phase; an algorithm
that reached the target, or the budget, stops. The seeds of a round are fixed by the config
alone (round 0: 0..K0-1, then `step` at a time), so every run folder, spec and pack is the
same as in a fixed sweep of those seeds, and a rerun of the same command finds every
decision made and asks for nothing new.
"""
from __future__ import annotations

import json
import os
from typing import Mapping

DECISIONS_DIR = "results/seeds"  # the default sweep's; every sweep's under its own folder (workflow.sweep)
SEED_TABLE = "results/tables/seeds.csv"


def decisions_dir(results_dir: str = "results") -> str:
    return f"{results_dir}/seeds"


def seed_table_path(results_dir: str = "results") -> str:
    return f"{results_dir}/tables/seeds.csv"


def enabled(cfg: Mapping) -> bool:
    return bool(cfg.get("adaptive"))


def rounds(cfg: Mapping) -> list[list[int]]:
    """The seeds of each round: round 0 the start seeds, then `step` more at a time up to
    `max_seeds` (the last round may be shorter)."""
    if not enabled(cfg):
        return [list(cfg["seeds"])]
    a = cfg["adaptive"]
    start, step, top = int(a["start"]), int(a["step"]), int(a["max_seeds"])
    out = [list(range(start))]
    for first in range(start, top, step):
        out.append(list(range(first, min(first + step, top))))
    return out


def decision_path(round_no: int, results_dir: str = "results") -> str:
    return f"{decisions_dir(results_dir)}/round{round_no}.json"


def start_seeds(cfg: Mapping) -> dict[str, list[int]]:
    return {algo: rounds(cfg)[0] for algo in cfg["algos"]}


def read_decision(path: str | os.PathLike) -> dict:
    with open(path) as f:
        return json.load(f)


def seeds_of(decision: Mapping) -> dict[str, list[int]]:
    """Each algorithm's seeds after a decision (its earlier ones plus any it added)."""
    return {algo: list(d["seeds"]) for algo, d in decision["algos"].items()}


def requested_seeds(cfg: Mapping, root: str | os.PathLike = ".") -> dict[str, list[int]]:
    """Each algorithm's seeds as far as the sweep in `root` has decided (the newest decision
    file present; the start seeds before any): what workflow.status lists."""
    from workflow import sweep

    if not enabled(cfg):
        return {algo: list(cfg["seeds"]) for algo in cfg["algos"]}
    seeds = start_seeds(cfg)
    for r in range(1, len(rounds(cfg))):
        path = os.path.join(root, decision_path(r, sweep.results_dir(cfg)))
        if not os.path.exists(path):
            break
        seeds = seeds_of(read_decision(path))
    return seeds


def tier_confidence(cfg: Mapping, runs) -> dict[str, dict[str, dict]]:
    """{algo: {phase: {"tier", "p_tier"}}} of a stage-1 runs table, with the sweep's
    thresholds and bootstrap settings (metrics.plan_seeds' tier confidence now)."""
    from metrics import plan_seeds

    plan = plan_seeds(runs, k_max=2, target=float(cfg["adaptive"]["target"]), thresholds=dict(cfg["thresholds"]),
                      reps=int(cfg["bootstrap"]["reps"]), seed=int(cfg["bootstrap"]["seed"]))
    out: dict = {}
    for row in plan.needed.itertuples(index=False):
        out.setdefault(row.algo, {})[row.phase] = {"tier": int(row.tier), "p_tier": float(row.p_tier)}
    return out


def decide(cfg: Mapping, round_no: int, runs, previous: Mapping | None) -> dict:
    """Round `round_no`'s decision from the runs so far (a stage-1 runs table) and the
    previous decision (None before round 1)."""
    target, top = float(cfg["adaptive"]["target"]), int(cfg["adaptive"]["max_seeds"])
    new_seeds = rounds(cfg)[round_no]
    before = seeds_of(previous) if previous is not None else start_seeds(cfg)
    stopped = {a for a, d in (previous or {"algos": {}})["algos"].items() if d["state"] != "adding"}
    confidence = tier_confidence(cfg, runs)
    algos = {}
    for algo in cfg["algos"]:
        phases = confidence.get(algo, {})
        unsure = {ph: c["p_tier"] for ph, c in phases.items() if c["p_tier"] < target}
        if algo in stopped:
            state, why, seeds = previous["algos"][algo]["state"], previous["algos"][algo]["why"], before[algo]
        elif not unsure:
            state, why, seeds = "settled", f"P(tier) >= {target:g} in every phase with {len(before[algo])} seeds", before[algo]
        elif len(before[algo]) >= top:
            state, why, seeds = "budget", f"seed budget ({top}) reached; P(tier) {_worst(unsure)}", before[algo]
        else:
            state, why, seeds = "adding", f"P(tier) {_worst(unsure)} < {target:g}", before[algo] + new_seeds
        algos[algo] = {"seeds": seeds, "state": state, "why": why, "confidence": phases}
    return {"round": round_no, "target": target, "max_seeds": top, "algos": algos}


def _worst(unsure: Mapping[str, float]) -> str:
    phase = min(unsure, key=unsure.get)
    return f"{unsure[phase]:.2f} in {phase}"


def write_decision(cfg: Mapping, round_no: int, summaries, previous_path: str | None, out: str,
                   log: str | None = None) -> None:
    """Round `round_no`'s decision into `out`; `log` (the rule's log) gets each algorithm's seeds."""
    from metrics import read_summaries
    from metrics.atomic import write_text

    runs = read_summaries(list(summaries)).runs
    previous = read_decision(previous_path) if previous_path else None
    decision = decide(cfg, round_no, runs, previous)
    write_text(out, json.dumps(decision, indent=1, sort_keys=True) + "\n")
    if log:
        write_text(log, f"round {round_no}: " + ", ".join(f"{algo} {len(seeds)} seeds"
                                                       for algo, seeds in seeds_of(decision).items()) + "\n")


def seed_table(cfg: Mapping, decision: Mapping | None, tiers_csv: str):
    """Per algorithm: the seeds it got and why it got no more (the final tiers' P(tier))."""
    import pandas as pd

    from metrics.safe_text import read_csv

    target, top = float(cfg["adaptive"]["target"]), int(cfg["adaptive"]["max_seeds"])
    seeds = seeds_of(decision) if decision is not None else start_seeds(cfg)
    tiers = read_csv(tiers_csv)  # algorithm names as text (NA, null stay names)
    tiers["p"] = [row[f"p_tier{int(row['tier'])}"] for _, row in tiers.iterrows()]  # P(its own tier)
    rows = []
    for algo in cfg["algos"]:
        own = tiers[tiers["algo"] == algo]
        worst = own.loc[own["p"].idxmin()] if len(own) else None
        p = float(worst["p"]) if worst is not None else float("nan")
        why = (f"P(tier) >= {target:g} in every phase" if p >= target
               else f"seed budget ({top}) reached" if len(seeds[algo]) >= top else "stopped early")
        rows.append({"algo": algo, "seeds": len(seeds[algo]), "min_p_tier": p,
                     "phase_of_min": worst["phase"] if worst is not None else "", "why": why})
    return pd.DataFrame(rows)


def write_seed_table(cfg: Mapping, decision_path_or_none: str | None, tiers_csv: str, out: str,
                     log: str | None = None) -> None:
    """The seed table into `out`; `log` (the rule's log) gets one line per algorithm."""
    from metrics.atomic import write_text

    decision = read_decision(decision_path_or_none) if decision_path_or_none else None
    table = seed_table(cfg, decision, tiers_csv)
    write_text(out, table.to_csv(index=False, float_format="%.3f"))
    if log:
        write_text(log, "".join(f"{row.algo}: {row.seeds} seeds, {row.why}\n" for row in table.itertuples()))
