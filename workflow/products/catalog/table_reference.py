"""The sweep beside the reference shipped for its preset (metrics/references/), as a table."""
from workflow.products.registry import ALL_PHASES, Product, TABLE


def inputs(files, wildcards):
    from metrics.reference import shipped_path

    reference = shipped_path(files.preset) if files.preset else None
    found = {"reference": str(reference)} if reference is not None and reference.exists() else {}
    # what compare reads beside iqm.csv and tiers.csv: the Dnorm+ definition and the grid, and
    # the files it recomputes Dnorm+ and tiers from when the reference's definition differs
    more = {name: files.aggregate[name] for name in ("aggregate", "run_metrics", "iterates", "final_episodes")
            if name in files.aggregate}
    more.update({"conditions": files.tiers["conditions"]} if "conditions" in files.tiers else {})
    more.update({"thresholds": files.thresholds} if files.thresholds else {})
    return {"iqm": files.aggregate["iqm"], "tiers": files.tiers["tiers"], **(dict(found, **more) if found else {})}


def build(inputs, outputs, settings, wildcards):
    from workflow.products.reference_view import read_comparison, reference_table
    from workflow.products.sweep_io import save

    ref, got, tiers = read_comparison(inputs)
    return save(reference_table(ref, got, tiers), outputs)


CAPTION = """
**Is this sweep normal? Its results beside the reference shipped for its preset** (the `paper` preset's is the
paper's published values; the built-in presets' are our own reference sweeps, each stamped with the code
version that made it; without one the table says so).

- Per phase and algorithm, for each metric the reference gives: this sweep's IQM over (task, bound)
  conditions with its 95 % stratified-bootstrap interval, and the reference's value; **bold** where the
  reference lies outside the interval.
- The tier on each side (this sweep's with P(tier), the share of bootstrap replicates in it); **bold** where
  they differ. The notes carry the reference's source and any known caveat.
"""

PRODUCT = Product(kind=TABLE, category=ALL_PHASES, caption=CAPTION, inputs=inputs, build=build)
