"""The Snakemake sweep: helper code used by the rules and the cluster launcher."""
