"""PyTorch in and out: a ``torch.export``-ed program into the IR, and a graph back as a module.

The route is PyTorch's own dynamo ONNX exporter (``torch.onnx.export(ep, dynamo=True)``, the
``onnxscript`` package) and the project's ONNX importer (:func:`eqsat.onnx.load` on the in-memory
model), so a PyTorch program imports with exactly the coverage the importer has on the zoo, whose
files are written the way that exporter writes them: the model's real weights become ``weight``
leaves (kept by name, in float64), an op the importer has no row for stays ``opaque`` (the ONNX
node itself, run in PyTorch where the op table's torch column knows it, else by onnxruntime on
the host). Going through aten directly would need a second importer with its own coverage.

:func:`from_exported` and :func:`from_module` import; :func:`to_torch` builds a
:class:`TorchGraphModule` that takes and returns what the original did (its dtypes, devices and
output structure); :func:`check_same` compares two sets of outputs. Every error is an
:class:`~eqsat.errors.UnsupportedError` of one sentence; the user's module is never changed.
"""
from __future__ import annotations

import contextlib
import io
import logging
import re
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
import torch
from torch.utils import _pytree as pytree

from eqsat.errors import EqsatError, UnsupportedError
from eqsat.ir.graph import Graph
from eqsat.onnx.common import Imported

ONNX_TORCH_DTYPES: dict[int, torch.dtype] = {
    1: torch.float32, 10: torch.float16, 11: torch.float64, 16: torch.bfloat16, 2: torch.uint8, 3: torch.int8,
    4: torch.uint16, 5: torch.int16, 6: torch.int32, 7: torch.int64, 9: torch.bool, 12: torch.uint32,
    13: torch.uint64,
}
"""ONNX element type -> the torch dtype a graph input or output has."""

_QUIET_LOGGERS = ("torch.onnx", "torch.export", "torch._export", "onnxscript", "onnx_ir", "torch.fx.experimental")


def one_line(exc: BaseException) -> str:
    """An exception as one short line: the first line of its innermost cause (PyTorch's exporter
    wraps the op it cannot translate in two layers of advice), colours and whitespace removed."""
    while exc.__cause__ is not None:
        exc = exc.__cause__
    text = re.sub(r"\x1b\[[0-9;]*m", "", str(exc)).strip().splitlines()
    first = " ".join(text[0].split()) if text else type(exc).__name__
    return first[:300]


class ExportError(UnsupportedError):
    """PyTorch's ONNX exporter refused the program; ``op``: the op it has no ONNX function for
    (``aten._transformer_encoder_layer_fwd``, a user's ``mylib.kernel``), when that was why."""

    def __init__(self, message: str, op: str = ""):
        super().__init__(message)
        self.op = op


def missing_op(exc: BaseException) -> str:
    """The op named by the exporter's "No ONNX function found for <OpOverload(op='ns.name', ...)>"
    anywhere in ``exc``'s causes, or ''."""
    while exc is not None:
        found = re.search(r"No ONNX function found for <OpOverload\(op='([\w.]+)'", str(exc))
        if found:
            return found.group(1)
        exc = exc.__cause__
    return ""


@contextlib.contextmanager
def quiet() -> Iterator[None]:
    """PyTorch's exporter prints progress and logs warnings (a missing torchvision, ...): a user
    of this module hears one line from it, not those."""
    saved = [(logging.getLogger(n), logging.getLogger(n).level) for n in _QUIET_LOGGERS]
    for logger, _ in saved:
        logger.setLevel(logging.ERROR)
    try:
        with contextlib.redirect_stdout(io.StringIO()), contextlib.redirect_stderr(io.StringIO()):
            yield
    finally:
        for logger, level in saved:
            logger.setLevel(level)


@dataclass(frozen=True)
class TorchImport:
    """A PyTorch program read into the IR: the ONNX import (graph, real weights by leaf name,
    interface names and element types, opaque ops), and how to call and answer like the program:
    the output pytree spec, each flat input's dtype and device."""

    imported: Imported
    out_spec: Any
    in_dtypes: tuple[torch.dtype, ...]
    device: torch.device

    @property
    def graph(self) -> Graph:
        return self.imported.graph

    @property
    def weights(self) -> dict[str, np.ndarray]:
        return self.imported.weights

    @property
    def opaque(self) -> list[str]:
        return self.imported.opaque


def _check_dtypes(tensors: Sequence[Any], what: str) -> None:
    for k, t in enumerate(tensors):
        if isinstance(t, torch.Tensor) and (t.is_complex() or t.dtype not in ONNX_TORCH_DTYPES.values()):
            raise UnsupportedError(f"{what} {k} is {t.dtype}, which eqsat cannot compute in (it reads float32, "
                                   f"float16, float64, integer and bool tensors)")


