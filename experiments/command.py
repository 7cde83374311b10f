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
from typing import TYPE_CHECKING, Any

from eqsat.cost.devices import DEFAULT_DEVICE, DEVICES, MEASURED_DEVICES, TUNED_DEVICES
from eqsat.cost.registry import OVERSUBSCRIBE
from eqsat.refs import resolve

if TYPE_CHECKING:  # the CLI's start-up imports no sweep machinery
    from experiments.sweep import RunOptions

AddArguments = Callable[[argparse.ArgumentParser], None]
Run = Callable[[argparse.Namespace], int]


@dataclass(frozen=True)
class Command:
    """One ``eqsat-lab`` subcommand (or ``eqsat-lab experiment`` entry): ``run`` returns the exit code.

    ``output_args`` and ``input_args`` name the argument dests (``json_out``) holding the files the
    command writes and reads, ``folder_args`` those of the folders it writes into: :func:`check_paths`
    checks them before ``run`` starts."""

    name: str
    help: str
    add_arguments: AddArguments
    run: Run
    output_args: tuple[str, ...] = ()
    input_args: tuple[str, ...] = ()
    folder_args: tuple[str, ...] = ()


@dataclass(frozen=True)
class Experiment:
    """One ``eqsat-lab experiment`` entry: a command row plus the files it writes into ``--out``
    (``<model>``-style parts stand for one file per value), which ``experiment --list`` prints."""

    name: str
    help: str
    add_arguments: AddArguments
    run: Run
    outputs: tuple[str, ...] = ()
    output_args: tuple[str, ...] = ()  # argument dests of output files (an experiment writes into a folder)
    input_args: tuple[str, ...] = ()
    folder_args: tuple[str, ...] = ("out",)  # the folder its ``outputs`` go into
    doc: str = ""  # the page under docs/results/ that shows its results (``PATH[#anchor]``); the index links it


def lazy(fn: str) -> Run:
    """A ``run`` that imports ``"module:function"`` only when called, so a row whose code imports
    heavy modules costs the CLI's start-up nothing (building the parser reads every row)."""
    def run(args: argparse.Namespace) -> int:
        return resolve(fn)(args)
    run.__qualname__ = f"lazy({fn})"
    return run


def dispatched_by_subcommand(args: argparse.Namespace) -> int:  # pragma: no cover - never called
    """The ``run`` of a command whose subcommands set their own (``add_subcommands`` does)."""
    raise AssertionError("a subcommand always sets its own run")


def add_subcommands(parser: argparse.ArgumentParser, rows: Sequence[Command | Experiment], dest: str,
                    required: bool = True) -> None:
    """One subparser per row, with the row's help and arguments, dispatching to its ``run``."""
    sub = parser.add_subparsers(dest=dest, required=required, metavar="{" + ",".join(r.name for r in rows) + "}")
    for row in rows:
        p = sub.add_parser(row.name, help=row.help, description=row.help)
        row.add_arguments(p)
        p.set_defaults(_run=row.run, _outputs=row.output_args, _inputs=row.input_args, _folders=row.folder_args)


def _flag(parser_dest: str) -> str:
    return "--" + {"json_out": "json"}.get(parser_dest, parser_dest).replace("_", "-")


def check_paths(args: argparse.Namespace) -> None:
    """The command row's output paths and folders, checked against its inputs and each other before
    any work (:func:`eqsat.files.check_outputs`, :func:`eqsat.files.check_output_folders`);
    positional inputs are named by their dest."""
    from eqsat.files import check_output_folders, check_outputs

    outputs = {_flag(d): getattr(args, d, None) for d in getattr(args, "_outputs", ())}
    inputs: dict[str, Any] = {}
    for dest in getattr(args, "_inputs", ()):
        value = getattr(args, dest, None)
        for i, item in enumerate(value if isinstance(value, list) else [value]):
            inputs[f"{dest}[{i}]" if isinstance(value, list) and len(value) > 1 else dest] = item
    inputs |= read_implicitly(args, inputs)
    check_outputs(outputs, inputs)
    check_output_folders({_flag(d): getattr(args, d, None) for d in getattr(args, "_folders", ())}, inputs)


