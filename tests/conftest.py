import os

# Tests run on the CPU and share one persistent compilation cache so that repeated
# runs (and CI reruns on the same machine) do not pay XLA compile time again.
os.environ.setdefault("JAX_PLATFORMS", "cpu")
os.environ.setdefault("JAX_COMPILATION_CACHE_DIR", os.path.join(os.path.dirname(__file__), "..", ".jax_cache"))
