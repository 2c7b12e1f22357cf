"""YAML reading that refuses a mapping with a repeated key (PyYAML keeps the last value
silently, so a config or thresholds file with a key written twice would lose one of them)."""
from __future__ import annotations

import yaml


class DuplicateKeyError(yaml.YAMLError):
    """A mapping names one key twice; the message gives the key and both lines."""


class _StrictLoader(yaml.SafeLoader):
    pass


def _mapping(loader: _StrictLoader, node: yaml.MappingNode, deep: bool = False) -> dict:
    seen = {}
    for key_node, _ in node.value:
        key = loader.construct_object(key_node, deep=True)
        if key in seen:
            raise DuplicateKeyError(f"duplicate key {key!r} on line {key_node.start_mark.line + 1} "
                                    f"(first on line {seen[key] + 1})")
        seen[key] = key_node.start_mark.line
    return loader.construct_mapping(node, deep=deep)


_StrictLoader.add_constructor(yaml.resolver.BaseResolver.DEFAULT_MAPPING_TAG, _mapping)


def load(stream):
    """yaml.safe_load, but a repeated key in any mapping raises DuplicateKeyError."""
    return yaml.load(stream, Loader=_StrictLoader)


def load_file(path) -> object:
    with open(path, encoding="utf-8") as f:
        return load(f)
