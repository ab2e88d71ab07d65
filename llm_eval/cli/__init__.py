"""The `llm-eval` command line: parses options, calls the library, maps results to exit codes.

Heavy modules (numpy, PyGithub, jinja2) are imported inside the commands so that
`llm-eval --help` stays fast.
"""

from __future__ import annotations

import errno
import gc
import sys
import traceback
from typing import NoReturn

import click

from llm_eval import __version__
from llm_eval.cli import analysis, ci, gating, gold  # noqa: F401  (each registers its commands)
from llm_eval.cli.root import cli, echo
from llm_eval.errors import ExitCode, LlmEvalError
from llm_eval.output import degrade_unencodable_output

__all__ = ["cli", "main", "script"]


_GC_THRESHOLD = (50_000, 20, 20)
"""Collect the youngest objects every 50,000 allocations, not 700. A command is a
short-lived process that builds many objects and few cycles: at the default, the
imports and tables of a warm demo gate trigger some hundred collections, one of them
over every object alive, for about 5% of its CPU time and no memory given back (mypy
raises its thresholds for the same reason)."""


def main(argv: list[str] | None = None) -> int:
    """Entry point: run the command line and turn every outcome into an exit code.
    The garbage collector's thresholds are raised while it runs, and put back."""
    before = gc.get_threshold()
    gc.set_threshold(*_GC_THRESHOLD)
    try:
        return _main(argv)
    finally:
        gc.set_threshold(*before)


def script() -> NoReturn:
    """The `llm-eval` script (and `python -m llm_eval.cli`): `main()`, then exit with its
    code. Everything still alive is frozen first (`gc.freeze`), so that the
    interpreter's last collection on the way out does not walk it all again: about 6%
    of a warm demo gate's CPU, for objects the exit frees anyway. In-process callers
    use `main()`, which leaves the collector as it found it."""
    code = main()
    gc.freeze()
    sys.exit(code)


def _main(argv: list[str] | None) -> int:
    degrade_unencodable_output()
    try:
        result = cli.main(args=argv, prog_name="llm-eval", standalone_mode=False)
    except click.exceptions.Exit as exc:
        return int(exc.exit_code)
    except click.ClickException as exc:
        exc.show()
        return ExitCode.USAGE
    except click.Abort:
        echo("Aborted.", err=True)
        return ExitCode.USAGE
    except LlmEvalError as exc:
        echo(f"llm-eval: error: {exc}", err=True)
        return exc.exit_code
    except OSError as exc:
        if exc.filename is None:
            return _internal_error()
        # A path the user gave that cannot be read or written (a folder where a file is
        # expected, a file where a folder is, no permission): their input, not a bug.
        echo(f"llm-eval: error: {_os_error_line(exc)}", err=True)
        return ExitCode.BAD_INPUT
    except Exception:
        return _internal_error()
    return int(result) if isinstance(result, int) else ExitCode.PASS


def _internal_error() -> int:
    """Print the traceback of the exception being handled: a bug, exit 5."""
    traceback.print_exc()
    echo(
        f"llm-eval {__version__}: internal error (a bug); please report it with the "
        "traceback above.",
        err=True,
    )
    return ExitCode.INTERNAL


_OS_REASONS = {
    errno.EEXIST: "is a file, expected a folder",
    errno.ENOTDIR: "a part of the path is a file, expected a folder",
    errno.EISDIR: "is a folder, expected a file",
    errno.EACCES: "permission denied",
    errno.EPERM: "permission denied",
    errno.ELOOP: "too many levels of symbolic links",
    errno.EROFS: "the file system is read-only",
    errno.ENOSPC: "no space left on the device",
}


def _os_error_line(exc: OSError) -> str:
    """`path: cannot read or write it: reason`, for a path the file system refused."""
    reason = _OS_REASONS.get(exc.errno or 0) or exc.strerror or type(exc).__name__
    # A failed rename names the temporary file first and the target, the user's path, second.
    return f"{exc.filename2 or exc.filename}: cannot read or write it: {reason}"
