"""YAML loading that remembers where every key and item came from.

Profile errors must name file, line and key. PyYAML throws positions away once it has
built Python objects, so this loader builds dict/list subclasses that carry the line of
each key (and of each list item) alongside the values, and refuses duplicate keys, which
plain PyYAML silently lets the last one win.
"""

from __future__ import annotations

import re
from typing import Any

import yaml


class LocatedDict(dict):  # type: ignore[type-arg]
    """A mapping that knows the 1-based line of itself and of each of its keys."""

    line: int = 0
    key_lines: dict[Any, int]

    def line_of(self, key: Any) -> int:
        return self.key_lines.get(key, self.line)


class LocatedList(list):  # type: ignore[type-arg]
    line: int = 0
    item_lines: list[int]

    def line_of(self, index: int) -> int:
        if 0 <= index < len(self.item_lines):
            return self.item_lines[index]
        return self.line


class DuplicateKeyError(yaml.MarkedYAMLError):
    pass


class _Loader(yaml.SafeLoader):
    def construct_mapping(self, node: yaml.MappingNode, deep: bool = False) -> LocatedDict:  # type: ignore[override]
        self.flatten_mapping(node)
        result = LocatedDict()
        result.line = node.start_mark.line + 1
        result.key_lines = {}
        for key_node, value_node in node.value:
            key = self.construct_object(key_node, deep=True)
            try:
                hash(key)
            except TypeError:
                raise yaml.constructor.ConstructorError(
                    "while constructing a mapping", node.start_mark,
                    "found an unhashable key", key_node.start_mark) from None
            if key in result.key_lines:
                raise DuplicateKeyError(
                    None, None, f"duplicate key {key!r}", key_node.start_mark)
            result[key] = self.construct_object(value_node, deep=True)
            result.key_lines[key] = key_node.start_mark.line + 1
        return result

    def construct_sequence(self, node: yaml.SequenceNode, deep: bool = False) -> LocatedList:  # type: ignore[override]
        result = LocatedList(self.construct_object(child, deep=True) for child in node.value)
        result.line = node.start_mark.line + 1
        result.item_lines = [child.start_mark.line + 1 for child in node.value]
        return result


def _mapping(loader: _Loader, node: yaml.MappingNode) -> LocatedDict:
    return loader.construct_mapping(node, deep=True)


def _sequence(loader: _Loader, node: yaml.SequenceNode) -> LocatedList:
    return loader.construct_sequence(node, deep=True)


# YAML 1.2 reads `1e-6` as a number; PyYAML (YAML 1.1) as a string. Profiles copy
# values like `optim.lr: 1e-6` from shell scripts, where the user means a number.
_Loader.add_implicit_resolver(
    "tag:yaml.org,2002:float",
    re.compile(r"^[-+]?(?:[0-9][0-9_]*)(?:\.[0-9_]*)?[eE][-+]?[0-9]+$"),
    list("-+0123456789"),
)
_Loader.add_constructor(yaml.resolver.BaseResolver.DEFAULT_MAPPING_TAG, _mapping)
_Loader.add_constructor(yaml.resolver.BaseResolver.DEFAULT_SEQUENCE_TAG, _sequence)


def load_located(text: str) -> Any:
    """Parse YAML text into LocatedDict/LocatedList trees. Raises yaml.YAMLError."""
    return yaml.load(text, Loader=_Loader)  # noqa: S506 - SafeLoader subclass
