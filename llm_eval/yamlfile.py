"""YAML reading that remembers where every value came from.

Config errors must name the file, the line and the key path
(`config/ship-criteria.yaml:7: gates[1].severity: …`), so the YAML is composed
into nodes and turned into `Node` values that carry their line and path.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import yaml

from llm_eval.errors import InputError
from llm_eval.textio import MAX_JSON_DEPTH, read_text


@dataclass(frozen=True, slots=True)
class Node:
    """A YAML value with its file, 1-based line and key path."""

    value: Any
    """A plain scalar, a `dict[str, Node]` or a `list[Node]`."""
    file: str
    line: int
    path: str

    def error(self, reason: str) -> InputError:
        """An InputError pointing at this value."""
        return InputError(reason, path=self.file, line=self.line, key=self.path or None)

    def plain(self) -> Any:
        """The value with nested nodes unwrapped into plain dicts and lists."""
        if isinstance(self.value, dict):
            return {k: v.plain() for k, v in self.value.items()}
        if isinstance(self.value, list):
            return [v.plain() for v in self.value]
        return self.value

    def mapping(
        self, allowed: set[str] | frozenset[str], required: frozenset[str] = frozenset()
    ) -> dict[str, Node]:
        """This node as a mapping, rejecting unknown and missing keys."""
        if not isinstance(self.value, dict):
            raise self.error(f"expected a mapping, got {_kind(self.value)}")
        for key, child in self.value.items():
            if key not in allowed:
                valid = ", ".join(sorted(allowed))
                raise child.error(f"unknown key (valid keys: {valid})")
        for key in sorted(required - set(self.value)):
            raise self.error(f"missing required key {key!r}")
        return dict(self.value)

    def items(self) -> Iterator[Node]:
        """This node as a sequence."""
        if not isinstance(self.value, list):
            raise self.error(f"expected a list, got {_kind(self.value)}")
        yield from self.value

    def find(self, key_path: str) -> Node | None:
        """The value at `key_path` below this node (an error's key: `init.model_path`,
        `command[2]`), or None when there is none."""
        return self._at(self.child_path(key_path))

    def _at(self, path: str) -> Node | None:
        if self.path == path:
            return self
        children: Iterable[Node] = ()
        if isinstance(self.value, dict | list):
            children = self.value.values() if isinstance(self.value, dict) else self.value
        for child in children:
            found = child._at(path) if path.startswith(child.path) else None
            if found is not None:
                return found
        return None

    def child_path(self, key: str | int) -> str:
        """The key path of a child of this node."""
        if isinstance(key, int):
            return f"{self.path}[{key}]"
        return f"{self.path}.{key}" if self.path else key


def _kind(value: Any) -> str:
    if isinstance(value, dict):
        return "a mapping"
    if isinstance(value, list):
        return "a list"
    if value is None:
        return "nothing"
    return f"{type(value).__name__} {value!r}"


def load_yaml(path: str | Path) -> Node:
    """Parse a YAML file into located nodes."""
    file = str(path)
    text = read_text(path)
    try:
        loader = _Loader(text, file)  # checks every character at once
    except yaml.reader.ReaderError as exc:
        char = exc.character
        code = char if isinstance(char, int) else ord(char)
        raise InputError(
            f"invalid YAML: character U+{code:04X} is not allowed",
            path=file,
            line=text.count("\n", 0, exc.position) + 1,
        ) from None
    try:
        root = loader.get_single_node()
    except yaml.MarkedYAMLError as exc:
        mark = exc.problem_mark
        line = mark.line + 1 if mark is not None else None
        raise InputError(f"invalid YAML: {exc.problem}", path=file, line=line) from None
    finally:
        loader.dispose()
    if root is None:
        return Node({}, file, 1, "")
    return _convert(root, file, "")


MAX_DEPTH = MAX_JSON_DEPTH
"""Deepest nesting of mappings and lists; a config nests a few levels."""


class _Loader(yaml.SafeLoader):
    """Composes nodes, refusing anchors and aliases (`&name`, `*name`) and deep nesting.

    An alias makes the same node appear in many places: a recursive one never ends,
    and a few hundred bytes of nested aliases expand to gigabytes. A config has no
    need for them, so they are refused where they appear, with their key path; so is
    nesting deeper than `MAX_DEPTH`, which composing (recursive) could not survive.
    """

    def __init__(self, text: str, file: str) -> None:
        super().__init__(text)
        self.file = file
        self.paths: list[str] = []
        """The key paths of the nodes being composed, innermost last."""

    def compose_node(self, parent: yaml.Node | None, index: Any) -> yaml.Node | None:
        """Compose one node, unless it is an alias, has an anchor or is too deep."""
        path = self._path(parent, index)
        event = self.peek_event()
        if len(self.paths) >= MAX_DEPTH:
            raise InputError(
                f"YAML nested deeper than {MAX_DEPTH} levels",
                path=self.file,
                line=event.start_mark.line + 1,
                key=path or None,
            )
        if isinstance(event, yaml.AliasEvent) or getattr(event, "anchor", None) is not None:
            raise InputError(
                "YAML anchors and aliases (&name, *name) are not supported: write the value out",
                path=self.file,
                line=event.start_mark.line + 1,
                key=path or None,
            )
        self.paths.append(path)
        try:
            return super().compose_node(parent, index)
        finally:
            self.paths.pop()

    def _path(self, parent: yaml.Node | None, index: Any) -> str:
        """The key path of the child `index` of `parent` (None: a mapping's key)."""
        outer = self.paths[-1] if self.paths else ""
        if isinstance(index, int):
            return f"{outer}[{index}]"
        if isinstance(index, yaml.ScalarNode):
            return f"{outer}.{index.value}" if outer else str(index.value)
        return outer


def _scalar(node: yaml.Node, file: str, path: str) -> Any:
    try:
        return yaml.constructor.SafeConstructor().construct_object(node)
    except Exception as exc:  # PyYAML's constructors raise assorted errors on bad values
        # A tag the safe loader does not know (`!!python/object`), or a value its tag
        # cannot hold: `!!int abc` (ValueError), `!!bool maybe` (KeyError),
        # `!!timestamp x` (AttributeError).
        kind = str(node.tag).rsplit(":", 1)[-1]
        problem = getattr(exc, "problem", None) or f"{node.value!r} is not a valid {kind}"
        raise InputError(
            f"invalid YAML value: {problem}",
            path=file,
            line=node.start_mark.line + 1,
            key=path or None,
        ) from None


_COLLECTION_TAGS = frozenset(
    {
        yaml.resolver.BaseResolver.DEFAULT_MAPPING_TAG,
        yaml.resolver.BaseResolver.DEFAULT_SEQUENCE_TAG,
    }
)


def _convert(node: yaml.Node, file: str, path: str) -> Node:
    line = node.start_mark.line + 1
    if not isinstance(node, yaml.ScalarNode) and node.tag not in _COLLECTION_TAGS:
        # A tag on a mapping or list (`!!python/object/apply:…`) would otherwise be
        # dropped without a word; scalars' tags are checked when they are constructed.
        raise InputError(
            f"invalid YAML value: unsupported tag {node.tag!r}",
            path=file,
            line=line,
            key=path or None,
        )
    if isinstance(node, yaml.MappingNode):
        parent = Node(None, file, line, path)
        children: dict[str, Node] = {}
        for key_node, value_node in node.value:
            key = _scalar(key_node, file, path)
            if not isinstance(key, str):
                raise InputError(f"keys must be strings, got {key!r}", path=file, line=line)
            if key in children:
                raise InputError(
                    "duplicate key",
                    path=file,
                    line=key_node.start_mark.line + 1,
                    key=parent.child_path(key),
                )
            children[key] = _convert(value_node, file, parent.child_path(key))
        return Node(children, file, line, path)
    if isinstance(node, yaml.SequenceNode):
        parent = Node(None, file, line, path)
        items = [_convert(v, file, parent.child_path(i)) for i, v in enumerate(node.value)]
        return Node(items, file, line, path)
    return Node(_scalar(node, file, path), file, line, path)