def external_data(model: Path) -> list[Path]:
    """The external-data files an ONNX model names (beside it); none when it does not parse (the
    loader names that error later). Read without its inline weights (:func:`eqsat.onnx.mapped.
    read_model`): parsing a 440 MB BERT whole here held 0.4 GB for the rest of the run."""
    import onnx

    from eqsat.onnx.mapped import read_model

    try:
        proto = read_model(model).proto
    except Exception:  # noqa: BLE001 - any damage is reported by the loader, with its own sentence
        return []
    found: list[Path] = []
    graphs = [proto.graph]
    while graphs:  # iterative: subgraphs nest
        graph = graphs.pop()
        tensors = list(graph.initializer)
        for node in graph.node:
            for attr in node.attribute:
                tensors += [attr.t, *attr.tensors]
                graphs += [*([attr.g] if attr.HasField("g") else []), *attr.graphs]
        for t in tensors:
            if t.data_location == onnx.TensorProto.EXTERNAL:
                found += [model.parent / e.value for e in t.external_data if e.key == "location"]
    return list(dict.fromkeys(found))


def read_implicitly(args: argparse.Namespace, inputs: dict[str, Any]) -> dict[str, Path]:
    """Files a command reads that no ``input_args`` row names: a ``--device``/``--devices`` profile,
    the external data of an input ``.onnx`` model, the measurement and tuned-kernel databases, so
    no output lands on them (``--json`` onto the profile or the database overwrote it)."""
    from eqsat.diskcache import DATABASES, database_path

    found: dict[str, Path] = {}
    for dest in ("device", "devices"):
        for i, name in enumerate(split_list(getattr(args, dest, None) or "")):
            if Path(name).is_file():
                found[f"--{dest} profile" + (f"[{i}]" if dest == "devices" else "")] = Path(name)
    for env in DATABASES:
        where = database_path(env)
        if where is not None:
            found[f"database ${env}"] = where
    if not any(getattr(args, d, None) for d in getattr(args, "_outputs", ())):
        return found  # no output file: no model need be parsed for its data files
    for flag, value in inputs.items():
        if isinstance(value, (str, Path)) and str(value).endswith(".onnx") and Path(value).is_file():
            for j, data in enumerate(external_data(Path(value))):
                found[f"{flag}'s external data" + (f"[{j}]" if j else "")] = data
    return found


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


MAX_SECONDS = 1e6  # 11.6 days; past ~2.1e6 s the OS's wait timeouts overflow (``--seconds 3e6`` did)
MAX_COUNT = 10**9  # iterations, nodes, trials...: more than any run could use, small enough for every C int


def _number(text: str, kind: type) -> float | int:
    what = "an integer" if kind is int else "a number"
    try:
        value = kind(text)
    except (ValueError, OverflowError):
        raise argparse.ArgumentTypeError(f"expected {what}, got {text!r}") from None
    if kind is float and not math.isfinite(value):
        raise argparse.ArgumentTypeError(f"expected a finite number, got {text!r}")
    return value


def _shown(x: float) -> str:
    return f"{int(x):,}" if float(x).is_integer() and abs(x) < 1e15 else f"{x:g}"


def number_in(kind: type, low: float, high: float | None = None, above: bool = False) -> Callable[[str], Any]:
    """An argparse type: ``kind`` (int or float) with ``low <= value`` (``low < value`` when
    ``above``) and ``value <= high``. argparse names the flag in the message (``argument --beam:
    expected an integer >= 1, got '0'``), so every numeric flag fails at parse time, by name."""
    bound = f"{'>' if above else '>='} {_shown(low)}" + (f" and <= {_shown(high)}" if high is not None else "")

    def parse(text: str) -> Any:
        value = _number(text, kind)
        if (value <= low if above else value < low) or (high is not None and value > high):
            raise argparse.ArgumentTypeError(
                f"expected {'an integer' if kind is int else 'a number'} {bound}, got {text!r}")
        return value
    parse.__name__ = kind.__name__  # argparse's fallback message names the type
    parse.bounds = (kind, low, high, above)  # type: ignore[attr-defined]  # for the flag fuzz test
    return parse


def finite_float(text: str) -> float:
    """An argparse type: a finite float (no nan or inf)."""
    return float(_number(text, float))


def non_negative(kind: Callable[[str], Any]) -> Callable[[str], Any]:
    """An argparse type: ``kind`` and >= 0 (seconds at most ``MAX_SECONDS``, counts ``MAX_COUNT``)."""
    return number_in(float, 0, MAX_SECONDS) if kind is float else number_in(int, 0, MAX_COUNT)


positive_int = number_in(int, 1, MAX_COUNT)
seed_int = number_in(int, 0, 2**63 - 1)  # numpy's generators take no negative seed
seconds = number_in(float, 0, MAX_SECONDS)
positive_seconds = number_in(float, 0, MAX_SECONDS, above=True)
thread_count = number_in(int, 1, OVERSUBSCRIBE * (os.cpu_count() or 1))  # as ort-cpu:N (100,000 threads hung)


