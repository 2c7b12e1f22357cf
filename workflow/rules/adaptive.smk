# Adaptive seeds (config `adaptive`, workflow/adaptive.py): round r's decision is a checkpoint
# that reads the summaries of every run so far and gives round r's seeds to the algorithms
# whose tier is not yet sure; the aggregation asks for the runs the last decision chose
# (common.smk: selected_run_ids). Decisions are light: they run in the controller. Both rules
# call workflow.adaptive with the validated config (CFG), so they stay one-line `run:` blocks.

if adaptive.enabled(CFG):

    checkpoint seed_round:
        localrule: True
        input:
            summaries=lambda wildcards: [run_path(run_layout.SUMMARY, **r)
                                         for r in run_ids_of(decided_seeds(int(wildcards.round) - 1))],
            previous=lambda wildcards: [adaptive.decision_path(int(wildcards.round) - 1, RESULTS_DIR)]
            if int(wildcards.round) > 1 else [],
        output:
            f"{adaptive.decisions_dir(RESULTS_DIR)}/round{{round}}.json",
        wildcard_constraints:
            round="[1-9][0-9]*",
        log:
            f"{LOGS_DIR}/seeds/round{{round}}.log",
        run:
            adaptive.write_decision(CFG, int(wildcards.round), input.summaries,
                                    input.previous[0] if input.previous else None, output[0], log=log[0])

    rule seed_table:
        """Per algorithm: how many seeds it got and why no more (the report shows it)."""
        localrule: True
        input:
            decision=[adaptive.decision_path(LAST_ROUND, RESULTS_DIR)] if LAST_ROUND > 0 else [],
            tiers=TIER_FILES["tiers"],
        output:
            adaptive.seed_table_path(RESULTS_DIR),
        log:
            f"{LOGS_DIR}/seeds/table.log",
        run:
            adaptive.write_seed_table(CFG, input.decision[0] if input.decision else None, input.tiers, output[0],
                                      log=log[0])

    PRODUCT_TARGETS.append(adaptive.seed_table_path(RESULTS_DIR))
