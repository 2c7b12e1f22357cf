"""The product table: one module per table or figure (workflow/products/registry.py reads them).

A new product is one new module here, named as its Snakemake rule, that defines

    def inputs(files, wildcards): ...          # {name: path or paths} from registry.SweepFiles
    def build(inputs, outputs, settings, wildcards): ...   # read, draw or tabulate, write
    CAPTION = \"\"\"...\"\"\"                          # reStructuredText for the report
    PRODUCT = Product(kind=FIGURE, category=ALL_PHASES, caption=CAPTION, inputs=inputs,
                      build=build, settings={"my_setting": 1})   # own settings with defaults

Its rule, its targets in `all`, its report entry and caption file and its `products.*`
settings follow from that. Keep the module's top-level imports light (the workflow imports
every module when it reads the table): import pandas, matplotlib and the drawing helpers
inside `build`. Modules whose names start with "_" are not products.
"""