_TRAINING_ARG = {"batch_norm": 5, "native_batch_norm": 5, "_native_batch_norm_legit": 5, "dropout": 2,
                 "native_dropout": 2, "feature_dropout": 2, "alpha_dropout": 2}
"""aten ops that train when one argument (its position) is True: BatchNorm updates its running
statistics, dropout draws a mask."""


def _training_op(ep: torch.export.ExportedProgram) -> str:
    """What in ``ep`` only training does (a training-mode BatchNorm or dropout, an in-place op on a
    buffer, weight or input), or ''."""
    found = []
    for n in ep.graph.nodes:
        target = n.target
        if n.op != "call_function" or not isinstance(target, torch._ops.OpOverload):
            continue
        name = target._schema.name.split("::")[-1]
        k = _TRAINING_ARG.get(name)
        if k is not None and len(n.args) > k and n.args[k] is True:
            return f"runs {name} in training mode"
        written = [a for a, arg in zip(n.args, target._schema.arguments)
                   if arg.alias_info is not None and arg.alias_info.is_write]
        if any(isinstance(a, torch.fx.Node) and a.op == "placeholder" for a in written):
            found.append(f"changes a tensor in place ({name})")  # relu_ of a temporary is fine
    return found[0] if found else ""


def from_exported(ep: torch.export.ExportedProgram, name: str = "") -> TorchImport:
    """Import an ``ExportedProgram`` (see the module docstring). A program that mutates its
    buffers or inputs (training-mode BatchNorm), takes or returns complex or other dtypes the IR
    cannot compute in, or that the ONNX exporter cannot write is refused in one sentence."""
    from eqsat import onnx as onnx_io

    sig = ep.graph_signature
    mutated = sorted(sig.buffers_to_mutate.values()) + sorted(getattr(sig, "user_inputs_to_mutate", {}).values())
    why = f"changes {mutated[0]!r} in place" if mutated else _training_op(ep)
    if why:
        hint = ("call .eval() on the module first" if "training mode" in why else
                "it optimizes graphs that change no weight, buffer or input")
        raise UnsupportedError(f"the program {why}; eqsat optimizes inference graphs: {hint}")
    placeholders = [n for n in ep.graph.nodes if n.op == "placeholder"]
    user = [n.meta.get("val") for n in placeholders if n.name in set(sig.user_inputs)]
    _check_dtypes(user, "input")
    outs = list(ep.graph.output_node().args[0])
    _check_dtypes([o.meta.get("val") for o in outs if hasattr(o, "meta")], "output")
    try:
        with quiet(), torch.no_grad():
            program = torch.onnx.export(ep, dynamo=True, verbose=False, report=False)
    except ImportError as exc:
        raise UnsupportedError(f"importing a PyTorch program needs onnxscript ({one_line(exc)}): "
                               f"pip install 'eqsat-lab[torch]'") from None
    except Exception as exc:  # the exporter raises many types; the user hears one sentence
        raise ExportError(f"PyTorch's ONNX exporter cannot write this program: {one_line(exc)}",
                          missing_op(exc)) from None
    model = program.model_proto
    model.graph.name = name or model.graph.name or "torch"
    try:
        imported = onnx_io.load(model)
    except EqsatError as exc:
        raise UnsupportedError(f"the exported program cannot be imported: {one_line(exc)}") from None
    devices = {v.device for v in user if isinstance(v, torch.Tensor)} - {torch.device("meta")}
    device = next(iter(devices)) if len(devices) == 1 else torch.device("cpu")
    in_dtypes = tuple(v.dtype if isinstance(v, torch.Tensor) else torch.float32 for v in user)
    return TorchImport(imported, ep.call_spec.out_spec, in_dtypes, device)


def export(module: torch.nn.Module, example_inputs: Sequence[Any],
           kwargs: Mapping[str, Any] | None = None) -> torch.export.ExportedProgram:
    """``torch.export.export`` of ``module`` on ``example_inputs`` (non-strict: no bytecode
    tracing), its failure one sentence. The module is not changed (export traces fake tensors)."""
    if not isinstance(module, torch.nn.Module):
        raise UnsupportedError(f"expected a torch.nn.Module, got {type(module).__name__}")
    args = tuple(example_inputs) if isinstance(example_inputs, (tuple, list)) else (example_inputs,)
    _check_dtypes([t for t in pytree.tree_leaves((args, kwargs or {}))], "input")
    try:
        with quiet():
            return torch.export.export(module, args, dict(kwargs or {}), strict=False)
    except Exception as exc:
        raise UnsupportedError(f"torch.export cannot capture {type(module).__name__}: {one_line(exc)}") from None


def from_module(module: torch.nn.Module, example_inputs: Sequence[Any],
                kwargs: Mapping[str, Any] | None = None) -> TorchImport:
    """Import ``module`` as called on ``example_inputs``: :func:`export` then :func:`from_exported`."""
    return from_exported(export(module, example_inputs, kwargs), type(module).__name__)


