"""Checkpoints without pickle: the training state's leaves in one .npz plus JSON metadata.

The state pytree is flattened in JAX's deterministic leaf order; typed PRNG keys are stored as
their raw key data. Loading needs a template of the same structure (from `jax.eval_shape` of
the init program) and checks every leaf's shape and dtype, so a checkpoint from another config
is refused with a clear error.

Two generations are kept, in two slots (`state-0.npz` + `state-0.json`, `state-1.npz` +
`state-1.json`); a save overwrites the older slot, array file first, metadata last, each
written to a temporary name, fsynced and renamed into place. Loading takes the newest
generation that reads back whole and falls back to the previous one when the newest is
truncated, zeroed or deleted (saying so); when none is usable the error names the folder and
the remedy. `inspect` answers the same question without JAX, for `workflow.status`.
"""
from __future__ import annotations

import json
import os
import zipfile
from typing import NamedTuple

import numpy as np

from metrics.atomic import atomic_path

ARRAYS = "state-{slot}.npz"
META = "state-{slot}.json"
LEGACY_META = "checkpoint.json"  # one-slot metadata of earlier versions, still read
SLOTS = (0, 1)
_READ_ERRORS = (OSError, ValueError, KeyError, EOFError, zipfile.BadZipFile)


class CheckpointError(ValueError):
    """No checkpoint generation in the folder can be resumed; the message says what to do."""


def identity_of(config) -> dict:
    """The config fields a checkpoint must match to be resumed (everything that shapes the run:
    not the scalars of other algorithms, algos.config.foreign_fields)."""
    from algos.config import foreign_fields

    from algos.config import NOT_IDENTITY

    foreign = foreign_fields(config.algo)
    return {k: v for k, v in config.to_dict().items() if k not in NOT_IDENTITY and k not in foreign}


def _is_key(x) -> bool:
    import jax

    return jax.dtypes.issubdtype(x.dtype, jax.dtypes.prng_key)


def _atomic_write(folder: str, name: str, write) -> None:
    with atomic_path(os.path.join(folder, name)) as tmp, open(tmp, "wb") as f:
        write(f)
        f.flush()
        os.fsync(f.fileno())  # a checkpoint must survive the node going down right after


def _read_metas(folder: str) -> tuple[list[dict], list[str]]:
    """(readable metadata newest generation first, problems with unreadable ones)."""
    metas, problems = [], []
    for name in [META.format(slot=s) for s in SLOTS] + [LEGACY_META]:
        path = os.path.join(folder, name)
        if not os.path.exists(path):
            continue
        try:
            with open(path) as f:
                meta = json.load(f)
            int(meta["generation"]), str(meta["arrays"])
        except (*_READ_ERRORS, TypeError) as err:
            problems.append(f"{name}: unreadable ({type(err).__name__})")
            continue
        metas.append(meta)
    metas.sort(key=lambda m: -int(m["generation"]))
    return metas, problems


def exists(folder: str) -> bool:
    """Whether the folder holds any checkpoint file (usable or not)."""
    return os.path.isdir(folder) and any(
        os.path.exists(os.path.join(folder, n)) for n in
        [META.format(slot=s) for s in SLOTS] + [ARRAYS.format(slot=s) for s in SLOTS] + [LEGACY_META])


def save(folder: str, state, host: dict[str, np.ndarray], meta: dict, keep: str | None = None) -> dict:
    """Write state leaves, host-side arrays and metadata; returns the metadata written.

    `keep` names the array file of the generation to preserve (the one resumed from, or the
    last one saved); the other slot is overwritten. Default: the newest generation's.
    """
    import jax

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
    metas, _ = _read_metas(folder)
    n = int(metas[0]["generation"]) + 1 if metas else 0
    keep = keep if keep is not None else (metas[0]["arrays"] if metas else None)
    # the kept generation stays valid until this one is whole
    slot = next(s for s in SLOTS if ARRAYS.format(slot=s) != keep)
    array_name = ARRAYS.format(slot=slot)
    _atomic_write(folder, array_name, lambda f: np.savez(f, **arrays))
    meta = dict(meta, generation=n, arrays=array_name, num_leaves=len(leaves), key_impls=key_impls,
                host=sorted(host))
    meta_name = META.format(slot=slot)
    _atomic_write(folder, meta_name, lambda f: f.write(json.dumps(meta, indent=1, sort_keys=True).encode()))
    if os.path.exists(os.path.join(folder, LEGACY_META)):
        os.remove(os.path.join(folder, LEGACY_META))
    return meta


def _check_arrays(folder: str, meta: dict) -> None:
    """Raise when the generation's array file is missing, truncated, corrupt or incomplete."""
    path = os.path.join(folder, meta["arrays"])
    with zipfile.ZipFile(path) as z:
        bad = z.testzip()  # reads every member and checks its CRC
        if bad is not None:
            raise ValueError(f"member {bad} is corrupt")
        names = set(z.namelist())
    want = {f"leaf{i}.npy" for i in range(int(meta["num_leaves"]))} | {f"host_{h}.npy" for h in meta["host"]}
    if not want <= names:
        raise ValueError(f"{len(want - names)} arrays missing")


