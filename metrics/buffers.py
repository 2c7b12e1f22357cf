"""Large temporary arrays from Arrow's memory pool.

numpy takes each large array afresh from the operating system and returns it when freed, so
every use of a temporary pays page faults: summarising a sweep spent as much time in the
kernel as computing. Arrow's memory pool keeps freed memory for the next request.
"""

import numpy as np
import pyarrow as pa


def empty(n: int, dtype) -> np.ndarray:
    """An uninitialised, writable 1-D array of n values, freed back to Arrow's pool."""
    dtype = np.dtype(dtype)
    return np.frombuffer(pa.allocate_buffer(n * dtype.itemsize), dtype)
