"""YAML loading that remembers where every key and item came from.

Profile errors must name file, line and key. PyYAML throws positions away once it has
built Python objects, so this loader builds dict/list subclasses that carry the line of
each key (and of each list item) alongside the values, and refuses duplicate keys, which
plain PyYAML silently lets the last one win.
"""

from __future__ import annotations

import re
from typing import TYPE_CHECKING, Any

import yaml


class LocatedDict(dict):
    """A mapping that knows the 1-based line of itself and of each of its keys."""

    line: int = 0
    key_lines: dict[Any, int]

    def line_of(self, key: Any) -> int:
        return self.key_lines.get(key, self.line)


class LocatedList(list):
    line: int = 0
    item_lines: list[int]

    def line_of(self, index: int) -> int:
        if 0 <= index < len(self.item_lines):
            return self.item_lines[index]
        return self.line


class DuplicateKeyError(yaml.MarkedYAMLError):
    pass


class LimitError(yaml.MarkedYAMLError):
    """A document past one of the loader's size limits. `key` is the dotted path of the
    offending value (as profile errors print it), so the user is told where to look."""

    def __init__(self, problem: str, mark: Any, key: str | None) -> None:
        super().__init__(None, None, problem, mark)
        self.key = key


# Limits that keep a hostile or broken profile from running the loader away. A real
# profile nests 6 levels, holds a few hundred values and no integer past 20 digits.
MAX_DEPTH = 64
MAX_NODES = 100_000  # values after expanding aliases (a billion-laughs tree is refused)
MAX_INT_DIGITS = 100  # Python refuses str->int past 4300 digits with a bare ValueError

_INT_TAG = "tag:yaml.org,2002:int"


_CParser: Any
try:
    from yaml.cyaml import CParser as _CParser  # type: ignore[attr-defined]
except ImportError:  # pragma: no cover - PyYAML built without libyaml
    _CParser = None

# The mixin below is typed as a SafeLoader (what it extends); at run time it is a plain
# mixin in front of either parser.
_MixinBase: Any = yaml.SafeLoader if TYPE_CHECKING else object

_FastBase: Any
if _CParser is not None:
    class _CBase(yaml.composer.Composer, _CParser, yaml.constructor.SafeConstructor, yaml.resolver.Resolver):
        """libyaml's scanner and parser (C), with PyYAML's own composer on top: the
        composer is where the limits below are checked, and a 64-node profile loads
        about 5x faster than with the pure-Python scanner (`status --json` reads one
        cold). Events, marks and errors are the same types either way."""

        def __init__(self, stream: str) -> None:
            _CParser.__init__(self, stream)
            yaml.composer.Composer.__init__(self)
            yaml.constructor.SafeConstructor.__init__(self)
            yaml.resolver.Resolver.__init__(self)
    _FastBase = _CBase
else:  # pragma: no cover - PyYAML built without libyaml
    _FastBase = yaml.SafeLoader


