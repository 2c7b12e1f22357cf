"""Checkpoints without pickle: the training state's leaves in one .npz plus JSON metadata.

The state pytree is flattened in JAX's deterministic leaf order; typed PRNG keys are stored as
their raw key data. Loading needs a template of the same structure (from `jax.eval_shape` of
the init program) and checks every leaf's shape and dtype, so a checkpoint from another config
is refused with a clear error. Both files are written to temporary names in the same folder and
renamed into place; the metadata goes last and names the array file it belongs to.
"""
from __future__ import annotations

import json
import os

import jax
import numpy as np

from metrics.atomic import atomic_path

ARRAYS = "state-{n}.npz"
META = "checkpoint.json"


def _is_key(x) -> bool:
    return jax.dtypes.issubdtype(x.dtype, jax.dtypes.prng_key)


def _atomic_write(folder: str, name: str, write) -> None:
    with atomic_path(os.path.join(folder, name)) as tmp, open(tmp, "wb") as f:
        write(f)
        f.flush()
        os.fsync(f.fileno())  # a checkpoint must survive the node going down right after


def save(folder: str, state, host: dict[str, np.ndarray], meta: dict) -> str:
    """Write state leaves, host-side arrays and metadata; returns the metadata path."""
    os.makedirs(folder, exist_ok=True)
    leaves = jax.tree_util.tree_leaves(jax.device_get(state))
    arrays = {}
    key_impls = {}
    for i, leaf in enumerate(leaves):
        if _is_key(leaf):
            key_impls[str(i)] = str(jax.random.key_impl(leaf))
            leaf = jax.random.key_data(leaf)
        arrays[f"leaf{i}"] = np.asarray(leaf)
    for name, value in host.items():
        arrays[f"host_{name}"] = np.asarray(value)
    previous = load_meta(folder)
    n = 0 if previous is None else (previous["generation"] + 1)
    array_name = ARRAYS.format(n=n % 2)  # alternate two files so the previous one stays valid until the switch
    _atomic_write(folder, array_name, lambda f: np.savez(f, **arrays))
    meta = dict(meta, generation=n, arrays=array_name, num_leaves=len(leaves), key_impls=key_impls,
                host=sorted(host))
    _atomic_write(folder, META, lambda f: f.write(json.dumps(meta, indent=1, sort_keys=True).encode()))
    return os.path.join(folder, META)


def load_meta(folder: str) -> dict | None:
    path = os.path.join(folder, META)
    if not os.path.exists(path):
        return None
    with open(path) as f:
        try:
            return json.load(f)
        except json.JSONDecodeError as err:
            raise ValueError(f"{path}: not valid JSON ({err}); delete the checkpoint folder to start over") from None


def load(folder: str, template):
    """(state, host arrays, metadata) from `folder`; `template` is a pytree of ShapeDtypeStructs."""
    meta = load_meta(folder)
    if meta is None:
        raise FileNotFoundError(f"{os.path.join(folder, META)}: no checkpoint")
    path = os.path.join(folder, meta["arrays"])
    leaves_template, treedef = jax.tree_util.tree_flatten(template)
    if meta["num_leaves"] != len(leaves_template):
        raise ValueError(f"{path}: checkpoint has {meta['num_leaves']} state leaves, this config needs "
                         f"{len(leaves_template)}; it was written by a different configuration")
    leaves = []
    with np.load(path, allow_pickle=False) as data:
        for i, want in enumerate(leaves_template):
            value = data[f"leaf{i}"]
            if str(i) in meta["key_impls"]:
                value = jax.random.wrap_key_data(value, impl=meta["key_impls"][str(i)])
            if value.shape != want.shape or value.dtype != want.dtype:
                raise ValueError(f"{path}: leaf {i} has shape {value.shape} dtype {value.dtype}, expected "
                                 f"{want.shape} {want.dtype}; it was written by a different configuration")
            leaves.append(value)
        host = {name: data[f"host_{name}"] for name in meta["host"]}
    return jax.tree_util.tree_unflatten(treedef, leaves), host, meta
