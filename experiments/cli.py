"""The ``eqsat-lab`` command line, generated from a table of command rows.

``COMMAND_MODULES`` lists one module per subcommand; each holds a ``COMMAND`` row (name, help,
arguments, run: :class:`experiments.command.Command`). The parser and its help come from the
rows, and every user error becomes one line naming what and where, with exit code 2.
"""
from __future__ import annotations

import argparse
import codecs
import importlib
import os
import signal
import sys
import threading
import traceback
import warnings
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import experiments.blas  # noqa: F401  (first: one BLAS thread, set before NumPy loads OpenBLAS)
from experiments.command import Command, add_subcommands, check_paths
from experiments.memory import reuse_large_blocks

COMMAND_MODULES = ("compare", "optimize", "cost", "table", "models", "dot", "rules", "extract", "experiment", "tune",
                   "pet")


def commands(names: Sequence[str] = COMMAND_MODULES) -> list[Command]:
    """The command rows of ``names`` (each command's module is named as the command), in order."""
    return [importlib.import_module(f"experiments.commands.{m}").COMMAND for m in names]


def build_parser(argv: Sequence[str] = ()) -> argparse.ArgumentParser:
    """The parser of every command; for a command line ``argv`` that names one, of that command
    alone (importing all eleven command modules took 0.34 CPU s of every run)."""
    parser = argparse.ArgumentParser(
        prog="eqsat-lab", description="Tensor-graph superoptimization and auto-tuning lab."
    )
    first = argv[0] if argv else ""
    add_subcommands(parser, commands((first,) if first in COMMAND_MODULES else COMMAND_MODULES), "command")
    return parser


def user_error(exc: BaseException) -> str | None:
    """The one-line message for an error a user's input caused (None: a bug, let it raise)."""
    from eqsat.errors import EqsatError

    if isinstance(exc, KeyError):
        return str(exc.args[0]) if exc.args and isinstance(exc.args[0], str) and " " in exc.args[0] else None
    if isinstance(exc, (EqsatError, ValueError, FileNotFoundError, IsADirectoryError, PermissionError)):
        return str(exc)
    return None


def internal_error(exc: BaseException) -> str:
    """A bug's one line: the exception and the innermost place it came from."""
    frame = traceback.extract_tb(exc.__traceback__)[-1] if exc.__traceback__ else None
    where = f" at {Path(frame.filename).name}:{frame.lineno} ({frame.name})" if frame else ""
    return (
        f"internal error, a bug in eqsat-lab: {type(exc).__name__}: {exc}{where}; rerun with "
        f"EQSAT_LAB_DEBUG=1 for the traceback"
    )


def _show_warning(message: Warning | str, category: type[Warning], filename: str, lineno: int,
                  file: Any = None, line: str | None = None) -> None:
    """A warning as one line naming the program, like its errors (no source line)."""
    print(f"eqsat-lab: warning: {message}", file=file or sys.stderr)


ASCII_FALLBACKS = {"α": "alpha", "µ": "u", "μ": "u", "×": "x", "→": "->", "≤": "<=", "≥": ">=", "≈": "~",
                   "–": "-", "—": "-", "…": "...", "²": "^2", "±": "+-", "✓": "ok", "✗": "x"}


def _ascii_fallback(exc: UnicodeError) -> tuple[str, int]:
    """A codec error handler: the characters eqsat-lab prints as ASCII (α -> alpha, µ -> u), else ``?``."""
    if not isinstance(exc, UnicodeEncodeError):
        raise exc
    return "".join(ASCII_FALLBACKS.get(c, "?") for c in exc.object[exc.start:exc.end]), exc.end


def plain_streams() -> None:
    """Under ``LC_ALL=C`` or ``PYTHONIOENCODING=ascii`` the help (α) and every result (µs) raised
    UnicodeEncodeError, the results after the whole search: a stream that cannot encode them
    prints ASCII stand-ins instead."""
    codecs.register_error("eqsat-lab-ascii", _ascii_fallback)
    for stream in (sys.stdout, sys.stderr):
        try:
            "αµ×".encode(getattr(stream, "encoding", None) or "ascii")
        except (UnicodeEncodeError, LookupError):
            if hasattr(stream, "reconfigure"):
                stream.reconfigure(errors="eqsat-lab-ascii")


class Terminated(KeyboardInterrupt):
    """SIGTERM, raised like Ctrl-C's KeyboardInterrupt so every ``finally`` runs (the atomic
    writer's removes its temporary file: a SIGTERM mid-write left up to 64 MB behind)."""


_MAIN_PID = os.getpid()


def _terminate(signum: int, frame: Any) -> None:
    if os.getpid() != _MAIN_PID:  # a forked worker (saturation) inherits the handler: it dies as it did
        signal.signal(signal.SIGTERM, signal.SIG_DFL)
        os.kill(os.getpid(), signal.SIGTERM)
        return
    raise Terminated


def main(argv: Sequence[str] | None = None) -> int:
    argv_given = argv is not None
    argv = sys.argv[1:] if argv is None else argv
    plain_streams()
    args = build_parser(argv).parse_args(argv)
    warnings.showwarning = _show_warning
    reuse_large_blocks()
    global _MAIN_PID
    _MAIN_PID = os.getpid()
    in_main = threading.current_thread() is threading.main_thread()
    previous = signal.signal(signal.SIGTERM, _terminate) if in_main else None
    try:
        check_paths(args)
        return args._run(args)
    except KeyboardInterrupt as exc:
        terminated = isinstance(exc, Terminated)
        print(f"eqsat-lab: {'terminated' if terminated else 'interrupted'}", file=sys.stderr)
        if argv_given:
            return 143 if terminated else 130
        # the program itself: leave without the interpreter's finalization, where a native solver
        # thread still winding down after the interrupt aborted the process (SIGABRT, not 130)
        sys.stdout.flush()
        sys.stderr.flush()
        os._exit(143 if terminated else 130)
    except BrokenPipeError:  # the reader went away (`| head`): stop quietly, as Unix tools do
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
        return 0
    except Exception as exc:
        if os.environ.get("EQSAT_LAB_DEBUG"):
            raise
        message = user_error(exc)
        print(f"eqsat-lab: error: {message if message is not None else internal_error(exc)}", file=sys.stderr)
        return 2 if message is not None else 3
    finally:
        if previous is not None:
            signal.signal(signal.SIGTERM, previous)


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
