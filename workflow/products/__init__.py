"""Tables, figures and report captions built from the metrics engine's outputs (issue 6).

Modules: `style` (one look per algorithm, phase and tier), `settings` (the `products`
config), `outputs` (atomic writes), `tablefmt` (Markdown/LaTeX/HTML renderers), `tables`
(Table 2, A.2, A.3 and the per-task tables), the figure modules `fig_final` (Figure 1, A.7+),
`fig_cdf` (Figure 2, A.1), `fig_training` (A.2, A.3+) and `fig_sensitivity`, `build` (one
function per product: read files, draw, write) and `synthetic` (a small sweep for tests).
The Snakemake scripts in workflow/scripts/ are thin wrappers around `build`.
"""
