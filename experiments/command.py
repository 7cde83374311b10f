"""A CLI command or experiment as one row of data: name, help, arguments, run.

The ``eqsat-lab`` parser is generated from these rows (:mod:`experiments.cli`); adding a
command is adding a module with a ``COMMAND`` row to ``COMMAND_MODULES`` there, and adding an
experiment is adding an ``Experiment`` row to an experiment module listed in
:mod:`experiments.commands.experiment`.
"""
from __future__ import annotations

import argparse
import math
import os
import sys
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

AddArguments = Callable[[argparse.ArgumentParser], None]
Run = Callable[[argparse.Namespace], int]


@dataclass(frozen=True)
class Command:
    """One ``eqsat-lab`` subcommand (or ``eqsat-lab experiment`` entry): ``run`` returns the exit code."""

    name: str
    help: str
    add_arguments: AddArguments
    run: Run


Experiment = Command  # an experiment is a row of the same shape under `eqsat-lab experiment`


def dispatched_by_subcommand(args: argparse.Namespace) -> int:  # pragma: no cover - never called
    """The ``run`` of a command whose subcommands set their own (``add_subcommands`` does)."""
    raise AssertionError("a subcommand always sets its own run")


def add_subcommands(parser: argparse.ArgumentParser, rows: Sequence[Command], dest: str) -> None:
    """One subparser per row, with the row's help and arguments, dispatching to its ``run``."""
    sub = parser.add_subparsers(dest=dest, required=True, metavar="{" + ",".join(r.name for r in rows) + "}")
    for row in rows:
        p = sub.add_parser(row.name, help=row.help, description=row.help)
        row.add_arguments(p)
        p.set_defaults(_run=row.run)


def split_list(text: str) -> list[str]:
    """``"a,b,,c"`` -> ``["a", "b", "c"]``."""
    return [x for x in text.split(",") if x]


def parse_params(items: Sequence[str]) -> dict[str, Any]:
    """``k=v`` pairs into builder keyword arguments (ints, comma-separated int tuples or strings)."""
    params: dict[str, Any] = {}
    for item in items:
        if "=" not in item:
            raise ValueError(f"--param expects key=value, got {item!r}")
        key, value = item.split("=", 1)
        try:
            params[key] = tuple(int(v) for v in value.split(",")) if "," in value else int(value)
        except ValueError:
            params[key] = value
    return params


def finite_float(text: str) -> float:
    """An argparse type: a finite float (no nan or inf)."""
    value = float(text)
    if not math.isfinite(value):
        raise argparse.ArgumentTypeError(f"expected a finite number, got {text!r}")
    return value


def non_negative(kind: Callable[[str], Any]) -> Callable[[str], Any]:
    """An argparse type: ``kind`` and >= 0."""
    def parse(text: str) -> Any:
        value = finite_float(text) if kind is float else kind(text)
        if value < 0:
            raise argparse.ArgumentTypeError(f"expected a number >= 0, got {text!r}")
        return value
    parse.__name__ = getattr(kind, "__name__", "number")
    return parse


def device_help(default: str = "h100") -> str:
    from eqsat.cost.devices import DEVICES

    return (f"roofline device: {', '.join(DEVICES)} or a .json profile; or ort-cpu[:threads], measured on this "
            f"machine in onnxruntime; or hypogpu[:oracle|:TUNER@TRIALS], HypoGPU with every GEMM priced by its "
            f"tuned kernel (default {default})")


def add_device(p: argparse.ArgumentParser, default: str = "h100") -> None:
    p.add_argument("--device", default=default, help=device_help(default))


def add_models(p: argparse.ArgumentParser, default_text: str) -> None:
    p.add_argument("--models", default="", help=f"comma-separated models (default: {default_text})")


def add_sweep_options(p: argparse.ArgumentParser, out: str, device: bool = True, seed: bool = True) -> None:
    """The options every resumable experiment takes."""
    if device:
        add_device(p)
    p.add_argument("--out", default=out, help=f"output folder; finished cells are read back from it (default {out})")
    if seed:
        p.add_argument("--seed", type=int, default=0, help="seed of the numerical checks' random inputs")
    p.add_argument("--workers", type=int, default=1, help="local processes running cells (timings are fairest at 1)")
    p.add_argument("--executor", choices=("local", "ray"), default="local", help="run cells locally or on Ray")


def process_age_s() -> float:
    """Seconds since this process started (Linux: from /proc; elsewhere since this module loaded),
    so a phase report's start-up includes the interpreter and every import."""
    try:
        start_ticks = int(Path("/proc/self/stat").read_text().rsplit(")", 1)[1].split()[19])
        uptime = float(Path("/proc/uptime").read_text().split()[0])
        return max(0.0, uptime - start_ticks / os.sysconf("SC_CLK_TCK"))
    except (OSError, ValueError, IndexError):
        return time.perf_counter() - _LOADED


_LOADED = time.perf_counter()


def command_line() -> str:
    """The command as typed, for the header of result files ("" outside the eqsat-lab script)."""
    return "eqsat-lab " + " ".join(sys.argv[1:]) if sys.argv and sys.argv[0].endswith("eqsat-lab") else ""


def progress() -> bool:
    """Progress bars only on a terminal."""
    return sys.stderr.isatty()


def sweep_kwargs(args: argparse.Namespace) -> dict[str, Any]:
    """The keyword arguments every experiment's ``run`` takes from the sweep options."""
    return {"workers": args.workers, "executor": args.executor, "progress": progress(), "command": command_line()}


def positive_int(text: str) -> int:
    try:
        value = int(text)
    except ValueError:
        value = 0
    if value < 1:
        raise argparse.ArgumentTypeError(f"expected a positive integer, got {text!r}")
    return value


def parse_dims(items: list[str]) -> dict[str, int]:
    """``--dim NAME=N`` values as a mapping; a malformed one is a user error naming it."""
    dims: dict[str, int] = {}
    for item in items:
        name, eq, size = item.partition("=")
        if not eq or not name or not size.isdigit() or int(size) < 1:
            raise ValueError(f"--dim {item}: expected NAME=N with N a positive integer")
        dims[name] = int(size)
    return dims


def add_onnx_input(p: argparse.ArgumentParser) -> None:
    """``--batch`` and ``--dim``: the sizes of an ONNX model's symbolic input dimensions."""
    p.add_argument("--batch", type=positive_int, default=1,
                   help="onnx: size of the batch (the first axis of the inputs, when symbolic)")
    p.add_argument("--dim", action="append", default=[], metavar="NAME=N",
                   help="onnx: size of another symbolic input dimension, by its name in the file")


def load_model(args: argparse.Namespace) -> tuple[Any, Any]:
    """The graph ``args.model`` names: a benchmark builder (with ``--param``) or an ``.onnx`` file
    (with ``--batch``/``--dim``); the second value is the ONNX import, or None."""
    if args.model.endswith(".onnx"):
        from eqsat import onnx as onnx_io

        imported = onnx_io.load(args.model, batch=args.batch, dims=parse_dims(args.dim))
        return imported.graph, imported
    from eqsat.models import build

    return build(args.model, **parse_params(args.param)), None
