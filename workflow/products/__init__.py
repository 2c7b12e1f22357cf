"""Tables, figures and report captions built from the metrics engine's outputs (issue 6).

Modules: `style` (one look per algorithm, phase and metric), `outputs` (atomic writes of
figures and tables), `tables` (Table 2, A.2, A.3 and the per-task tables), the figure
modules (`fig_final`, `fig_cdf`, `fig_training`, `fig_sensitivity`) and `inputs` (reading
the metrics stage outputs). The Snakemake scripts in workflow/scripts/ are thin wrappers.
"""