def list_of(item: Callable[[str], Any], empty: bool = False) -> Callable[[str], str]:
    """An argparse type: comma-separated values of the bounded number type ``item``, kept as text
    for the command (which splits it with :func:`split_list`); ``empty`` allows "" (the command's
    default list). The message names the bad element, and argparse names the flag."""
    kind, low, high, above = item.bounds  # type: ignore[attr-defined]

    def parse(text: str) -> str:
        parts = split_list(text)
        if not parts and not empty:
            raise argparse.ArgumentTypeError(f"expected a comma-separated list, got {text!r}")
        for part in parts:
            try:
                item(part)
            except argparse.ArgumentTypeError as exc:
                raise argparse.ArgumentTypeError(f"{exc} (in the list {text!r})") from None
        return text
    parse.__name__ = "list"
    parse.bounds = item.bounds  # type: ignore[attr-defined]  # of each element, for the flag fuzz test
    parse.listed = True  # type: ignore[attr-defined]
    return parse


count_list = list_of(positive_int)  # tune --trials 32,64,128


def device_arg(text: str) -> str:
    """An argparse type for ``--device``: an ``ort-cpu:N`` thread count is checked at parse time
    (:func:`eqsat.cost.registry.measured_threads`); other names are checked when used."""
    from eqsat.cost.registry import measured_threads

    try:
        measured_threads(text)
    except ValueError as exc:
        raise argparse.ArgumentTypeError(str(exc)) from None
    return text


def device_list(text: str) -> str:
    """An argparse type for ``--devices``: comma-separated names, each checked as ``--device`` is
    (:func:`device_arg`), kept as text for the command."""
    for name in split_list(text):
        device_arg(name)
    return text


def device_help(default: str = DEFAULT_DEVICE) -> str:
    measured = ", ".join(f"{d.name}[:threads] ({d.note})" for d in MEASURED_DEVICES.values())
    tuned = ", ".join(f"{d.name}[:source] ({d.note})" for d in TUNED_DEVICES.values())
    return f"roofline device: {', '.join(DEVICES)} or a .json profile; or measured on this machine: {measured}; " \
           f"or tuned: {tuned} (default {default})"


def add_device(p: argparse.ArgumentParser, default: str = DEFAULT_DEVICE) -> None:
    p.add_argument("--device", type=device_arg, default=default, help=device_help(default))


def add_models(p: argparse.ArgumentParser, default_text: str) -> None:
    p.add_argument("--models", default="", help=f"comma-separated models (default: {default_text})")


def add_zoo_input(p: argparse.ArgumentParser) -> None:
    """``--models`` (a folder of .onnx files) or ``--zoo`` (zoo models to generate): the input of
    every experiment that runs a folder of ONNX files."""
    p.add_argument("--models", help="a folder of .onnx files (default: the zoo's twelve models, generated into --out)")
    p.add_argument("--zoo", default="", help="comma-separated zoo models to generate (default all)")


def add_sweep_options(p: argparse.ArgumentParser, out: str, device: bool = True, seed: bool = True) -> None:
    """The options every resumable experiment takes."""
    if device:
        add_device(p)
    p.add_argument("--out", default=out, help=f"output folder; finished cells are read back from it (default {out})")
    if seed:
        p.add_argument("--seed", type=seed_int, default=0, help="seed of the numerical checks' random inputs")
    p.add_argument("--workers", type=positive_int, default=1,
                   help="local processes running cells (timings are fairest at 1)")
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
    """The command as typed, for the header of result files, spelled as the ``eqsat-lab`` script
    (also when run as ``python -m experiments.cli``); "" when called from other code."""
    script = sys.argv[0].replace("\\", "/") if sys.argv else ""
    return "eqsat-lab " + " ".join(sys.argv[1:]) if script.endswith(("eqsat-lab", "experiments/cli.py")) else ""


def progress() -> bool:
    """Progress bars only on a terminal."""
    return sys.stderr.isatty()


def run_options(args: argparse.Namespace) -> RunOptions:
    """How the cells run, from ``--workers`` and ``--executor`` (progress bars only on a terminal)."""
    from experiments.sweep import RunOptions

    return RunOptions(workers=args.workers, executor=args.executor, progress=progress())


def sweep_kwargs(args: argparse.Namespace) -> dict[str, Any]:
    """The keyword arguments every experiment's ``run`` takes from the sweep options: ``options``
    (a :class:`~experiments.sweep.RunOptions`) and the ``command`` as typed."""
    return {"options": run_options(args), "command": command_line()}


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
    (with ``--batch``/``--dim``); the second value is the ONNX import, or None. A graph too large
    for this machine's memory is refused (:func:`eqsat.pipeline.load_source`)."""
    from eqsat.pipeline import load_source

    return load_source(args.model, args.batch, parse_dims(args.dim), parse_params(args.param))
