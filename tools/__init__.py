"""Tools around the tasks that do not decide a run's result: they live outside envs/, so an edit
here does not change `algos.programs.code_version` (which hashes algos/, envs/ and recorders/ only).

    python -m tools.render TASK --out FILE.png        a task's layout and a short random rollout
    python -m tools.fidelity --reference tools/fidelity_reference.npz
                                                      the built-in tasks against the stored CRAX reference

`tools` may import every package below it (envs, algos, metrics); nothing imports `tools`.
See docs/envs.md.
"""
