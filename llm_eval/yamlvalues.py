"""Checked values from YAML nodes, shared by the two config readers: each raises the
node's error (file, line, key path) when the value is not what the key needs."""

from __future__ import annotations

from llm_eval.criteria import Location
from llm_eval.environment import line_break
from llm_eval.errors import InputError
from llm_eval.metrics import parse_metric
from llm_eval.yamlfile import Node


def location_of(node: Node) -> Location:
    return Location(node.file, node.line, node.path)


def string(node: Node) -> str:
    if not isinstance(node.value, str) or not node.value.strip():
        raise node.error("must be a non-empty string")
    return node.value


def path_string(node: Node) -> str:
    """A file or folder path: a non-empty string on one line."""
    value = string(node)
    if problem := line_break(value):
        raise node.error(problem)
    return value


def integer(node: Node, minimum: int) -> int:
    value = node.value
    if isinstance(value, bool) or not isinstance(value, int) or value < minimum:
        raise node.error(f"must be a whole number >= {minimum}, got {value!r}")
    return value


def proportion(node: Node) -> float:
    value = node.value
    if isinstance(value, bool) or not isinstance(value, int | float) or not 0 <= value <= 1:
        raise node.error(f"must be a number between 0 and 1, got {value!r}")
    return float(value)


def metric_name(node: Node) -> str:
    try:
        return parse_metric(string(node)).name
    except InputError as exc:
        raise node.error(exc.reason) from None


def switch(node: Node) -> bool:
    # YAML 1.1 reads on/off as booleans; accept the quoted words too.
    if isinstance(node.value, bool):
        return node.value
    if node.value in ("on", "off"):
        return node.value == "on"
    raise node.error(f"expected on or off, got {node.value!r}")
