"""Snakemake script of rule report (workflow/rules/report.smk): the sweep's report page with the
paper's findings checked on the sweep (metrics.findings)."""
import pandas as pd

from metrics.findings import findings
from metrics.safe_text import read_csv
from metrics.thresholds import load_thresholds
from workflow import scriptlog
from workflow.report import write_report

smk = snakemake  # noqa: F821
with scriptlog.to_log(smk):
    config = smk.params.config
    found = findings(read_csv(smk.input.tiers), pd.read_parquet(smk.input.run_metrics), read_csv(smk.input.iqm),
                     load_thresholds(smk.input.thresholds), unconstrained=[smk.params.baseline],
                     reps=config["bootstrap"]["reps"], seed=config["bootstrap"]["seed"])
    write_report(smk.output[0], config=config, iqm=smk.input.iqm, tiers=smk.input.tiers,
                 conditions=smk.input.conditions, products=list(smk.input.products), findings=found,
                 settings=smk.params.settings)
    print(f"wrote {smk.output[0]}: {len(list(smk.input.products))} tables and figures")
