"""The power statement's figures kept on disk, by `power.power_key`.

A scope's figures cost a simulation or exact sums, and change only when what
`power.power_key` digests does (its scores before and after, the limit, the test's
settings, the tool's version), so they are kept in the output folder's cache
(`<output>/cache/power/`, one small JSON file per key) and read back by the gate, and
`baseline refresh` fills it for the baseline's own state. `PowerCache` is the mapping
`power.gate_power` takes as `known`: a file that is missing, unreadable, or not what
this module writes is a miss (the figures are computed and the file written again),
never an error; a folder that cannot be written only costs the next run the time.

`LLM_EVAL_SHARED_CACHE`, when set, names a folder that several output folders share
(checkouts of one repository, the pre-push hook's worktrees, a CI cache restored
across jobs): a figure missing from the output folder's cache is looked up in its
`power/` folder before it is computed, and a figure computed is kept in both. The key
digests everything the figure depends on, so a shared figure is the one the
simulation would give.
"""

from __future__ import annotations

import contextlib
import json
import os
from collections.abc import Iterator, MutableMapping
from pathlib import Path
from typing import Any

from llm_eval.gate import Power
from llm_eval.textio import write_atomic

FOLDER = Path("cache") / "power"
"""Where the figures are kept, under the output folder."""
SHARED = "LLM_EVAL_SHARED_CACHE"
"""The environment variable naming a cache folder that output folders share."""


class PowerCache(MutableMapping[str, Power]):
    """The figures kept in `folder`, one file per key; with `shared`, a second cache
    read on a miss (the figure found is then kept in `folder` too) and written beside."""

    def __init__(self, folder: Path, shared: PowerCache | None = None) -> None:
        self.folder = folder
        self.shared = shared

    @classmethod
    def under(cls, output: Path) -> PowerCache:
        """The cache of the output folder `output`, backed by the shared folder that
        `LLM_EVAL_SHARED_CACHE` names, if any."""
        shared = os.environ.get(SHARED)
        return cls(output / FOLDER, cls(Path(shared) / "power") if shared else None)

    def _path(self, key: str) -> Path:
        return self.folder / f"{key}.json"

    def __getitem__(self, key: str) -> Power:
        try:
            data = json.loads(self._path(key).read_text(encoding="utf-8"))
            return _power_of(data, key)
        except (OSError, UnicodeError, ValueError, LookupError, TypeError, AttributeError):
            if self.shared is None:
                raise KeyError(key) from None
        power = self.shared[key]
        self._keep(key, power)
        return power

    def __setitem__(self, key: str, power: Power) -> None:
        self._keep(key, power)
        if self.shared is not None:
            self.shared[key] = power

    def _keep(self, key: str, power: Power) -> None:
        try:
            text = json.dumps({"key": key, **_fields(power)}, allow_nan=False)
        except ValueError:
            return  # a figure JSON cannot hold: not kept, computed again next time
        with contextlib.suppress(OSError):
            self.folder.mkdir(parents=True, exist_ok=True)
            write_atomic(self._path(key), text)

    def __delitem__(self, key: str) -> None:
        try:
            self._path(key).unlink()
        except FileNotFoundError:
            raise KeyError(key) from None

    def __iter__(self) -> Iterator[str]:
        if self.folder.is_dir():
            yield from sorted(path.stem for path in self.folder.glob("*.json"))

    def __len__(self) -> int:
        return sum(1 for _ in self)


def _fields(power: Power) -> dict[str, Any]:
    return {
        "n": power.n,
        "limit": float(power.limit),
        "detectable_drop": None if power.detectable_drop is None else float(power.detectable_drop),
        "target": float(power.target),
        "queries_needed": power.queries_needed,
        "assumption": power.assumption,
    }


def _power_of(data: Any, key: str) -> Power:
    """The figures as `PowerCache` wrote them for `key`; ValueError for anything else."""
    fields = {name: data[name] for name in _FIELD_TYPES}
    if set(data) != {"key", *_FIELD_TYPES} or data["key"] != key:
        raise ValueError("not the figures kept for this key")
    for name, kinds in _FIELD_TYPES.items():
        if type(fields[name]) not in kinds:
            raise ValueError(f"{name} is not a {kinds}")
    return Power(**fields)


_FIELD_TYPES: dict[str, tuple[type, ...]] = {
    "n": (int,),
    "limit": (float,),
    "detectable_drop": (float, type(None)),
    "target": (float,),
    "queries_needed": (int, type(None)),
    "assumption": (str,),
}
"""Each kept field's JSON types, as `PowerCache` writes them (a bool is no int here)."""
