"""Snakemake script of rule write_thresholds (workflow/rules/metrics.smk): the sweep's
configured thresholds as the YAML file the tiers step reads."""
import yaml

from metrics.atomic import write_text
from workflow import scriptlog

with scriptlog.to_log(snakemake):  # noqa: F821
    write_text(snakemake.output[0], yaml.safe_dump(dict(snakemake.params.thresholds), sort_keys=False))  # noqa: F821
    print(f"wrote {snakemake.output[0]}")  # noqa: F821
