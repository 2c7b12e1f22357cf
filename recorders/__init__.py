"""Episode recorders: write the episode table the metrics engine reads from any framework's loop.

- :mod:`recorders.writer`: :class:`EpisodeWriter`, one run's crash-safe folder (numpy and
  pyarrow only);
- :mod:`recorders.gym`: Gymnasium-style wrappers (single and vector envs) and the final
  evaluation of a Gymnasium policy (needs the ``gym`` extra: ``pip install -e ".[gym]"``;
  Gymnasium 0.28, 0.29 or 1.x);
- :mod:`recorders.jax_recorder`: the pure recorder step for JAX loops (jit/vmap/scan), its
  host-side drain and the final evaluation of a JAX policy;
- :mod:`recorders.gymnax`: the same for envs with gymnax's interface (gymnax, safenax): their
  step's output read, episodes summed and recorded, their final evaluation.

docs/byo.md walks through one example of each.
"""
from .writer import EpisodeWriter, RecorderError, RecorderWarning

__all__ = ["EpisodeWriter", "RecorderError", "RecorderWarning"]