class _Located(_MixinBase):
    """What both loaders add: the limits, checked while composing, and positions."""

    def __init__(self, stream: str) -> None:
        super().__init__(stream)
        self._path: list[str] = []
        self._sizes: dict[int, int] = {}

    def _key_path(self) -> str | None:
        parts = self._path
        if len(parts) > 8:  # a runaway nesting: its start and end say where
            parts = parts[:4] + ["..."] + parts[-2:]
        out = ""
        for part in parts:
            out += part if part.startswith("[") or not out else "." + part
        return out or None

    def compose_node(self, parent: Any, index: Any) -> Any:
        """Compose with a depth limit, an expanded-size limit and an integer-length
        limit, all checked while composing (before any Python object is built), each
        naming the key path where the limit was passed."""
        if isinstance(index, yaml.ScalarNode):
            part = str(index.value)
        elif isinstance(index, int) and not isinstance(index, bool):
            part = f"[{index}]"
        else:
            part = "?" if isinstance(parent, yaml.MappingNode) else ""
        if part:
            self._path.append(part[:80])
        try:
            if len(self._path) > MAX_DEPTH:
                raise LimitError(f"nested deeper than {MAX_DEPTH} levels",
                                 self.peek_event().start_mark, self._key_path())
            node = super().compose_node(parent, index)
            self._check(node)
            return node
        finally:
            if part:
                self._path.pop()

    def _check(self, node: Any) -> None:
        """Size of `node` once aliases are expanded; each node is sized once (aliases
        share the anchor's node), so this is linear in the file however it expands."""
        if id(node) in self._sizes:
            return
        if isinstance(node, yaml.ScalarNode):
            size = 1
            if node.tag == _INT_TAG:
                # every digit of any base: `0x` + 20,000 hex digits is an integer of 24,000
                # decimal ones (only its decimal digits were counted: none)
                digits = sum(ch.isalnum() for ch in str(node.value).lower().replace("0x", "", 1)
                             .replace("0o", "", 1).replace("0b", "", 1))
                if digits > MAX_INT_DIGITS:
                    raise LimitError(f"an integer of {digits} digits (at most {MAX_INT_DIGITS})",
                                     node.start_mark, self._key_path())
        elif isinstance(node, yaml.SequenceNode):
            size = 1 + sum(self._sizes.get(id(c), 1) for c in node.value)
        else:
            size = 1 + sum(self._sizes.get(id(k), 1) + self._sizes.get(id(v), 1) for k, v in node.value)
        if size > MAX_NODES:
            raise LimitError(f"more than {MAX_NODES} values once aliases are expanded "
                             "(an alias tree that multiplies)", node.start_mark, self._key_path())
        self._sizes[id(node)] = size

    def construct_mapping(self, node: yaml.MappingNode, deep: bool = False) -> LocatedDict:
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

    def construct_sequence(self, node: yaml.SequenceNode, deep: bool = False) -> LocatedList:
        result = LocatedList(self.construct_object(child, deep=True) for child in node.value)
        result.line = node.start_mark.line + 1
        result.item_lines = [child.start_mark.line + 1 for child in node.value]
        return result


class _Loader(_Located, _FastBase):
    """The loader profiles are read with (libyaml's parser when PyYAML has it)."""


class _PyLoader(_Located, yaml.SafeLoader):
    """The pure-Python parser: only for input libyaml refuses for its own nesting limit
    (1000 levels, met while it scans ahead), so that our limit is reported with the key
    path where it was passed, as it is for every other input."""


def _mapping(loader: Any, node: yaml.MappingNode) -> LocatedDict:
    return loader.construct_mapping(node, deep=True)


def _sequence(loader: Any, node: yaml.SequenceNode) -> LocatedList:
    return loader.construct_sequence(node, deep=True)


for _cls in (_Loader, _PyLoader):
    # YAML 1.2 reads `1e-6` as a number; PyYAML (YAML 1.1) as a string. Profiles copy
    # values like `optim.lr: 1e-6` from shell scripts, where the user means a number.
    _cls.add_implicit_resolver(
        "tag:yaml.org,2002:float",
        re.compile(r"^[-+]?(?:[0-9][0-9_]*)(?:\.[0-9_]*)?[eE][-+]?[0-9]+$"),
        list("-+0123456789"),
    )
    _cls.add_constructor(yaml.resolver.BaseResolver.DEFAULT_MAPPING_TAG, _mapping)
    _cls.add_constructor(yaml.resolver.BaseResolver.DEFAULT_SEQUENCE_TAG, _sequence)


def _load(cls: Any, text: str) -> Any:
    loader = cls(text)
    try:
        return loader.get_single_data()
    finally:
        loader.dispose()


def load_located(text: str) -> Any:
    """Parse YAML text into LocatedDict/LocatedList trees. Raises yaml.YAMLError."""
    try:
        return _load(_Loader, text)
    except yaml.MarkedYAMLError as e:
        if _Loader is not _PyLoader and "maximum nesting depth" in str(e.problem):
            return _load(_PyLoader, text)
        raise