class TorchGraphModule(torch.nn.Module):
    """A graph of the IR as a drop-in for the program it was imported from: ``forward`` takes the
    program's flat tensor inputs (any non-tensor argument is ignored: export specialized it), casts
    them to the dtype the graph computes in, and returns the program's outputs in their own dtypes
    and structure (``as_tuple``: a flat tuple, as a ``torch.compile`` backend must). ``inner`` is
    the :class:`~eqsat.pytorch.module.GraphModule` that runs the graph."""

    def __init__(self, inner: torch.nn.Module, positions: Sequence[int], out_dtypes: Sequence[torch.dtype],
                 out_spec: Any, as_tuple: bool = False):
        super().__init__()
        self.inner = inner
        self.positions = tuple(positions)
        self.out_dtypes = tuple(out_dtypes)
        self.out_spec = out_spec
        self.as_tuple = as_tuple

    def forward(self, *args: Any, **kwargs: Any) -> Any:
        flat = [x for x in pytree.tree_leaves((args, kwargs)) if isinstance(x, torch.Tensor)]
        dtype, device = self.inner.dtype, self.inner.device
        inputs = [flat[k].to(device=device, dtype=dtype) for k in self.positions]
        outs = [o.to(dt) for o, dt in zip(self.inner(*inputs), self.out_dtypes)]
        if self.as_tuple or self.out_spec is None:
            return tuple(outs)
        return pytree.tree_unflatten(outs, self.out_spec)


def to_torch(graph: Graph, source: TorchImport, *, device: str | torch.device | None = None,
             dtype: str | None = None, as_tuple: bool = False, layout: str = "contiguous") -> TorchGraphModule:
    """``graph`` (``source``'s graph or one optimized from it: same inputs, outputs and weight
    names) as a :class:`TorchGraphModule` with ``source``'s real weights, on ``device`` (default:
    where the program's inputs were) computing in ``dtype`` (default: the program's float type),
    its 4-D tensors in ``layout`` (:data:`eqsat.pytorch.module.MEMORY_FORMATS`)."""
    from eqsat.onnx import interface_dtype
    from eqsat.pytorch.module import to_module

    imp = source.imported
    present = {n.attr("name") for n in graph.leaves("input")}
    names = [n for n in imp.input_names if n in present]
    inner = to_module(graph, imp.weights, device=str(device or source.device), dtype=dtype or interface_dtype(imp),
                      input_names=names, layout=layout)
    positions = [imp.input_names.index(n) for n in names]
    out_dtypes = []
    for name in imp.output_names:
        elem = imp.elem_types.get(name, 1)
        if elem not in ONNX_TORCH_DTYPES:
            raise UnsupportedError(f"output {name!r} has ONNX element type {elem}, which PyTorch cannot return here")
        out_dtypes.append(ONNX_TORCH_DTYPES[elem])
    return TorchGraphModule(inner, positions, out_dtypes, source.out_spec, as_tuple)


def tolerance(dtype: torch.dtype) -> tuple[float, float]:
    """(rtol, atol) two computations of one float program agree within: a rewrite reorders sums."""
    return {torch.float16: (1e-2, 1e-2), torch.bfloat16: (5e-2, 5e-2), torch.float64: (1e-7, 1e-9)}.get(
        dtype, (1e-3, 1e-4))


def check_same(expected: Any, got: Any) -> str:
    """'' when ``got`` equals ``expected`` (same structure, shapes and dtypes; floats within
    :func:`tolerance`, relative to the output's scale), else what differs, in a few words."""
    want, spec = pytree.tree_flatten(expected)
    have, spec2 = pytree.tree_flatten(got)
    if len(want) != len(have):
        return f"{len(have)} outputs, the original returns {len(want)}"
    for k, (a, b) in enumerate(zip(want, have)):
        if not isinstance(a, torch.Tensor):
            continue
        if not isinstance(b, torch.Tensor) or a.shape != b.shape or a.dtype != b.dtype:
            what = f"{b.dtype} {tuple(b.shape)}" if isinstance(b, torch.Tensor) else type(b).__name__
            return f"output {k} is {what}, the original's is {a.dtype} {tuple(a.shape)}"
        if a.is_floating_point():
            rtol, atol = tolerance(a.dtype)
            a64, b64 = a.detach().to("cpu", torch.float64), b.detach().to("cpu", torch.float64)
            scale = float(a64.abs().max()) if a64.numel() else 0.0
            err = float((a64 - b64).abs().max()) if a64.numel() else 0.0
            if not err <= atol + rtol * scale:
                return f"output {k} differs by {err:.3g} (scale {scale:.3g})"
        elif not torch.equal(a.cpu(), b.cpu()):
            return f"output {k} differs"
    return ""
