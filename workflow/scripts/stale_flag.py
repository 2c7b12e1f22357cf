"""Snakemake script of rule stale_run (workflow/rules/train.smk): the flag of a pending run
whose run.json exists, saying why it retrains (its pack's training job waits for it)."""
from metrics.atomic import write_text
from workflow import packs, scriptlog

with scriptlog.to_log(snakemake):  # noqa: F821
    run, folder, spec = snakemake.params.run, snakemake.params.folder, snakemake.params.spec  # noqa: F821
    reason = packs.pending_reason(folder, spec)
    write_text(snakemake.output[0], f"{run}: {reason or 'complete now'}\n")  # noqa: F821
    print(f"{run}: {reason or 'complete now'}")