def _config_difference(meta: dict, identity: dict) -> list[str]:
    from algos.config import recorded_with_defaults
    from algos.config import foreign_fields

    # a field added to TrainConfig since the checkpoint was written counts at its default
    recorded = recorded_with_defaults(meta.get("config", {}), identity)
    foreign = foreign_fields(identity.get("algo", recorded.get("algo")))
    return sorted(k for k in set(identity) | set(recorded) if k not in foreign and recorded.get(k) != identity.get(k))


def _different_config(folder: str, fields: list[str]) -> CheckpointError:
    return CheckpointError(
        f"{folder}: checkpoint was written with a different config (fields {fields}); rerun with the "
        f"arguments that wrote it, or delete {folder} to train this run from the start")


def _none_usable(folder: str, problems: list[str]) -> CheckpointError:
    return CheckpointError(f"{folder}: no usable checkpoint ({'; '.join(problems) or 'no metadata'}); "
                           f"delete {folder} to train this run from the start")


class Inspection(NamedTuple):
    usable: bool  # a generation can be resumed
    fallback: bool  # it is not the newest: the newest is unreadable
    detail: str  # one line for people


def inspect(folder: str, identity: dict | None = None) -> Inspection:
    """What a resume from `folder` would do, without JAX (the array shapes are checked by `load`)."""
    metas, problems = _read_metas(folder)
    for i, meta in enumerate(metas):
        try:
            _check_arrays(folder, meta)
        except _READ_ERRORS as err:
            problems.append(f"generation {meta['generation']} ({meta['arrays']}): {type(err).__name__}: {err}")
            continue
        if identity is not None:
            fields = _config_difference(meta, identity)
            if fields:
                return Inspection(False, False, str(_different_config(folder, fields)))
        fallback = i > 0 or bool(problems)
        text = (f"checkpoint generation {meta['generation']} usable"
                + (f" (newer one unreadable: {'; '.join(problems)})" if fallback else "")
                + "; the rerun resumes from it")
        return Inspection(True, fallback, text)
    return Inspection(False, False, str(_none_usable(folder, problems)))


def _load_generation(folder: str, meta: dict, template):
    import jax

    path = os.path.join(folder, meta["arrays"])
    leaves_template, treedef = jax.tree_util.tree_flatten(template)
    if meta["num_leaves"] != len(leaves_template):
        raise CheckpointError(f"{path}: checkpoint has {meta['num_leaves']} state leaves, this config needs "
                              f"{len(leaves_template)}; it was written by a different configuration; "
                              f"delete {folder} to train this run from the start")
    _check_arrays(folder, meta)
    leaves = []
    with np.load(path, allow_pickle=False) as data:
        for i, want in enumerate(leaves_template):
            value = data[f"leaf{i}"]
            if str(i) in meta["key_impls"]:
                value = jax.random.wrap_key_data(value, impl=meta["key_impls"][str(i)])
            if value.shape != want.shape or value.dtype != want.dtype:
                raise CheckpointError(f"{path}: leaf {i} has shape {value.shape} dtype {value.dtype}, expected "
                                      f"{want.shape} {want.dtype}; it was written by a different configuration; "
                                      f"delete {folder} to train this run from the start")
            leaves.append(value)
        host = {name: data[f"host_{name}"] for name in meta["host"]}
    return jax.tree_util.tree_unflatten(treedef, leaves), host


def load_meta(folder: str) -> dict | None:
    """Metadata of the newest readable generation, or None when there is none."""
    metas, _ = _read_metas(folder)
    return metas[0] if metas else None


def load(folder: str, template, identity: dict | None = None, warn=None):
    """(state, host arrays, metadata) of the newest usable generation in `folder`.

    `template` is a pytree of ShapeDtypeStructs; `identity` (identity_of(config)) must equal
    the recorded config; `warn(text)` hears about a fallback to the previous generation.
    Raises CheckpointError naming the folder and the remedy when no generation is usable.
    """
    metas, problems = _read_metas(folder)
    for meta in metas:
        if identity is not None:
            fields = _config_difference(meta, identity)
            if fields:
                raise _different_config(folder, fields)
        try:
            state, host = _load_generation(folder, meta, template)
        except CheckpointError:
            raise
        except _READ_ERRORS as err:
            problems.append(f"generation {meta['generation']} ({meta['arrays']}): {type(err).__name__}: {err}")
            continue
        if problems and warn is not None:
            warn(f"{folder}: newest checkpoint unusable ({'; '.join(problems)}); "
                 f"resuming from the previous one, generation {meta['generation']}")
        return state, host, meta
    raise _none_usable(folder, problems)
