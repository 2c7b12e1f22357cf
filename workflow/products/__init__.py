"""Tables, figures and report captions built from the metrics engine's outputs.

`registry` holds the product table (one entry per table or figure; the Snakemake rules,
PRODUCT_TARGETS and the report entries are derived from it) and `build` one function per
product (read files, draw or tabulate, write). The rest: `style` (one look per algorithm,
phase and tier), `settings` (the `products` config), `outputs` (atomic writes), `tablefmt`
(Markdown/LaTeX/HTML renderers), `tables` (Table 2, A.2, A.3, the per-task tables),
`setup_tables` (Table 1, Table A.1), the figure modules `fig_final` (Figure 1, A.7+),
`fig_cdf` (Figure 2, A.1), `fig_training` (A.2, A.3+) and `fig_sensitivity`, and `synthetic`
(a small sweep for tests). docs/products.md describes every product.
"""
