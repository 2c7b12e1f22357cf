"""The one YAML reader of the project (configs, presets, thresholds, references, the schema):
it refuses a mapping with a repeated key (PyYAML keeps the last value silently, so a config or
thresholds file with a key written twice would lose one of them) and aliases that expand past
MAX_NODES values (an alias bomb: a few hundred bytes that any later walk, a repr or a deepcopy,
turns into billions of values), checked on the parsed node graph before anything is built; and
reading of small text files a user names (a config or thresholds file) that ends in one line
naming the file, never a traceback or a hang."""
from __future__ import annotations

import os
import stat

import yaml

MAX_BYTES = 1 << 20  # a config or thresholds file is a few hundred bytes; past this it is the wrong file
# Values a document may hold once its aliases are expanded: a config of the paper's size holds
# a few hundred; past this it is an alias bomb (or the wrong file).
MAX_NODES = 100_000


class DuplicateKeyError(yaml.YAMLError):
    """A mapping names one key twice; the message gives the key and both lines."""


class AliasError(yaml.YAMLError):
    """Aliases expand past MAX_NODES values, or an alias refers to the value it is in."""


class FileError(ValueError):
    """A config or thresholds file cannot be read as YAML; the message names the file and why."""


class _StrictLoader(yaml.SafeLoader):
    pass


def _mapping(loader: _StrictLoader, node: yaml.MappingNode, deep: bool = False) -> dict:
    seen = {}
    for key_node, _ in node.value:
        key = loader.construct_object(key_node, deep=True)
        try:
            first = seen.get(key)
        except TypeError:  # a list or mapping as a key: yaml's own message says so
            return loader.construct_mapping(node, deep=deep)
        if first is not None:
            raise DuplicateKeyError(f"duplicate key {key!r} on line {key_node.start_mark.line + 1} "
                                    f"(first on line {first + 1})")
        seen[key] = key_node.start_mark.line
    return loader.construct_mapping(node, deep=deep)


_StrictLoader.add_constructor(yaml.resolver.BaseResolver.DEFAULT_MAPPING_TAG, _mapping)


def _check_expansion(root: yaml.Node) -> None:
    """AliasError when the document, aliases expanded, holds more than MAX_NODES values or
    refers to itself. Each distinct node is counted once (an alias is the same node object),
    so this costs the size of the text, not of the expansion."""
    size: dict = {}  # id(node) -> values below it, expanded; None while it is being counted
    stack = [(root, False)]
    while stack:
        node, children_done = stack.pop()
        key = id(node)
        if children_done:
            if isinstance(node, yaml.MappingNode):
                kids = [n for pair in node.value for n in pair]
            else:
                kids = node.value
            size[key] = 1 + sum(size[id(k)] for k in kids)
            if size[key] > MAX_NODES:
                raise AliasError(f"aliases expand to more than {MAX_NODES:,} values (an alias bomb?) at line "
                                 f"{node.start_mark.line + 1}")
            continue
        if key in size:
            if size[key] is None:
                raise AliasError(f"an alias refers to the value it is in (line {node.start_mark.line + 1})")
            continue
        if isinstance(node, yaml.ScalarNode):
            size[key] = 1
            continue
        size[key] = None
        stack.append((node, True))
        kids = [n for pair in node.value for n in pair] if isinstance(node, yaml.MappingNode) else node.value
        stack.extend((k, False) for k in kids if id(k) not in size or size[id(k)] is None)
    return None


def load(stream):
    """yaml.safe_load, but a repeated key in any mapping raises DuplicateKeyError and aliases
    that expand past MAX_NODES values (or into themselves) raise AliasError, before any value is built."""
    loader = _StrictLoader(stream)
    try:
        node = loader.get_single_node()
        if node is None:
            return None
        _check_expansion(node)
        return loader.construct_document(node)
    finally:
        loader.dispose()


def read_text(path) -> str:
    """The UTF-8 text of a small regular file; FileError naming the file otherwise (a folder, a
    FIFO or device that would block or never end, a file past MAX_BYTES, bytes that are not UTF-8)."""
    name = os.fspath(path)
    try:
        st = os.stat(name)
        if stat.S_ISDIR(st.st_mode):
            raise FileError(f"{name}: is a folder, not a file")
        if not stat.S_ISREG(st.st_mode):
            raise FileError(f"{name}: not a regular file")
        if st.st_size > MAX_BYTES:
            raise FileError(f"{name}: {st.st_size:,} bytes, more than a config file holds ({MAX_BYTES:,})")
        with open(name, "rb") as f:
            data = f.read(MAX_BYTES + 1)
    except FileError:
        raise
    except OSError as err:
        raise FileError(f"{name}: cannot read: {err.strerror or err}") from None
    except ValueError as err:  # a NUL in the path
        raise FileError(f"{name!r}: cannot read: {err}") from None
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError as err:
        raise FileError(f"{name}: not UTF-8 text (byte {err.start})") from None


def load_text(text: str, name: str):
    """`load` of a file's text; FileError naming the file with the YAML problem on one line."""
    try:
        return load(text)
    except yaml.MarkedYAMLError as err:
        raise FileError(f"{name}: not valid YAML: {_cause(err)}") from None
    except yaml.YAMLError as err:
        raise FileError(f"{name}: not valid YAML: {' '.join(str(err).split())}") from None
    except RecursionError:
        raise FileError(f"{name}: nested too deeply to be a config file") from None
    except ValueError as err:  # an integer past Python's 4300-digit conversion limit
        raise FileError(f"{name}: not a usable value: {str(err).split(';')[0]}") from None


def _cause(err: yaml.MarkedYAMLError) -> str:
    """'line L, column C: what is wrong' (PyYAML's own text names the source "<unicode string>"
    and quotes the line over three)."""
    mark = err.problem_mark or err.context_mark
    where = f"line {mark.line + 1}, column {mark.column + 1}: " if mark is not None else ""
    cause = " ".join(part for part in (err.context, err.problem) if part)
    if err.problem and "could not determine a constructor for the tag" in err.problem:
        cause += " (a config file holds plain values: tags such as !!python/object are never read)"
    return where + " ".join(cause.split())


def load_file(path) -> object:
    """The YAML content of a config file; FileError naming the file on any problem."""
    return load_text(read_text(path), os.fspath(path))
