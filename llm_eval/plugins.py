"""Metric plugins: distributions that add metrics through the `llm_eval.metrics` entry points.

A distribution declares, in its pyproject.toml,

    [project.entry-points."llm_eval.metrics"]
    mine = "my_package.metrics"           # a module that calls register(Family(...))
    more = "my_package.metrics:register"  # or a callable, called with no argument

and every metric it registers is listed by `llm-eval metrics` with the distribution's
name and version as its source, the way pytest finds its plugins. The entry points are
read the first time a metric name is not a built-in one, or the metrics are listed
(`llm_eval.metrics` asks), not when the command line starts: `llm-eval --help` and a
gate on built-in metrics import no plugin. A plugin that fails to
load is a one-line error naming the entry point (exit 3, `PluginError`), never a traceback.
"""

from __future__ import annotations

import types
from dataclasses import dataclass
from importlib.metadata import EntryPoint, entry_points

from llm_eval.errors import PluginError

GROUP = "llm_eval.metrics"


@dataclass(frozen=True, slots=True)
class Plugin:
    """One installed entry point of the metrics group."""

    entry_point: EntryPoint

    @property
    def source(self) -> str:
        """`name version` of the distribution that declares it."""
        dist = self.entry_point.dist
        if dist is None:
            return f"entry point {self.entry_point.name}"
        return f"{dist.metadata['Name']} {dist.version}"

    def describe(self) -> str:
        """How an error names it: `metric plugin 'mine = my_package.metrics' (dist 1.0)`."""
        ep = self.entry_point
        return f"metric plugin '{ep.name} = {ep.value}' ({self.source})"

    def load(self) -> None:
        """Import what the entry point names and call it when it is a callable.

        Any failure inside the plugin (an import error, a metric name taken, a bad
        Family) becomes one PluginError naming the entry point.
        """
        try:
            target = self.entry_point.load()
            if callable(target) and not isinstance(target, types.ModuleType):
                target()
        except Exception as exc:
            reason = str(exc).splitlines()[0] if str(exc) else ""
            detail = f"{type(exc).__name__}: {reason}" if reason else type(exc).__name__
            raise PluginError(f"{self.describe()} failed to load: {detail}") from None


def installed_plugins() -> tuple[Plugin, ...]:
    """The metric plugins of the running environment, in entry point name order."""
    found = sorted(entry_points(group=GROUP), key=lambda ep: (ep.name, ep.value))
    return tuple(Plugin(ep) for ep in found)
