"""Which raw values (parsed from JSON or YAML, or answered by a server) are numbers a
score, a limit or a vector may hold. Pure: the readers at the edges and the core both
ask it."""

from __future__ import annotations

import math
import numbers
import sys
from typing import Any, TypeGuard


def is_finite_number(value: Any) -> TypeGuard[float]:
    """A real, finite number (not a boolean), as scores and latencies must be; an
    integer too large for a float (JSON allows 400 digits) is not one."""
    kind = type(value)
    if kind is float:  # the common case first: JSON numbers with a point or exponent
        return math.isfinite(value)
    if kind is int:
        return -_FLOAT_MAX <= value <= _FLOAT_MAX
    if kind is bool or not isinstance(value, numbers.Real):
        return False
    try:
        return math.isfinite(float(value))
    except OverflowError:
        return False


_FLOAT_MAX = int(sys.float_info.max)
