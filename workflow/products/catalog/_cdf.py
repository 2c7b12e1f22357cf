"""What Figure 2 and Figure A.1 share: both draw cdf.parquet, each up to its own x limit
(`products.cdf_xmax.<its name>`)."""
from workflow.products.settings import positive_number
from workflow.products.outputs import save_figure
from workflow.products.sweep_io import apply_settings


def cdf_figure(name: str):
    """(inputs, check, build) of the CDF figure whose x limit is products.cdf_xmax.<name>."""
    def inputs(files, wildcards):
        return {"cdf": files.aggregate["cdf"]}

    def check(settings):
        positive_number(settings["cdf_xmax"][name], f"cdf_xmax.{name}")

    def build(inputs, outputs, settings, wildcards):
        import pandas as pd

        from workflow.products import fig_cdf

        apply_settings(settings)
        xmax = float(settings["cdf_xmax"][name])
        save_figure(fig_cdf.figure_cdf(pd.read_parquet(inputs["cdf"]), xmax=xmax), outputs, settings)

    return inputs, check, build
