"""MkDocs hook: the reference pages' tables, generated from the code when the site is built.

A page holds a marker such as `<!-- reference: commands -->`; `on_page_markdown`
replaces it with Markdown made from what the program itself declares: the click
command tree (`llm_eval.cli`), the metric registry, the retriever registry, the
settings of model endpoints and the exit-code table (`llm_eval.errors.ExitCode`).
So these pages cannot drift from the code: a new option appears on the next build.
"""

from __future__ import annotations

import inspect
import json
import re
from collections.abc import Callable, Iterator, Mapping
from typing import Any

import click

_MARKER = re.compile(r"^<!-- reference: ([\w-]+) -->$", re.M)


def _cell(text: str) -> str:
    """Text for one Markdown table cell: one line, pipes escaped."""
    return " ".join(text.split()).replace("|", r"\|")


def _help_text(command: click.Command) -> str:
    """A command's help as click prints it: up to `\\f`, without `\\b` markers."""
    text = inspect.cleandoc(command.help or "").split("\f")[0]
    return "\n".join(line for line in text.splitlines() if line.strip() != "\b")


def walk_commands(
    command: click.Command, path: tuple[str, ...] = ("llm-eval",)
) -> Iterator[tuple[tuple[str, ...], click.Command]]:
    """Every command of the tree, depth first, groups before their commands."""
    yield path, command
    if isinstance(command, click.Group):
        for name in sorted(command.commands):
            yield from walk_commands(command.commands[name], (*path, name))


def _option_row(param: click.Option, ctx: click.Context) -> str:
    names = ", ".join(f"`{name}`" for name in [*param.opts, *param.secondary_opts])
    value = "" if param.is_flag else f"`{_cell(param.make_metavar(ctx))}`"
    default = param.default if not callable(param.default) else None
    shown = (
        f"`{default}`"
        if param.show_default and default is not None and not param.is_flag
        else ("on" if param.is_flag and default is True else "")
    )
    extra = "; repeatable" if param.multiple else ""
    return f"| {names} | {value} | {_cell(shown)} | {_cell((param.help or '') + extra)} |"


def _command_section(path: tuple[str, ...], command: click.Command) -> list[str]:
    ctx = click.Context(command, info_name=" ".join(path))
    heading = "#" * min(len(path) + 1, 4)
    lines = [f"{heading} `{' '.join(path)}`", "", "```", command.get_usage(ctx), "```", ""]
    lines += [_help_text(command), ""]
    arguments = [p for p in command.params if isinstance(p, click.Argument)]
    if arguments:
        lines += ["Arguments: " + ", ".join(f"`{p.make_metavar(ctx)}`" for p in arguments), ""]
    options = [p for p in command.params if isinstance(p, click.Option) and not p.hidden]
    if options:
        lines += ["| option | value | default | what it does |", "|---|---|---|---|"]
        lines += [_option_row(p, ctx) for p in options] + [""]
    if isinstance(command, click.Group):
        lines += [f"Commands: {', '.join(f'`{name}`' for name in sorted(command.commands))}", ""]
    return lines


def command_reference() -> str:
    """Every command of `llm-eval`, with its usage, help, arguments and options."""
    from llm_eval.cli import cli

    lines: list[str] = []
    for path, command in walk_commands(cli):
        lines += _command_section(path, command)
    return "\n".join(lines)


def metric_reference() -> str:
    """The metric registry, grouped by where the values come from (`llm-eval metrics`);
    each row carries its family's anchor (`#recall-at-k`, `#mrr`), the place the PR
    comment links the metric's name to."""
    from llm_eval.commands.metrics import _SOURCES, _UNITS  # the command's own words
    from llm_eval.metrics import families

    lines: list[str] = []
    registered = list(families())
    for kind, heading in _SOURCES.items():
        lines += [f"**{heading.rstrip(':')}**", "", "| metric | unit | better | what it measures |"]
        lines.append("|---|---|---|---|")
        for family in (f for f in registered if f.kind == kind):
            better = "higher" if family.higher_is_better else "lower"
            source = "" if family.source == "built-in" else f" (plugin {family.source})"
            # The id is what the PR comment links a metric's name to (`Family.anchor`).
            lines.append(
                f'| <span id="{family.anchor}"></span>`{_cell(family.usage())}` '
                f"| {_UNITS[family.unit]} | {better} "
                f"| {_cell(family.description)}{source} |"
            )
        lines.append("")
    return "\n".join(lines)


