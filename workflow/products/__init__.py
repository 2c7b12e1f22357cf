"""Tables, figures and report captions built from the metrics engine's outputs.

`catalog/` holds the product table: one module per table or figure (what it reads, how it is
built, its caption and settings), which `registry` discovers; the Snakemake rules,
PRODUCT_TARGETS, the report entries and the settings' defaults are derived from it. The
helpers the modules share: `sweep_io` (reading runs and traces, writing tables), `style` (one
look per algorithm, phase and tier; labels from the algorithm and task tables), `settings`
(the `products` config), `outputs` (atomic writes), `tablefmt` (Markdown/LaTeX/HTML),
`tables` (Table 2, A.2, A.3, the per-task tables), `setup_tables` (Table 1, Table A.1), the
drawing modules `fig_final` (Figure 1, A.7+), `fig_cdf` (Figure 2, A.1), `fig_training` (A.2,
A.3+) and `fig_sensitivity`, and `synthetic` (a small sweep for tests). docs/products.md
describes every product.
"""
