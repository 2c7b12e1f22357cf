"""The run job: train packs of runs into run folders (between the learning in algos/ and the sweep in workflow/).

- `train`: the job (`python -m runs.train --spec DIR/spec.json ...`): command line, folder locks,
  signals, run folder writing, failure records, exit statuses.
- `pack`: the loop: start or resume each member, train in chunks, checkpoint, report progress,
  evaluate the final policies.
- `checkpoint`, `runlock`, `runfolder`: a run's checkpoints, its folder's lock and job marker,
  its spec, writers and completeness check; `run_layout`: the folder's names and paths (no JAX).
"""