def settings_table(declared: Mapping[str, Any]) -> str:
    """A table of declared settings (`llm_eval.settings.Setting`): name, default, help."""
    lines = ["| setting | default | what it does |", "|---|---|---|"]
    for name, setting in declared.items():
        given = "required" if setting.required else f"`{json.dumps(setting.default)}`"
        environ = " Reads `${VAR}` and `${VAR:-default}`." if setting.environ else ""
        lines.append(f"| `{name}` | {_cell(given)} | {_cell(setting.help + environ)} |")
    return "\n".join(lines)


def retriever_reference() -> str:
    """Every retriever kind of the registry, with its settings (`llm-eval retrievers`)."""
    from llm_eval.retrievers import retriever_kinds

    lines: list[str] = []
    for kind in retriever_kinds():
        needs = " Needs `corpus` in the config." if kind.needs_corpus else ""
        lines += [f"## `{kind.name}`", "", f"{kind.description}{needs}", ""]
        lines += [settings_table(kind.settings), ""]
    lines.append(
        "Every kind also takes `max_error_rate` (default 0): the share of queries that may fail."
    )
    return "\n".join(lines)


def reranker_reference() -> str:
    """Every reranker type of the `rerank` kind, with its settings."""
    from llm_eval.rerankers import reranker_types

    lines: list[str] = []
    for reranker in reranker_types():
        lines += [f"### `type: {reranker.name}`", "", reranker.description, ""]
        lines += [settings_table(reranker.settings), ""]
    return "\n".join(lines)


def endpoint_reference(table: str) -> str:
    """The settings of `judge:` (SETTINGS) or `embeddings:` (EMBEDDING_SETTINGS)."""
    from llm_eval.endpoints import settings

    return settings_table(getattr(settings, table))


_EXIT_LINE = re.compile(r"^\s+(\w+) = (\d+)\s+# (.+)$", re.M)


def exit_codes() -> list[tuple[int, str, str]]:
    """(code, name, meaning) from `ExitCode`, the one table: the meaning is its comment."""
    from llm_eval.errors import ExitCode

    found = [(int(c), n, m) for n, c, m in _EXIT_LINE.findall(inspect.getsource(ExitCode))]
    assert [c for c, _, _ in found] == [int(code) for code in ExitCode], "ExitCode unread"
    return found


def exit_code_reference() -> str:
    """The exit codes as a table."""
    lines = ["| code | name | meaning |", "|---|---|---|"]
    lines += [f"| {code} | `{name}` | {_cell(meaning)} |" for code, name, meaning in exit_codes()]
    return "\n".join(lines)


GENERATORS: Mapping[str, Callable[[], str]] = {
    "commands": command_reference,
    "metrics": metric_reference,
    "retrievers": retriever_reference,
    "rerankers": reranker_reference,
    "judge-settings": lambda: endpoint_reference("SETTINGS"),
    "embeddings-settings": lambda: endpoint_reference("EMBEDDING_SETTINGS"),
    "exit-codes": exit_code_reference,
}


def render(markdown: str) -> str:
    """The page with every marker replaced by its generated Markdown."""

    def replace(match: re.Match[str]) -> str:
        name = match.group(1)
        if name not in GENERATORS:
            raise ValueError(f"unknown reference marker {name!r} (known: {', '.join(GENERATORS)})")
        return GENERATORS[name]()

    return _MARKER.sub(replace, markdown)


def on_page_markdown(markdown: str, **_: Any) -> str:
    """MkDocs event: fill in the generated parts of a page."""
    return render(markdown)


_CODE = re.compile(r"<code>(.*?)</code>", re.S)


def on_page_content(html: str, **_: Any) -> str:
    """MkDocs event: `\\|` in a code span of a table cell shows as `|`, as on GitHub
    (Python-Markdown keeps the backslash)."""
    return _CODE.sub(lambda m: "<code>" + m.group(1).replace("\\|", "|") + "</code>", html)
